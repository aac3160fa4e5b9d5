package hedgeredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: not the
// Client's copies, not go-redis's, not redistest's reapers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hedgeNow is a Config that hedges every read still running after 5 ms,
// with no budget, so that a read held by a stalled server is hedged every
// time: the server answers only when the test releases it, so the delay
// fires first whenever the scheduler gets to it.
func hedgeNow() Config {
	// Plain hedging: no spare-capacity or payoff rule, so that the tests
	// that need hedges to go under load get them.
	return Config{Hedge: hedge.Config{Delay: hedge.Fixed(5 * time.Millisecond), NoBudget: true,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}}
}

// startClient returns a Client over servers made by NewFromOptions, closed
// when the test ends (before the servers stop: cleanups run last first).
// Its clients are patient (see patient); mod may change their options.
func startClient(t testing.TB, servers []*redistest.Server, cfg Config, mod func(*redis.Options)) *Client {
	t.Helper()
	opts := make([]*redis.Options, len(servers))
	for i, s := range servers {
		opts[i] = patient(&redis.Options{Addr: s.Addr})
		if mod != nil {
			mod(opts[i])
		}
	}
	c, err := NewFromOptions(opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// patient sets o's read, write and pool timeouts to a minute, so that
// go-redis ends no read of a stalled server on its own while the test
// holds the stall (its defaults, 3 s and 4 s, could pass on a loaded
// machine): a stall ends when the test releases it, and only then.
func patient(o *redis.Options) *redis.Options {
	o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Minute, time.Minute, time.Minute
	return o
}

// seed runs fn on every replica's client, so that the replicas hold the
// same data (the servers are independent, not replicating).
func seed(t testing.TB, c *Client, fn func(ctx context.Context, rc *redis.Client) error) {
	t.Helper()
	for i := range c.Len() {
		if err := fn(context.Background(), c.Replica(i)); err != nil {
			t.Fatalf("seeding replica %d: %v", i, err)
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

// release ends a stall, failing the test if it cannot.
func release(t testing.TB, st *redistest.Stall) {
	t.Helper()
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing the test after a minute. It
// waits for events (losers returning, a counter reaching a value), it
// asserts no timing: the minute only bounds a test that is broken.
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

// idle reports whether no read copy is running on any replica.
func idle(c *Client) bool {
	for _, r := range c.Stats().Replicas {
		if r.InFlight != 0 {
			return false
		}
	}
	return true
}

// commandCalls returns the calls of each command in INFO commandstats
// (lower-case names).
func commandCalls(t testing.TB, rc *redis.Client) map[string]string {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
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
