// Package hedgetest holds the hedged traffic that the exporters' tests
// (hedgeprom, hedgeotel) both need, so that they check their series
// against the same Hedgers.
package hedgetest

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

// Sleeper returns an attempt function whose copy i answers i after
// after[i], or fails with its context's error if cancelled first.
func Sleeper(after ...time.Duration) func(context.Context, hedge.Attempt) (int, error) {
	return func(ctx context.Context, a hedge.Attempt) (int, error) {
		select {
		case <-time.After(after[a.Index]):
			return a.Index, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Reporting returns a call for h (made with Replicas 2 and a delay
// longer than report) whose primary, report into its run, hands h a
// fresh report of the other replica's load (one of four workers busy)
// and then sleeps primary; the copies after it sleep copy. The hedge
// decision, due at h's delay, reads that replica's load from the
// report (Stats.LoadByReport). Call it inside a synctest bubble.
func Reporting(h *hedge.Hedger, report, primary, copy time.Duration) func(context.Context, hedge.Attempt) (int, error) {
	return func(ctx context.Context, a hedge.Attempt) (int, error) {
		d := copy
		if a.Index == 0 {
			select {
			case <-time.After(report):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			h.ReportLoad(1-a.Replica, hedge.Load{Running: 1, Workers: 4})
			d = primary - report
		}
		select {
		case <-time.After(d):
			return a.Index, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Rescuing returns a Hedger whose operation "get" has both a holdout and
// rescues: a rollout of one half keeps a control group, and the other
// calls are hedged after 10 ms, their primaries, deaf to cancellation,
// running on to success after the hedge won (time saved). It sleeps:
// call it inside a synctest bubble.
func Rescuing(tb testing.TB) *hedge.Hedger {
	tb.Helper()
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), NoBudget: true, PayoffWinRate: -1})
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.SetRollout(0.5); err != nil {
		tb.Fatal(err)
	}
	deaf := func(ctx context.Context, a hedge.Attempt) (int, error) {
		if a.Index == 0 {
			time.Sleep(50 * time.Millisecond)
			return 0, nil
		}
		return Sleeper(0, 5*time.Millisecond)(ctx, a)
	}
	for i := 0; ; i++ {
		if st := h.OpStats("get"); st.Holdout.Count > 0 && st.Rescued > 0 {
			return h
		}
		if i == 200 {
			tb.Fatalf("200 calls at a rollout of one half, and still no holdout or no rescue: %v", h.OpStats("get"))
		}
		hedge.Do(context.Background(), h, "get", deaf)
	}
}
