package redisbench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The servers count the reads; a stall is a DEBUG SLEEP of the length
// asked for, on the server asked for, and Stall returns once it is over;
// Close leaves no process behind.
//
// Nothing here races a clock. Whether a read sent while Stall runs reaches
// the server before or after the DEBUG SLEEP depends on the scheduling, so
// the test does not time reads: it checks what the server itself recorded
// (INFO commandstats: DEBUG ran once a stall, for the stall's length, and
// Redis runs one command at a time, so it answered nobody meanwhile), and
// bounds that hold however slow the machine is (Stall cannot return before
// the sleep it waits for has lasted its length).
func TestBackend(t *testing.T) {
	redistest.Need(t)
	b, err := Start(Options{Replicas: 2})
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
	c, err := b.NewClient(hedge.Config{Replicas: 2, MaxAttempts: 1, Picker: hedge.Picker{Random: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	readTwenty(t, b, c)
	if st := c.Stats(); st.Requests != 20 || st.Hedges != 0 {
		t.Errorf("stats %+v", st)
	}

	// Stall server 1 alone, twice, then check what each server ran. The
	// lengths are checked to the millisecond: Redis turns the seconds of
	// DEBUG SLEEP into microseconds through a float, and times commands on
	// the wall clock.
	const d, slack = 30 * time.Millisecond, time.Millisecond
	for range 2 {
		start := time.Now()
		if err := b.Stall(ctx, 1, d); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d-slack {
			t.Errorf("Stall of %v returned after %v, before the sleep was over", d, took)
		}
	}
	for i, want := range []int64{0, 2} {
		calls, usec := debugStats(t, b.Addrs()[i])
		if calls != want {
			t.Errorf("server %d ran DEBUG %d times, want %d", i, calls, want)
		}
		if usec < want*(d-slack).Microseconds() {
			t.Errorf("server %d spent %d µs in %d DEBUG SLEEP of %v", i, usec, calls, d)
		}
	}
	// The stalled server serves again.
	for i := range 10 {
		if err := c.Do(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	// A cancelled context stalls nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Stall(cctx, 0, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Stall with a cancelled context: %v, want context.Canceled", err)
	}
}

// debugStats returns the calls and total microseconds of DEBUG on the
// server at addr, from INFO commandstats.
func debugStats(t *testing.T, addr string) (calls, usec int64) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_debug:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}

// The rueidis client reads every key, each with its value, from the
// replica its Picker chose; the bench sees a client whose Hedger counted
// every request, whose dials are the connections rueidis opened, and whose
// missing key is an error naming it.
func TestRueidisReadsEveryKey(t *testing.T) {
	b := startRueidis(t)
	ctx := context.Background()
	cfg := hedge.Config{Replicas: 2, MaxAttempts: 1, Picker: hedge.Picker{Random: true}}
	rc, err := b.newRueidis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("v", bench.ValueSize)
	for i := range bench.Keys {
		got, err := rc.get(ctx, i)
		if err != nil || got != want {
			t.Fatalf("GET k:%d = %q, %v; want %d bytes of v", i, got, err, bench.ValueSize)
		}
	}
	st := rc.c.Stats()
	if wins := st.Replicas[0].Wins + st.Replicas[1].Wins; wins != bench.Keys {
		t.Errorf("replicas answered %d reads, want %d", wins, bench.Keys)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}

	// Through the bench's interface.
	c, err := b.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*rueidisClient); !ok {
		t.Fatalf("NewClient made a %T, want the rueidis client", c)
	}
	readTwenty(t, b, c)
	s := c.Stats()
	if s.Requests != 20 || s.Hedges != 0 || s.HedgeWins != 0 {
		t.Errorf("stats %+v: want 20 requests, no hedge", s)
	}
	if s.PoolWaits != 0 || s.PoolWaitTime != 0 || s.PoolTimeouts != 0 {
		t.Errorf("stats %+v: want no pool waits (rueidis has no pool)", s)
	}
	if s.Dials < 2 {
		t.Errorf("%d dials counted, want at least one per server", s.Dials)
	}

	// A missing key is an error that names it.
	for _, addr := range b.Addrs() {
		gr := redis.NewClient(&redis.Options{Addr: addr})
		err := gr.Del(ctx, "k:7").Err()
		_ = gr.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, 7); err == nil || !strings.Contains(err.Error(), "k:7") {
		t.Errorf("reading a deleted key: %v, want an error naming k:7", err)
	}
}

// With one replica stalled, a read whose first copy went to it is
// answered by the other replica, through a hedge: the client's per-replica
// stats say which replica answered each read. The stall is a SIGSTOP of
// the server (redistest.Server.Stall), in force until the test releases
// it, so whether a copy meets the stall does not depend on timing (a
// DEBUG SLEEP sent on another connection may run before or after a read
// sent meanwhile); the test reads until three reads were won by a hedge.
func TestRueidisStalledReplica(t *testing.T) {
	b := startRueidis(t)
	ctx := context.Background()
	// Hedge any read still running after 1 ms, to the other replica,
	// whatever the budget, the load or the hedges' record; pick the
	// first copy's replica uniformly, so that a replica holding a
	// cancelled copy is not avoided.
	rc, err := b.newRueidis(hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Millisecond), NoBudget: true,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, Picker: hedge.Picker{Random: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// Warm up as the bench does: rueidis opens its pipelined connections
	// as reads first land on them, and a copy that opens one to a stalled
	// server is held by the handshake (see newRueidis). Were one left
	// unopened, the test would still pass, 2 s later.
	want := strings.Repeat("v", bench.ValueSize)
	for i := range bench.Keys {
		if got, err := rc.get(ctx, i); err != nil || got != want {
			t.Fatalf("warm-up read %d: %q, %v", i, got, err)
		}
	}
	base := rc.c.Stats()
	st, err := b.servers[1].Stall()
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			_ = st.Release()
		}
	}()
	reads := 0
	for rc.c.Stats().Op("GET").HedgeWins-base.Op("GET").HedgeWins < 3 {
		if reads == 10000 {
			t.Fatal("no read was won by a hedge in 10,000 reads")
		}
		got, err := rc.get(ctx, reads)
		if err != nil || got != want {
			t.Fatalf("read %d: %q, %v", reads, got, err)
		}
		reads++
	}
	// Every read was answered by replica 0. A copy on the stalled
	// replica is either the first copy of a read, which a hedge to
	// replica 0 then won, or a hedge of a read whose first copy was slow
	// on replica 0, which that first copy won: each was cancelled, and
	// each came with a hedge.
	s := rc.c.Stats()
	r0, r1 := s.Replicas[0], s.Replicas[1]
	b0, b1 := base.Replicas[0], base.Replicas[1]
	if wins1, wins0 := r1.Wins-b1.Wins, r0.Wins-b0.Wins; wins1 != 0 || wins0 != int64(reads) {
		t.Errorf("replica 0 answered %d reads, the stalled replica %d; want all %d by replica 0", wins0, wins1, reads)
	}
	copies1 := r1.Copies - b1.Copies
	if cancelled := r1.Cancelled - b1.Cancelled; cancelled != copies1 || r1.InFlight != 0 {
		t.Errorf("stalled replica: %d copies, %d cancelled, %d in flight; want every copy cancelled, none left", copies1, cancelled, r1.InFlight)
	}
	g, bg := s.Op("GET"), base.Op("GET")
	if hedges := g.Hedges - bg.Hedges; hedges < copies1 {
		t.Errorf("%d hedges for %d copies sent to the stalled replica", hedges, copies1)
	}
	if cs := rc.Stats(); cs.Requests != base.Op("GET").Requests+int64(reads) || cs.HedgeWins != g.HedgeWins {
		t.Errorf("client stats %+v: want the Hedger's GET counts (%d requests, %d won by a hedge)", cs, bg.Requests+int64(reads), g.HedgeWins)
	}
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	released = true
	// Once released, the stalled replica answers again on the same
	// client.
	r := rc.c.Replica(1)
	for i := range 10 {
		k := b.keys[i]
		if got, err := r.Do(ctx, r.B().Get().Key(k).Build()).ToString(); err != nil || got != want {
			t.Fatalf("after the stall, replica 1: GET %s = %q, %v", k, got, err)
		}
	}
}

// A client the bench does not know, and a pool size with rueidis, are
// refused before any server starts, with the choices named.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Client: "lettuce"}, `Client "lettuce": use go-redis or rueidis`},
		{Options{Client: "Rueidis"}, "use go-redis or rueidis"},
		{Options{Client: ClientRueidis, PoolSize: 8}, "PoolSize 8 applies to go-redis only"},
		{Options{Replicas: 1, Client: ClientRueidis}, "use 2 to 64"},
	} {
		// A binary that does not exist: were a server started, the error
		// would be that it is missing.
		tc.o.Binary = "/nonexistent/redis-server"
		b, err := Start(tc.o)
		if err == nil {
			_ = b.Close()
			t.Errorf("%+v: started", tc.o)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.o, err, tc.want)
		}
	}
}

// closeBackend closes b and checks that its servers are gone.
func closeBackend(t *testing.T, b *Backend) {
	t.Helper()
	pids := b.Pids()
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Close: %v", p, err)
		}
	}
}

// readTwenty reads keys 0 to 19 through c and checks that the two servers
// of b counted twenty reads between them.
func readTwenty(t *testing.T, b *Backend, c bench.Client) {
	t.Helper()
	ctx := context.Background()
	before := b.Served()
	for i := range 20 {
		if err := c.Do(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	after := b.Served()
	if got := after[0] + after[1] - before[0] - before[1]; got != 20 {
		t.Errorf("servers counted %d reads, want 20", got)
	}
}

// startRueidis starts two servers read through rueidis, stopped when the
// test ends; it skips the test without redis-server.
func startRueidis(t *testing.T) *Backend {
	t.Helper()
	redistest.Need(t)
	b, err := Start(Options{Replicas: 2, Client: ClientRueidis})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBackend(t, b) })
	return b
}

// The fan-out call (default-fan) reads every leaf from real Redis
// replicas through the backend's LeafReader, each leaf from the replica
// its copy was sent to.
func TestFanCall(t *testing.T) {
	redistest.Need(t)
	b, err := Start(Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := bench.LookupStrategy("default-fan")
	if err != nil {
		t.Fatal(err)
	}
	c, err := bench.FanOut(bench.StrategyContender(st, bench.StrategyOptions{}, false), 8).New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		if err := c.Do(context.Background(), i); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if s := c.Stats(); s.Requests != 80 {
		t.Errorf("%d leaves counted; want 80, 8 per request", s.Requests)
	}
	var served int64
	for _, n := range b.Served() {
		served += max(n, 0)
	}
	if served < 80 {
		t.Errorf("the replicas served %d reads; want at least 80", served)
	}
}
