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
// with no budget, so that a read stalled behind DEBUG SLEEP (hundreds of
// milliseconds) is hedged every time.
func hedgeNow() Config {
	return Config{Hedge: hedge.Config{Delay: hedge.Fixed(5 * time.Millisecond), NoBudget: true}}
}

// startClient returns a Client over servers made by NewFromOptions, closed
// when the test ends (before the servers stop: cleanups run last first).
func startClient(t testing.TB, servers []*redistest.Server, cfg Config, mod func(*redis.Options)) *Client {
	t.Helper()
	opts := make([]*redis.Options, len(servers))
	for i, s := range servers {
		opts[i] = &redis.Options{Addr: s.Addr}
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

// stall stalls s for d and registers a wait for the end of the stall.
func stall(t testing.TB, s *redistest.Server, d time.Duration) *redistest.Stall {
	t.Helper()
	st, err := s.Stall(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Wait() })
	return st
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
// It waits for events (a stall ending, losers returning), it asserts no
// timing.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
