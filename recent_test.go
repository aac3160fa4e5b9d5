package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestReplicaStatsRecent: after a burst of slow answers and, a
// RecentWindow later, fast ones, each replica's Recent holds the fast
// answers alone while its Latency keeps the burst in its p99.
func TestReplicaStatsRecent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{Replicas: 2, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		call := func(d time.Duration) {
			hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
				time.Sleep(d)
				return 0, nil
			})
		}
		for range 20 {
			call(800 * time.Millisecond)
		}
		for _, r := range h.ReplicaStats() {
			if r.Recent.Count != r.Latency.Count || r.Recent.P99 != r.Latency.P99 {
				t.Errorf("replica %d during the burst: recent %v, since made %v; want the same", r.Replica, r.Recent, r.Latency)
			}
		}
		time.Sleep(hedge.RecentWindow)
		for range 20 {
			call(2 * time.Millisecond)
		}
		answered := 0
		for _, r := range h.ReplicaStats() {
			if r.Recent.Count == 0 {
				continue
			}
			answered++
			if r.Recent.Max > 3*time.Millisecond || r.Latency.Max < 790*time.Millisecond {
				t.Errorf("replica %d after the burst: recent %v, since made %v; want recent fast and the burst kept since made", r.Replica, r.Recent, r.Latency)
			}
		}
		if answered == 0 {
			t.Error("no replica answered after the burst")
		}
	})
}
