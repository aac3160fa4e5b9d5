package pgbench

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One primary and two standbys serve every subtest; Close leaves no
// process behind.
func TestBackend(t *testing.T) {
	pgtest.Need(t)
	b, err := Start(Options{PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	pids := b.Pids()
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		for _, p := range pids {
			if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Close: %v", p, err)
			}
		}
	}()
	if b.Replicas() != 3 || len(pids) < 3 {
		t.Fatalf("%d servers, %d pids; want 3 servers and their processes", b.Replicas(), len(pids))
	}
	t.Run("reads", func(t *testing.T) { testReads(t, b) })
	t.Run("stall", func(t *testing.T) { testStall(t, b) })
	t.Run("run", func(t *testing.T) { testRun(t, b) })
}

// Every server holds every key and the client reads them; its counters
// count the reads, its pools were full before the first read, and their
// connections' processes are among Pids.
func testReads(t *testing.T, b *Backend) {
	ctx := context.Background()
	c, err := b.NewClient(hedge.Config{Replicas: b.Replicas(), MaxAttempts: 1, Picker: hedge.Picker{Random: true}})
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Dials != int64(b.Replicas()*b.PoolSize()) {
		t.Errorf("%d connections made before the first read, want %d", st.Dials, b.Replicas()*b.PoolSize())
	}
	all := b.Pids()
	for i, s := range b.servers {
		backends, err := s.ClientBackends()
		if err != nil || len(backends) < b.PoolSize() {
			t.Errorf("server %d: %d client backends (%v), want at least %d", i, len(backends), err, b.PoolSize())
		}
		for _, p := range backends {
			if !containsInt(all, p) {
				t.Errorf("client backend %d of server %d is not among Pids", p, i)
			}
		}
	}
	for k := range 200 {
		if err := c.Do(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Requests != 200 || st.Hedges != 0 {
		t.Errorf("stats %+v, want 200 requests and no hedge", st)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Each server holds every key, with its value.
	for i, s := range b.servers {
		conn, err := pgx.Connect(ctx, s.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		var n, short int
		err = conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE length(v) <> $1) FROM kv", bench.ValueSize).Scan(&n, &short)
		conn.Close(ctx)
		if err != nil || n != bench.Keys || short != 0 {
			t.Errorf("server %d: %d rows, %d of the wrong size (%v); want %d", i, n, short, err, bench.Keys)
		}
	}
}

// A stall stops the stalled server's client backends until its context
// ends, only the last standby stalls by default, and the server serves
// again afterwards. Nothing is timed: the stall lasts until the test
// ends it.
func testStall(t *testing.T, b *Backend) {
	ctx := context.Background()
	for i := range b.Replicas() - 1 {
		if err := b.Stall(ctx, i, time.Millisecond); !errors.Is(err, ErrNotStalled) {
			t.Errorf("Stall of server %d: %v, want ErrNotStalled", i, err)
		}
	}
	last := b.Replicas() - 1
	conn, err := pgx.Connect(ctx, b.servers[last].DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	stallCtx, release := context.WithCancel(ctx)
	stalled := make(chan error, 1)
	go func() { stalled <- b.Stall(stallCtx, last, time.Hour) }()
	pid := int(conn.PgConn().PID())
	for state(t, pid) != "T" {
		select {
		case err := <-stalled:
			t.Fatalf("Stall returned %v before stopping backend %d", err, pid)
		case <-time.After(time.Millisecond):
		}
	}
	if s := state(t, b.servers[last].Pid); s != "T" {
		t.Errorf("postmaster in state %q during the stall, want T (stopped)", s)
	}
	answered := make(chan error, 1)
	go func() {
		var v string
		answered <- conn.QueryRow(ctx, Query, 7).Scan(&v)
	}()
	release()
	if err := <-stalled; !errors.Is(err, context.Canceled) {
		t.Errorf("Stall ended by its context: %v, want context.Canceled", err)
	}
	if err := <-answered; err != nil {
		t.Errorf("the query sent during the stall: %v", err)
	}
	if s := state(t, pid); s == "T" {
		t.Errorf("backend %d still stopped after the stall", pid)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Stall(cctx, last, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Stall with a cancelled context: %v, want context.Canceled", err)
	}
}

// state returns the state letter of /proc/<pid>/stat.
func state(t *testing.T, pid int) string {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	return f[0]
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// The runner drives the backend end to end: every request answered, the
// last standby's stalls replayed and the others' refused, and the
// hedging configuration hedging. What is checked does not depend on the
// scheduling: the stall schedule is fixed by the seed and the runner
// waits for every stall of it.
func testRun(t *testing.T, b *Backend) {
	var contenders []bench.Contender
	for _, name := range []string{"none-random", bench.DefaultStrategy} {
		s, err := bench.LookupStrategy(name)
		if err != nil {
			t.Fatal(err)
		}
		contenders = append(contenders, bench.StrategyContender(s, bench.StrategyOptions{}, false))
	}
	sc := bench.Scenario{
		Rate: 500, Duration: 1500 * time.Millisecond, Warmup: 300 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.1, Repeats: 1,
		Timeout: time.Minute, MaxReruns: -1, Settle: 50 * time.Millisecond,
	}
	res, err := bench.Run(context.Background(), b, sc, contenders, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || len(res.Configs) != 2 {
		t.Fatalf("%d runs, %d configurations; want 2 and 2", len(res.Runs), len(res.Configs))
	}
	for _, r := range res.Runs {
		if r.Requests < 600 || r.Errors > 0 || r.Aborted != "" {
			t.Errorf("%s: %d requests, %d errors (%s), aborted %q", r.Config, r.Requests, r.Errors, r.FirstError, r.Aborted)
		}
		if r.Stalls == 0 || r.StallErrors == 0 {
			t.Errorf("%s: %d stalls and %d refused; want some of each (one standby stalls, two servers refuse)", r.Config, r.Stalls, r.StallErrors)
		}
	}
	for _, c := range res.Configs {
		if c.Config == bench.DefaultStrategy && c.ExtraPct.Median <= 0 {
			t.Errorf("default sent no hedge with stalls of 20 ms on 10%% of the time: extra %v", c.ExtraPct)
		}
	}
}

// Mistakes in Options are refused before any server starts.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Replicas: 1}, "1 servers"},
		{Options{PoolSize: -1}, "PoolSize -1"},
		{Options{PoolSize: 65}, "PoolSize 65"},
		{Options{Stall: "some"}, `Stall "some": use one or all`},
	} {
		// BinDir points nowhere: a server start would fail with another
		// message.
		tc.o.BinDir = t.TempDir()
		b, err := Start(tc.o)
		if err == nil {
			b.Close()
			t.Fatalf("%+v: started", tc.o)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
