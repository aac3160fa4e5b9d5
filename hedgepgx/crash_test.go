package hedgepgx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge/internal/pgtest"
)

// TestReadYourWritesThroughCrash runs hedged reads with WithMinLSN while a
// standby that had replayed the write crashes (pg_ctl stop -m immediate)
// and restarts with its commits held back (recovery_min_apply_delay): it
// accepts connections at its consistency point, before the write, below
// the position the Client had read from it. No read may return data
// older than the write. "polled" reads positions every 2 ms, as a Client
// does; "connection check" reads them once before the crash and never
// again, so that only what is checked on the connection that serves a
// copy keeps the restarted standby's answers out.
func TestReadYourWritesThroughCrash(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"polled", 2 * time.Millisecond}, {"connection check", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) { readThroughCrash(t, tc.every) })
	}
}

func readThroughCrash(t *testing.T, every time.Duration) {
	pgtest.Need(t)
	// No background writes of dirty buffers on the standbys, so that a
	// crashed one restarts from the consistency point its restartpoint
	// set, before the test's writes.
	set, err := pgtest.StartReplicaSet(pgtest.Options{Args: []string{"bgwriter_lru_maxpages=0"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	crashed := set.Standbys[0] // pool 1
	exec(t, set, "CREATE TABLE crash_t (id int PRIMARY KEY, v bigint); INSERT INTO crash_t VALUES (1, 0); CHECKPOINT")
	if _, err := pools(t, true, crashed)[0].Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	cfg := hedgeNow(200 * time.Microsecond)
	cfg.LagInterval = every
	c := client(t, pools(t, true, set.All()...), cfg)
	const writes = 20
	var lsn LSN
	for w := 1; w <= writes; w++ {
		if _, lsn, err = c.ExecLSN(ctx, "UPDATE crash_t SET v = $1 WHERE id = 1", w); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	// The Client knows that every standby has replayed the last write.
	for i := range c.Len() {
		for c.Stats().Servers[i].LSN < lsn {
			c.readPosition(ctx, i, time.Second)
		}
	}

	rctx := WithMinLSN(ctx, lsn)
	var stale, done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				var v int64
				var err error
				switch (r + n) % 3 {
				case 0:
					v, err = CollectOne(rctx, c, pgx.RowTo[int64], "SELECT v FROM crash_t WHERE id = 1")
				case 1:
					err = c.QueryRow(rctx, "SELECT v FROM crash_t WHERE id = $1", 1).Scan(&v)
				case 2:
					v, err = Read(rctx, c, "read", func(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
						var v int64
						return v, conn.QueryRow(ctx, "SELECT v FROM crash_t WHERE id = 1").Scan(&v)
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if v != writes {
					stale.Add(1)
				}
				done.Add(1)
			}
		})
	}
	defer wg.Wait()
	defer stop.Store(true)
	waitReads := func(n int64) {
		for done.Load() < n {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitReads(300)
	if err := crashed.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := crashed.Restart("recovery_min_apply_delay=1h"); err != nil {
		t.Fatal(err)
	}
	// The test shows something only if the standby came back behind.
	var behind bool
	if err := pools(t, true, crashed)[0].QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() < $1::text::pg_lsn", lsn.String()).Scan(&behind); err != nil {
		t.Fatal(err)
	}
	if !behind {
		t.Fatalf("the restarted standby is not behind the write at %v", lsn)
	}
	restarted := done.Load()
	waitReads(restarted + 3000)
	stop.Store(true)
	wg.Wait()
	s := c.Stats()
	t.Logf("%d reads (%d after the restart), %d stale; copies to the crashed standby %d, failed %d, found behind %d; wins by server %d/%d/%d",
		done.Load(), done.Load()-restarted, stale.Load(), s.Servers[1].Copies, s.Servers[1].Failed, s.Servers[1].Behind,
		s.Servers[0].Wins, s.Servers[1].Wins, s.Servers[2].Wins)
	if n := stale.Load(); n != 0 {
		t.Errorf("%d of %d reads returned data older than the write they were made after", n, done.Load())
	}
	if every == time.Hour && s.Servers[1].Behind == 0 {
		t.Errorf("no copy found the restarted standby behind, although no poll saw it restart")
	}
}

// TestCheckedOnTheConnection makes the Client believe that a standby whose
// replay is paused has replayed a write it has not (as after a restart
// the Client has not seen), before every read of the write: under each
// query mode and isolation level, no read returns the older data, and
// the copies that went to that standby found it behind.
func TestCheckedOnTheConnection(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE checked_t (id int PRIMARY KEY, v bigint); INSERT INTO checked_t VALUES (1, 0)")
	pauseReplay(t, set, set.Standbys[0])
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		for _, iso := range []string{"read committed", "repeatable read"} {
			t.Run(mode.String()+"/"+iso, func(t *testing.T) {
				ps := pools(t, true, set.All()...)
				for i, p := range ps {
					cfg := p.Config()
					cfg.ConnConfig.DefaultQueryExecMode = mode
					cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
					np, err := pgxpool.NewWithConfig(t.Context(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(np.Close)
					ps[i] = np
				}
				cfg := hedgeNow(200 * time.Microsecond)
				cfg.LagInterval = time.Hour // the positions are the test's
				c := client(t, ps, cfg)
				ctx := t.Context()
				w := time.Now().UnixNano()
				_, lsn, err := c.ExecLSN(ctx, "UPDATE checked_t SET v = $1 WHERE id = 1", w)
				if err != nil {
					t.Fatal(err)
				}
				if err := set.Standbys[1].WaitCaughtUpTo(ctx, set.Primary); err != nil {
					t.Fatal(err)
				}
				rctx := WithMinLSN(ctx, lsn)
				stale := 0
				for n := range 120 {
					for i := 1; i < c.Len(); i++ {
						c.reps[i].lsn.Store(uint64(lsn))
					}
					var v int64
					var err error
					switch n % 4 {
					case 0:
						v, err = CollectOne(rctx, c, pgx.RowTo[int64], "SELECT v FROM checked_t WHERE id = 1")
					case 1:
						err = c.QueryRow(rctx, "SELECT v FROM checked_t WHERE id = $1", 1).Scan(&v)
					case 2:
						var tag pgconn.CommandTag
						tag, err = c.ExecRead(rctx, "SELECT 1 FROM checked_t WHERE v = $1", w)
						if tag.RowsAffected() == 1 {
							v = w
						}
					case 3:
						v, err = Read(rctx, c, "read", func(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
							var v int64
							return v, conn.QueryRow(ctx, "SELECT v FROM checked_t WHERE id = 1").Scan(&v)
						})
					}
					if err != nil {
						t.Fatal(err)
					}
					if v != w {
						stale++
					}
				}
				s := c.Stats()
				if stale != 0 {
					t.Errorf("%d of 120 reads missed the write", stale)
				}
				if s.Servers[1].Behind == 0 || s.Servers[1].Wins != 0 {
					t.Errorf("the paused standby was found behind %d times and won %d reads", s.Servers[1].Behind, s.Servers[1].Wins)
				}
				if s.Servers[2].Behind != 0 {
					t.Errorf("the running standby was found behind %d times", s.Servers[2].Behind)
				}
			})
		}
	}
}

// TestBehindMovesOn lets the Hedger send one copy per read
// (MaxAttempts 1): a copy that finds its standby behind (its replay
// paused, its known position set past it) moves on to another server
// within the same copy, so that every read is answered, none stale.
func TestBehindMovesOn(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE moves_t (id int PRIMARY KEY, v bigint); INSERT INTO moves_t VALUES (1, 0)")
	pauseReplay(t, set, set.Standbys[0])
	cfg := hedgeNow(time.Hour)
	cfg.LagInterval = time.Hour // the positions are the test's
	cfg.Hedge.MaxAttempts = 1
	c := client(t, pools(t, true, set.All()...), cfg)
	ctx := t.Context()
	_, lsn, err := c.ExecLSN(ctx, "UPDATE moves_t SET v = 1 WHERE id = 1")
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Standbys[1].WaitCaughtUpTo(ctx, set.Primary); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		c.reps[1].lsn.Store(uint64(lsn))
		c.reps[2].lsn.Store(uint64(lsn))
		v, err := CollectOne(WithMinLSN(ctx, lsn), c, pgx.RowTo[int64], "SELECT v FROM moves_t WHERE id = 1")
		if err != nil {
			t.Fatal(err)
		}
		if v != 1 {
			t.Fatalf("read %d, want 1", v)
		}
	}
	if s := c.Stats(); s.Servers[1].Behind == 0 || s.Servers[1].Wins != 0 {
		t.Errorf("the paused standby was found behind %d times and won %d reads", s.Servers[1].Behind, s.Servers[1].Wins)
	}
}
