package hedgepgx

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/pgtest"
	"go.uber.org/goleak"
)

// TestMain runs the tests, stops the shared clusters, and then checks
// that no test left a goroutine behind: not the Client's copies or
// pollers, not pgx's, not pgtest's reapers.
func TestMain(m *testing.M) {
	os.Exit(shared.Run(m, func() error { return goleak.Find() }))
}

// shared is a primary with two standbys, started by the first test that
// needs it and stopped by TestMain: starting one takes seconds.
var shared pgtest.Shared

func replicaSet(t *testing.T) *pgtest.ReplicaSet {
	t.Helper()
	return shared.Get(t, 2, nil)
}

// hedgeNow is a Config that hedges every read still running after d,
// with no budget and none of the spare-capacity or payoff rules, and
// picks servers uniformly, so that copies go where the tests need them.
func hedgeNow(d time.Duration) Config {
	return Config{
		LagInterval: 2 * time.Millisecond,
		Hedge: hedge.Config{Delay: hedge.Fixed(d), NoBudget: true,
			MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, Picker: hedge.Picker{Random: true}},
	}
}

// pools makes one pool per cluster, keeping connections on cancel when
// keep is set, closed when the test ends.
func pools(t *testing.T, keep bool, clusters ...*pgtest.Cluster) []*pgxpool.Pool {
	t.Helper()
	var ps []*pgxpool.Pool
	for _, c := range clusters {
		pc, err := pgxpool.ParseConfig(c.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		pc.MaxConns = 64
		if keep {
			KeepConnsOnCancel(pc)
		}
		p, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		ps = append(ps, p)
	}
	return ps
}

// client returns a Client over ps, closed when the test ends, after which
// every pool must have no connection acquired.
func client(t *testing.T, ps []*pgxpool.Pool, cfg Config) *Client {
	t.Helper()
	c, err := New(ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		// pgxpool destroys a connection released broken (pgx's default
		// on cancel) on a goroutine of its own: give that a moment.
		deadline := time.Now().Add(5 * time.Second)
		for i, p := range ps {
			for p.Stat().AcquiredConns() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := p.Stat().AcquiredConns(); n != 0 {
				t.Errorf("pool %d: %d connections still acquired 5 s after Close", i, n)
			}
		}
	})
	return c
}

// exec runs sql on the primary.
func exec(t *testing.T, set *pgtest.ReplicaSet, sql string) {
	t.Helper()
	p := pools(t, true, set.Primary)[0]
	if _, err := p.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := set.WaitCaughtUp(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// pauseReplay pauses standby s's replay for certain (writing on the
// primary until the pause takes effect) until the test ends.
func pauseReplay(t *testing.T, set *pgtest.ReplicaSet, s *pgtest.Cluster) {
	t.Helper()
	ctx := t.Context()
	if err := s.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The resume may be cancelled by a conflict with the replay it
		// resumes (SQLSTATE 40001, at once when the WAL waited longer
		// than max_standby_streaming_delay): it has taken effect when
		// the standby says it is not paused.
		ctx := context.Background()
		for attempt := 1; ; attempt++ {
			err := s.ResumeReplay(ctx)
			if err == nil {
				return
			}
			if st, serr := s.ReplayPauseState(ctx); serr == nil && st == "not paused" {
				return
			}
			if attempt == 10 {
				t.Errorf("resuming replay: %v", err)
				return
			}
		}
	})
	p := pools(t, true, set.Primary)[0]
	for {
		st, err := s.ReplayPauseState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == "paused" {
			return
		}
		if _, err := p.Exec(ctx, "SELECT txid_current()"); err != nil {
			t.Fatal(err)
		}
	}
}
