package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestHoldoutIsTheControlGroup runs calls whose primary takes 30 ms and
// whose hedge, after 10 ms, takes 5: with a rollout of one half, the calls
// kept in Shadow are the control group, recorded in Stats.Holdout at the
// unhedged latency, and the others are hedged. However the rollout's draws
// fall, the two groups add up.
func TestHoldoutIsTheControlGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		if err := h.SetRollout(0.5); err != nil {
			t.Fatal(err)
		}
		const n = 200
		for range n {
			s := newScript(behaviour{after: 30 * ms, val: 1}, behaviour{after: 5 * ms, val: 2})
			hedge.Do(context.Background(), h, "op", s.attempt)
		}
		st := h.OpStats("op")
		held := st.Holdout.Count
		if held == 0 || held == n {
			t.Fatalf("holdout of %d calls in %d: the rollout of one half kept none or all", held, n)
		}
		if st.ShadowHedges != held || st.Hedges != n-held || st.Rescued != n-held {
			t.Fatalf("holdout %d, shadow hedges %d, hedges %d, rescued %d: want %d, %d, %d", held, st.ShadowHedges, st.Hedges, st.Rescued, held, n-held, n-held)
		}
		if st.Holdout.P50 != 30*ms || st.Holdout.Max != 30*ms {
			t.Fatalf("holdout latency %v, want every call at 30ms", st.Holdout)
		}
		if want := time.Duration(held)*30*ms + time.Duration(n-held)*15*ms; st.Latency.Count != n || st.Latency.Sum != want {
			t.Fatalf("latency %v: want %d calls, the held-out ones at 30ms and the hedged ones at 15ms (sum %v)", st.Latency, n, want)
		}

		// Without a partial rollout there is no control group, in mode
		// On or in Shadow.
		for _, m := range []hedge.Mode{hedge.On, hedge.Shadow} {
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Mode: m})
			s := newScript(behaviour{after: 30 * ms, val: 1}, behaviour{after: 5 * ms, val: 2})
			hedge.Do(context.Background(), h, "op", s.attempt)
			if c := h.OpStats("op").Holdout.Count; c != 0 {
				t.Errorf("mode %v, rollout 1: %d calls in the holdout", m, c)
			}
		}
	})
}

// TestRescuedAndSaved checks the two counts of a hedge's rescue: a hedge
// that wins while the primary runs is a rescue, one that replaces a failed
// primary is not; a primary that runs on to success after the hedge won
// tells how much the hedge saved at least, one that stops when cancelled
// tells nothing.
func TestRescuedAndSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		do := func(op string, s *script) { hedge.Do(context.Background(), h, op, s.attempt) }

		do("cancellable", newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 5 * ms, val: 2}))
		do("deaf", newScript(behaviour{after: 50 * ms, val: 1, deaf: true}, behaviour{after: 5 * ms, val: 2}))
		do("failed", newScript(behaviour{after: 1 * ms, err: errBoom}, behaviour{after: 5 * ms, val: 2}))

		for _, tc := range []struct {
			op      string
			rescued int64
			saved   int64 // ms
		}{{"cancellable", 1, 0}, {"deaf", 1, 35}, {"failed", 0, 0}} {
			st := h.OpStats(tc.op)
			if st.HedgeWins != 1 || st.Rescued != tc.rescued || st.SavedAtLeast != ms*time.Duration(tc.saved) {
				t.Errorf("%s: hedge wins %d, rescued %d, saved at least %v; want 1, %d, %dms", tc.op, st.HedgeWins, st.Rescued, st.SavedAtLeast, tc.rescued, tc.saved)
			}
		}
	})
}
