package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestReportLoadDecides checks, on synctest's clock, that a replica's own
// report of its load decides where the Hedger's own view would: a copy
// due at the delay to a replica this Hedger has nothing on, but which
// reports a request running on its one worker, is refused as busy; once
// the replica reports its worker free, the copy asked for again a delay
// later goes. Without reports the same copy goes at the delay. Stats say
// which view each decision read.
func TestReportLoadDecides(t *testing.T) {
	const delay = 10 * time.Millisecond
	for _, reports := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h, err := hedge.New(hedge.Config{Replicas: 2, Delay: hedge.Fixed(delay), NoBudget: true, PayoffWinRate: -1})
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			primary := make(chan int, 1)
			var copyAt time.Duration
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
					if a.Index == 0 {
						primary <- a.Replica
						select {
						case <-release:
							return 0, nil
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					}
					copyAt = time.Since(start)
					return 1, nil
				})
				done <- err
			}()
			other := 1 - <-primary
			time.Sleep(time.Millisecond)
			if reports {
				h.ReportLoad(other, hedge.Load{Running: 1, Workers: 1, Done: 5})
			}
			time.Sleep(delay + delay/2) // past the first decision, at 10 ms
			if reports {
				h.ReportLoad(other, hedge.Load{Running: 0, Workers: 1, Done: 6})
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			close(release)
			st := h.Stats()[0]
			if reports {
				if copyAt != 2*delay || st.Refused[hedge.RefusedBusy] != 1 || st.LoadByReport != 2 || st.LoadByOwnView != 0 {
					t.Fatalf("with reports: copy at %v, refused busy %d, by report %d, by own view %d; want 20ms, 1, 2, 0", copyAt, st.Refused[hedge.RefusedBusy], st.LoadByReport, st.LoadByOwnView)
				}
				return
			}
			if copyAt != delay || st.Refused[hedge.RefusedBusy] != 0 || st.LoadByReport != 0 || st.LoadByOwnView != 1 {
				t.Fatalf("without reports: copy at %v, refused busy %d, by report %d, by own view %d; want 10ms, 0, 0, 1", copyAt, st.Refused[hedge.RefusedBusy], st.LoadByReport, st.LoadByOwnView)
			}
		})
	}
}

// TestReportLoadIgnoresBadReports checks that a report for a replica out
// of range, one with a negative count, and any report to a Hedger without
// Replicas are ignored: the decision reads the Hedger's own view.
func TestReportLoadIgnoresBadReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h, err := hedge.New(hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Millisecond), NoBudget: true, PayoffWinRate: -1})
		if err != nil {
			t.Fatal(err)
		}
		h.ReportLoad(2, hedge.Load{Running: 9, Workers: 1})
		h.ReportLoad(-1, hedge.Load{Running: 9, Workers: 1})
		h.ReportLoad(0, hedge.Load{Running: -1, Workers: 1})
		h.ReportLoad(1, hedge.Load{Queued: -3})
		_, err = hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
			if a.Index == 0 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 1, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if st := h.Stats()[0]; st.LoadByReport != 0 || st.Hedges != 1 {
			t.Fatalf("by report %d, hedges %d: want 0 and 1", st.LoadByReport, st.Hedges)
		}
		plain, _ := hedge.New(hedge.Config{})
		plain.ReportLoad(0, hedge.Load{Running: 1}) // no replicas: ignored, no panic
	})
}
