package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/tailcut/hedge"
)

// refused is what a dial to a replica that is down returns, marked as a
// copy that never reached a server, as the transports mark it.
var refused = hedge.NotSent(fmt.Errorf("dial tcp 10.0.0.3:80: %w", syscall.ECONNREFUSED))

// TestNotSentFailsOver checks that a copy that never reached its server is
// replaced at once by a copy to another replica, whatever the budget says,
// and not counted as a hedge; that the replacement does not go in mode
// Off; and that the caller's deadline still bounds it.
func TestNotSentFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		// A budget with one token, spent by the first call's failover if
		// the budget applied to it.
		b, err := hedge.NewBudget(0.001, 1)
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, hedge.Config{Replicas: 2, Budget: b, Delay: hedge.Fixed(time.Hour)})
		var mu sync.Mutex
		var got []int // replica of each copy
		attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
			mu.Lock()
			got = append(got, a.Replica)
			mu.Unlock()
			if a.Replica == 0 {
				return 0, refused
			}
			time.Sleep(ms)
			return 1, nil
		}
		fails := 0
		for range 50 {
			if _, err := hedge.Do(context.Background(), h, "op", attempt); err != nil {
				fails++
			}
		}
		st := h.OpStats("op")
		if fails != 0 {
			t.Fatalf("%d of 50 calls failed with one of two replicas refusing connections; want none (stats: %v)", fails, st)
		}
		if st.Hedges != 0 || st.Failovers == 0 || st.Failovers > hedge.ProbationFailures+1 {
			t.Errorf("hedges %d, failovers %d: want no hedge, and a failover for each primary sent to the dead replica before its probation (at most %d)", st.Hedges, st.Failovers, hedge.ProbationFailures+1)
		}
		if st.PrimaryWins != 50 || st.HedgeWins != 0 {
			t.Errorf("primary wins %d, hedge wins %d: a failover's win is the request's own, not a hedge's", st.PrimaryWins, st.HedgeWins)
		}
		if tok := b.Tokens(); tok < 1 {
			t.Errorf("budget tokens %v: a failover spent the budget", tok)
		}

		// In mode Off a request goes once, even when it never arrived.
		off := mustNew(t, hedge.Config{Replicas: 2, Mode: hedge.Off})
		dead := func(ctx context.Context, a hedge.Attempt) (int, error) { return 0, refused }
		if _, err := hedge.Do(context.Background(), off, "op", dead); !errors.Is(err, hedge.ErrNotSent) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("mode Off: err %v, want the dial error, matching ErrNotSent and ECONNREFUSED", err)
		}
		if f := off.OpStats("op").Failovers; f != 0 {
			t.Errorf("mode Off: %d failovers, want none", f)
		}

		// A caller's deadline that has passed stops the failover.
		late := mustNew(t, hedge.Config{Replicas: 2})
		ctx, cancel := context.WithTimeout(context.Background(), 5*ms)
		defer cancel()
		slowDead := func(ctx context.Context, a hedge.Attempt) (int, error) {
			time.Sleep(10 * ms) // the dial timed out after the deadline
			return 0, refused
		}
		if _, err := hedge.Do(ctx, late, "op", slowDead); err == nil {
			t.Error("a copy that failed after the caller's deadline was replaced")
		}
		if f := late.OpStats("op").Failovers; f != 0 {
			t.Errorf("after the deadline: %d failovers, want none", f)
		}
	})
}

// TestProbation drives a replica that fails every copy it gets through
// its probation: ProbationFailures failures take it out of the picks, so
// that no primary goes there; once ProbationTime has passed it gets one
// probe; a probe that fails takes it out for twice as long; a probe that
// succeeds brings it back.
func TestProbation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Replicas: 3, Delay: hedge.Fixed(time.Hour)})
		var mu sync.Mutex
		down := true
		var log []int // replica of each primary
		attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
			mu.Lock()
			if a.Index == 0 {
				log = append(log, a.Replica)
			}
			fail := a.Replica == 2 && down
			mu.Unlock()
			if fail {
				return 0, errBoom // a retryable error at once
			}
			time.Sleep(ms)
			return 1, nil
		}
		run := func(n int) (toDead int) {
			mu.Lock()
			log = log[:0]
			mu.Unlock()
			for range n {
				if _, err := hedge.Do(context.Background(), h, "op", attempt); err != nil {
					t.Fatalf("call failed: %v", err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range log {
				if r == 2 {
					toDead++
				}
			}
			return toDead
		}
		start := time.Now()
		// Sequential calls of 1 ms each: the third failure comes within
		// the first hundred calls or so (a third of primaries go there
		// while it has nothing in flight), then none until the probation
		// ends.
		if n := run(300); n != hedge.ProbationFailures {
			t.Fatalf("first 300 ms: %d primaries to the failing replica, want exactly %d before its probation", n, hedge.ProbationFailures)
		}
		rs := h.ReplicaStats()
		if !rs[2].Probation || rs[2].Errors != hedge.ProbationFailures || rs[0].Probation || rs[1].Probation {
			t.Fatalf("replica stats %+v: want replica 2 alone on probation, with %d errors", rs, hedge.ProbationFailures)
		}
		time.Sleep(hedge.ProbationTime - time.Since(start)) // about when it ends
		// One probe within the next calls (it is idle, so two choices take
		// it at once), which fails: out again for twice as long.
		if n := run(500); n != 1 {
			t.Fatalf("after ProbationTime: %d primaries to the failing replica, want the one probe", n)
		}
		time.Sleep(2*hedge.ProbationTime - 500*ms)
		if n := run(400); n != 1 {
			t.Fatalf("after twice ProbationTime: %d primaries to the failing replica, want one probe", n)
		}
		// It recovers: the next probe succeeds and it is back in the picks.
		mu.Lock()
		down = false
		mu.Unlock()
		time.Sleep(4 * hedge.ProbationTime)
		if n := run(300); n < 50 {
			t.Fatalf("after it recovered: %d of 300 primaries to replica 2, want about a third", n)
		}
		if rs := h.ReplicaStats(); rs[2].Probation {
			t.Fatalf("replica 2 still on probation after a probe succeeded: %+v", rs[2])
		}
		if f := h.OpStats("op").Failures; f != 0 {
			t.Fatalf("%d calls failed: the failed copies should have been followed by another", f)
		}
	})
}

// TestProbationLeavesAReplica checks that probation never empties the
// pool: with every replica failing, at most half of them are out, and a
// request still goes somewhere.
func TestProbationLeavesAReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Replicas: 4, Delay: hedge.Fixed(time.Hour), MaxAttempts: 1})
		fail := func(ctx context.Context, a hedge.Attempt) (int, error) { return 0, errBoom }
		for range 200 {
			if _, err := hedge.Do(context.Background(), h, "op", fail); !errors.Is(err, errBoom) {
				t.Fatalf("err %v, want the copy's own", err)
			}
		}
		out := 0
		for _, r := range h.ReplicaStats() {
			if r.Probation {
				out++
			}
		}
		if out != 2 {
			t.Fatalf("%d of 4 replicas on probation, want 2 (at most half)", out)
		}
	})
}

// TestLatencyIsWhatTheCallerWaited checks that Stats.Latency ends when Do
// returns, not when the winner answered: a loser that ignores its
// cancellation keeps the caller waiting, and that wait is the caller's
// latency.
func TestLatencyIsWhatTheCallerWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(5 * ms), NoBudget: true})
		s := newScript(behaviour{after: 200 * ms, val: 1, deaf: true}, behaviour{after: ms, val: 2})
		t0 := time.Now()
		v, err := hedge.Do(context.Background(), h, "op", s.attempt)
		waited := time.Since(t0)
		if err != nil || v != 2 {
			t.Fatalf("got %v, %v; want the hedge's 2", v, err)
		}
		if waited != 200*ms {
			t.Fatalf("Do returned after %v, want 200ms (it reaps the deaf loser)", waited)
		}
		if st := h.OpStats("op"); st.Latency.Max != waited || st.Latency.Sum != waited {
			t.Fatalf("Latency %v: want the 200ms the caller waited, not the 6ms the winner took", st.Latency)
		}

		// With ReapInBackground the caller returns with the winner.
		bg := mustNew(t, hedge.Config{Delay: hedge.Fixed(5 * ms), NoBudget: true, ReapInBackground: true})
		s = newScript(behaviour{after: 200 * ms, val: 1, deaf: true}, behaviour{after: ms, val: 2})
		if _, err := hedge.Do(context.Background(), bg, "op", s.attempt); err != nil {
			t.Fatal(err)
		}
		if st := bg.OpStats("op"); st.Latency.Max != 6*ms {
			t.Fatalf("ReapInBackground: Latency %v, want 6ms", st.Latency)
		}
		time.Sleep(time.Second) // the loser ends
	})
}

// TestOpNamesAreValidUTF8 checks that an operation name built from raw
// bytes reaches Stats as valid UTF-8 (exporters refuse anything else), that
// the raw name finds its class again, and that two names that become the
// same share one class, listed once.
func TestOpNamesAreValidUTF8(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	ok := func(ctx context.Context, a hedge.Attempt) (int, error) { return 1, nil }
	for _, op := range []string{"GET /\xff/{id}", "GET /\xfe/{id}", "GET /\xff/{id}", "plain"} {
		if _, err := hedge.Do(context.Background(), h, op, ok); err != nil {
			t.Fatal(err)
		}
	}
	stats := h.Stats()
	if len(stats) != 2 {
		t.Fatalf("%d classes, want 2 (the invalid names share one): %v", len(stats), stats)
	}
	for _, st := range stats {
		if !utf8.ValidString(st.Op) {
			t.Errorf("class %q is not valid UTF-8", st.Op)
		}
	}
	want := "GET /\uFFFD/{id}"
	if st := h.OpStats(want); st.Requests != 3 {
		t.Errorf("class %q: %d requests, want 3", want, st.Requests)
	}
	if st := h.OpStats("GET /\xff/{id}"); st.Op != want || st.Requests != 3 {
		t.Errorf("raw name: class %q with %d requests, want %q with 3", st.Op, st.Requests, want)
	}
	if hs := h.Histograms(); len(hs) != 2 || strings.ContainsRune(hs[0].Op+hs[1].Op, utf8.RuneError) == false {
		t.Errorf("histograms %d classes, want the same 2", len(hs))
	}
}

// TestDefaultRetryable checks the exported default predicate, which a
// custom Retryable wraps.
func TestDefaultRetryable(t *testing.T) {
	if !hedge.DefaultRetryable(errBoom) || hedge.DefaultRetryable(hedge.Permanent(errBoom)) || hedge.DefaultRetryable(fmt.Errorf("wrapped: %w", hedge.Permanent(errBoom))) {
		t.Fatal("DefaultRetryable: want every error retryable but Permanent ones")
	}
}
