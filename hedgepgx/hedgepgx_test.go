package hedgepgx

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestHedgeEscapesStalledReplica stalls one standby and reads until
// several reads had their first copy there: each is answered by a hedge,
// correctly, and none by the stalled server.
func TestHedgeEscapesStalledReplica(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE stall_t AS SELECT generate_series(1, 100) AS id")
	c := client(t, pools(t, true, set.All()...), hedgeNow(5*time.Millisecond))
	stalled := 1 // set.Standbys[0]
	st, err := set.Standbys[0].Stall()
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			st.Release()
		}
	}()
	ctx := t.Context()
	for n := 0; c.Stats().Servers[stalled].Copies < 3; n++ {
		if n == 1000 {
			t.Fatalf("1000 reads, and the Hedger sent fewer than 3 copies to the stalled standby")
		}
		var sum int
		if err := c.QueryRow(ctx, "SELECT sum(id) FROM stall_t").Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum != 5050 {
			t.Fatalf("sum = %d, want 5050", sum)
		}
		got, err := Collect(ctx, c, pgx.RowTo[int32], "SELECT id FROM stall_t WHERE id <= $1 ORDER BY id", 3)
		if err != nil || len(got) != 3 || got[2] != 3 {
			t.Fatalf("Collect = %v, %v", got, err)
		}
	}
	released = true
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if w := s.Servers[stalled].Wins; w != 0 {
		t.Errorf("the stalled standby won %d reads", w)
	}
	if h := s.Op("SELECT sum(id) FROM stall_t").HedgeWins + s.Op("SELECT id FROM stall_t WHERE id <= $1 ORDER BY id").HedgeWins; h == 0 {
		t.Errorf("no hedge won, although %d copies went to the stalled standby", s.Servers[stalled].Copies)
	}
}

// TestWritesGoToThePrimaryOnce sends writes with a hedge delay of zero:
// each runs once, on the primary.
func TestWritesGoToThePrimaryOnce(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE writes_t (n int)")
	c := client(t, pools(t, true, set.All()...), hedgeNow(0))
	ctx := t.Context()
	const n = 50
	var last LSN
	for i := range n {
		if i%2 == 0 {
			if _, err := c.Exec(ctx, "INSERT INTO writes_t VALUES ($1)", i); err != nil {
				t.Fatal(err)
			}
			continue
		}
		_, lsn, err := c.ExecLSN(ctx, "INSERT INTO writes_t VALUES ($1)", i)
		if err != nil {
			t.Fatal(err)
		}
		if lsn <= last {
			t.Errorf("ExecLSN position %v after %v", lsn, last)
		}
		last = lsn
	}
	cnt, err := CollectOne(WithMinLSN(ctx, last), c, pgx.RowTo[int64], "SELECT count(*) FROM writes_t")
	if err != nil || cnt != n {
		t.Fatalf("%d rows after %d writes (%v)", cnt, n, err)
	}
	s := c.Stats()
	for i, r := range s.Servers {
		want := int64(0)
		if r.Primary {
			want = n
		}
		if r.Writes != want {
			t.Errorf("server %d: %d writes, want %d", i, r.Writes, want)
		}
	}
	if _, err := Collect(ctx, c, pgx.RowTo[int32], "  /* x */ INSERT INTO writes_t VALUES (1) RETURNING n"); !errors.Is(err, ErrNotRead) {
		t.Errorf("an INSERT as a read: %v, want ErrNotRead", err)
	}
	// A write disguised as a read is refused by a standby (25006), an
	// answer that ends the read, but runs wherever a copy goes to the
	// primary: the sequence advances once per copy sent there, no more.
	exec(t, set, "CREATE SEQUENCE writes_seq")
	for range 20 {
		_, err := c.ExecRead(ctx, "SELECT nextval('writes_seq')")
		var pe *pgconn.PgError
		if err != nil && !(errors.As(err, &pe) && pe.Code == "25006") {
			t.Fatal(err)
		}
	}
	var v int64
	var called bool
	if err := c.Primary().QueryRow(ctx, "SELECT last_value, is_called FROM writes_seq").Scan(&v, &called); err != nil {
		t.Fatal(err)
	}
	if !called {
		v = 0
	}
	if p := c.Stats().Servers[0].Copies; v > p {
		t.Errorf("sequence at %d after %d copies sent to the primary", v, p)
	}
}

// TestReadYourWrites pauses one standby's replay and runs 10,000 hedged
// reads, each after a write it must see (a batch of reads per write,
// four readers at a time), counting stale reads: there must be none.
func TestReadYourWrites(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE ryw (id int PRIMARY KEY, v bigint); INSERT INTO ryw VALUES (1, 0)")
	pauseReplay(t, set, set.Standbys[0])
	c := client(t, pools(t, true, set.All()...), hedgeNow(200*time.Microsecond))
	ctx := t.Context()
	reads := 10000
	if s := os.Getenv("HEDGEPGX_RYW_READS"); s != "" {
		reads, _ = strconv.Atoi(s)
	}
	const perWrite, readers = 50, 4
	var stale, done atomic.Int64
	for w := int64(1); done.Load() < int64(reads); w++ {
		_, lsn, err := c.ExecLSN(ctx, "UPDATE ryw SET v = $1 WHERE id = 1", w)
		if err != nil {
			t.Fatal(err)
		}
		rctx := WithMinLSN(ctx, lsn)
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				for range perWrite / readers {
					v, err := CollectOne(rctx, c, pgx.RowTo[int64], "SELECT v FROM ryw WHERE id = 1")
					if err != nil {
						t.Error(err)
						return
					}
					if v != w {
						stale.Add(1)
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	s := c.Stats()
	op := s.Op("SELECT v FROM ryw WHERE id = 1")
	t.Logf("%d reads, %d stale; hedges %d (won %d), unhedgeable %d; wins by server: primary %d, paused standby %d, running standby %d; redirected %d/%d/%d",
		done.Load(), stale.Load(), op.Hedges, op.HedgeWins, op.Unhedgeable,
		s.Servers[0].Wins, s.Servers[1].Wins, s.Servers[2].Wins,
		s.Servers[0].Redirected, s.Servers[1].Redirected, s.Servers[2].Redirected)
	if n := stale.Load(); n != 0 {
		t.Errorf("%d of %d reads missed the write made before them", n, done.Load())
	}
	if w := s.Servers[1].Wins; w > 0 {
		t.Errorf("the paused standby answered %d reads", w)
	}
	if s.Servers[2].Wins == 0 {
		t.Errorf("the running standby answered no read: reads all went to the primary")
	}
}

// TestMaxLag keeps a standby whose replay is paused, and so falls behind,
// out of reads without a minimum position once its lag is over MaxLag.
func TestMaxLag(t *testing.T) {
	set := replicaSet(t)
	exec(t, set, "CREATE TABLE lag_t (v bigint)")
	pauseReplay(t, set, set.Standbys[0])
	cfg := hedgeNow(time.Millisecond)
	cfg.MaxLag = 1024
	c := client(t, pools(t, true, set.All()...), cfg)
	ctx := t.Context()
	// Write well over MaxLag of WAL, and wait until the Client knows the
	// running standby has it (the primary's position is read at once).
	_, lsn, err := c.ExecLSN(ctx, "INSERT INTO lag_t SELECT generate_series(1, 1000)")
	if err != nil {
		t.Fatal(err)
	}
	for c.Stats().Servers[2].LSN < lsn {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for range 200 {
		if _, err := CollectOne(ctx, c, pgx.RowTo[int64], "SELECT count(*) FROM lag_t"); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Stats()
	if n := s.Servers[1].Copies; n != 0 {
		t.Errorf("the lagging standby got %d copies", n)
	}
	if s.Servers[2].Wins == 0 {
		t.Errorf("the standby in time answered no read")
	}
}

// TestCloseFailsCalls: calls after Close fail with ErrClosed.
func TestCloseFailsCalls(t *testing.T) {
	set := replicaSet(t)
	c := client(t, pools(t, true, set.All()...), Config{})
	c.Close()
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SELECT 1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Exec after Close: %v", err)
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&v); !errors.Is(err, ErrClosed) {
		t.Errorf("QueryRow after Close: %v", err)
	}
}
