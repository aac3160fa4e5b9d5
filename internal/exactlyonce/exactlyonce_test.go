package exactlyonce_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/exactlyonce"
	"github.com/tailcut/hedge/internal/pgtest"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestMain runs the test binary as a replica when Run starts it as one.
func TestMain(m *testing.M) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	exactlyonce.MaybeRunReplica(ctx)
	stop()
	goleak.VerifyTestMain(m)
}

// writes is how many writes each store gets: fewer under the race
// detector, which slows the replicas several times over (the bench,
// hedge bench-writes, sends 10,000).
func writes() int {
	if raceEnabled {
		return 600
	}
	return 2000
}

func replicaCommand() *exec.Cmd {
	return exec.Command(os.Args[0], "-test.run=^$")
}

func run(t *testing.T, target exactlyonce.Target) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a hang guard
	defer cancel()
	res, err := exactlyonce.Run(ctx, exactlyonce.Config{
		Target:   target,
		Writes:   writes(),
		Command:  replicaCommand,
		Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("not exactly once: %v", res)
	}
	if !res.Killed {
		t.Fatal("no replica was killed")
	}
	if res.Stats.Replays == 0 {
		t.Fatalf("no copy was answered with a replay: the hedges did not overlap (%v)", res)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

func TestExactlyOnceSQLite(t *testing.T) {
	run(t, exactlyonce.Target{Kind: exactlyonce.SQLite, SQLitePath: filepath.Join(t.TempDir(), "orders.db")})
}

func TestExactlyOncePostgres(t *testing.T) {
	c := pgtest.Start(t)
	run(t, exactlyonce.Target{Kind: exactlyonce.Postgres, PostgresDSN: c.DSN("")})
}

func TestExactlyOnceRedis(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	run(t, exactlyonce.Target{Kind: exactlyonce.Redis, RedisAddr: srv.Addr})
}
