package hedgeredis

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestOneReplicaDown stops one of three real redis-servers mid-run: no
// read fails, since a read whose connection is refused never reached a
// server and goes to another replica at once, and the stopped replica is
// put on probation. go-redis dials once per connection here
// (DialerRetries 1), so that a refused connection fails the copy at once
// rather than after its dial backoff (a copy slower than the delay is
// hedged, and a hedged copy that then fails says nothing of its replica).
func TestOneReplicaDown(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, Config{}, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
	seed(t, c, func(ctx context.Context, rc *redis.Client) error { return rc.Set(ctx, "k", "v", 0).Err() })
	ctx := context.Background()
	for range 100 {
		if err := c.Get(ctx, "k").Err(); err != nil {
			t.Fatalf("before the replica went down: %v", err)
		}
	}
	if err := servers[1].Stop(); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	failed := 0
	for range n {
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			failed++
			t.Logf("read failed: %q, %v", v, err)
		}
	}
	rs := c.Hedger().ReplicaStats()
	t.Logf("replica stats %+v; failovers %d", rs, c.Hedger().OpStats("GET").Failovers)
	if failed > n/1000 {
		t.Fatalf("%d of %d reads failed with one of three replicas down; want at most 0.1%%", failed, n)
	}
	if !rs[1].Probation {
		t.Fatalf("the stopped replica is not on probation: %+v", rs[1])
	}
}
