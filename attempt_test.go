package hedge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestAttemptHedgeOnlyWhileAnotherCopyRuns checks Attempt.Hedge: a copy
// is a hedge only when another copy of its request was running when it
// started. A failover (the primary never reached a server) and a copy
// sent at once after the primary failed stand alone: they are the
// request's only copy, and a server must serve them as primaries. A copy
// sent at the delay while the primary still runs is a hedge.
func TestAttemptHedgeOnlyWhileAnotherCopyRuns(t *testing.T) {
	refused := errors.New("connection refused")
	unavailable := errors.New("503 Service Unavailable")
	for _, tc := range []struct {
		name    string
		primary func(ctx context.Context) error // the primary's outcome
		want    bool                            // copy 1's Hedge
	}{
		{"failover", func(context.Context) error { return hedge.NotSent(refused) }, false},
		{"retry after a failure", func(context.Context) error { return unavailable }, false},
		{"hedge at the delay", func(ctx context.Context) error {
			<-ctx.Done() // still running when copy 1 starts
			return ctx.Err()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				h := mustNew(t, hedge.Config{Replicas: 2, Delay: hedge.Fixed(10 * time.Millisecond), NoBudget: true, MaxAttempts: 2, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
				var mu sync.Mutex
				var seen []hedge.Attempt
				_, err := hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
					mu.Lock()
					seen = append(seen, a)
					mu.Unlock()
					if a.Index == 0 {
						return 0, tc.primary(ctx)
					}
					return 1, nil
				})
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				if len(seen) != 2 {
					t.Fatalf("%d copies ran, want 2: %+v", len(seen), seen)
				}
				if seen[0].Hedge {
					t.Errorf("the primary is marked as a hedge: %+v", seen[0])
				}
				if a := seen[1]; a.Index != 1 || a.Hedge != tc.want {
					t.Errorf("copy 1 is %+v: want Hedge %v", a, tc.want)
				}
			})
		})
	}
}
