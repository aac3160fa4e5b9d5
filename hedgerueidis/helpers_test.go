package hedgerueidis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: not the
// Client's copies, not rueidis's connection goroutines, not redistest's
// reapers.
func TestMain(m *testing.M) {
	// rueidis's cluster client closes the connections a refresh replaced
	// on a goroutine of its own, five seconds later, which its Close does
	// not stop (_refresh in rueidis's cluster.go, v1.0.79).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
}

// hedgeNow hedges every read still running after 5 ms, with no budget and
// no spare-capacity or payoff rule, so that a read held by a stalled
// server is hedged every time: the server answers only when the test
// releases it.
func hedgeNow() Config {
	return Config{Hedge: hedge.Config{Delay: hedge.Fixed(5 * time.Millisecond), NoBudget: true,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}}
}

// options returns the rueidis options of a client of s: one standalone
// server, no client-side cache.
func options(s *redistest.Server) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true}
}

// startClient returns a Client over servers made by NewFromOptions, closed
// when the test ends (before the servers stop).
func startClient(t testing.TB, servers []*redistest.Server, cfg Config) *Client {
	t.Helper()
	opts := make([]rueidis.ClientOption, len(servers))
	for i, s := range servers {
		opts[i] = options(s)
	}
	c, err := NewFromOptions(opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// seed runs SET key value on every replica, so that they hold the same
// data (the servers are independent, not replicating).
func seed(t testing.TB, c *Client, kv ...string) {
	t.Helper()
	ctx := context.Background()
	for i := range c.Len() {
		rc := c.Replica(i)
		for j := 0; j+1 < len(kv); j += 2 {
			if err := rc.Do(ctx, rc.B().Set().Key(kv[j]).Value(kv[j+1]).Build()).Error(); err != nil {
				t.Fatalf("seeding replica %d: %v", i, err)
			}
		}
	}
}

// stall stalls s until the returned Stall is released, or the test ends.
func stall(t testing.TB, s *redistest.Server) *redistest.Stall {
	t.Helper()
	st, err := s.Stall()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Release() })
	return st
}

// waitFor polls cond until it holds, failing the test after a minute: it
// waits for events, it asserts no timing.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// commandCalls returns the calls of each command in INFO commandstats
// (lower-case names), asked through a client of its own.
func commandCalls(t testing.TB, s *redistest.Server) map[string]string {
	t.Helper()
	rc, err := rueidis.NewClient(options(s))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	info, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// wantOf returns the key-value pairs kv (as values returns them) as a map.
func wantOf(kv []string) map[string]string {
	want := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		want[kv[i]] = kv[i+1]
	}
	return want
}

// readUntilStalledCopies reads keys through c, in turn with Get, Do and
// (with mget) MGET, checking every value, until six copies have gone to
// replica 0, which the caller has stalled; each, if not nil, runs after
// every read.
func readUntilStalledCopies(t *testing.T, c *Client, keys []string, want map[string]string, mget bool, each func(n int)) {
	t.Helper()
	ctx := context.Background()
	kinds := 2
	if mget {
		kinds = 3
	}
	for n := 0; c.Stats().Replicas[0].Copies < 6; n++ {
		if n > 100000 {
			t.Fatal("no copy went to the stalled replica in 100,000 reads")
		}
		k := keys[n%len(keys)]
		var got string
		var err error
		switch n % kinds {
		case 0:
			got, err = c.Get(ctx, k).ToString()
		case 1:
			got, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		case 2:
			var vs []string
			vs, err = c.MGet(ctx, k, keys[0]).AsStrSlice()
			if err == nil && (len(vs) != 2 || vs[1] != want[keys[0]]) {
				t.Fatalf("MGET %s %s = %q", k, keys[0], vs)
			}
			if len(vs) > 0 {
				got = vs[0]
			}
		}
		if err != nil || got != want[k] {
			t.Fatalf("read %d of %s = %q, %v; want %q", n, k, got, err, want[k])
		}
		if each != nil {
			each(n)
		}
	}
}
