package hedge_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestDoHeldFreesWinnerWhenLoserPanics: when a loser panics after the
// winner was chosen, the caller gets the panic and never sees the winner's
// result, so DoHeld must hand it to discard and cancel its context (in
// hedgehttp: close the body, free the connection).
func TestDoHeldFreesWinnerWhenLoserPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		var winnerCtx context.Context
		var discarded []int
		var got any
		func() {
			defer func() { got = recover() }()
			hedge.DoHeld(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index == 0 {
					time.Sleep(30 * ms) // deaf to cancellation; panics after the hedge won
					panic("late kaboom")
				}
				winnerCtx = ctx
				return 7, nil
			}, func(v int) { discarded = append(discarded, v) })
		}()
		if pe, ok := got.(*hedge.PanicError); !ok || pe.Value != "late kaboom" {
			t.Fatalf("recovered %v, want the loser's *PanicError", got)
		}
		if len(discarded) != 1 || discarded[0] != 7 {
			t.Fatalf("discarded %v, want the winner's result [7]", discarded)
		}
		if winnerCtx == nil || winnerCtx.Err() == nil {
			t.Fatal("the winner's context is still alive after the call panicked")
		}
	})
}

// TestHugeDelaysNeverHedge: a delay near the largest Duration must mean
// "never", not wrap around into the past and hedge at once.
func TestHugeDelaysNeverHedge(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64 - 1, hedge.Never - time.Hour + 1, 9223372036 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				for _, delay := range []hedge.Delay{
					hedge.Fixed(d),
					hedge.Percentile{Warmup: d},
				} {
					h := mustNew(t, hedge.Config{Delay: delay, MaxAttempts: 3})
					time.Sleep(time.Hour) // a late start makes start+delay wrap
					s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{val: 2}, behaviour{val: 3})
					v, err := hedge.Do(context.Background(), h, "op", s.attempt)
					if v != 1 || err != nil {
						t.Fatalf("%T: Do = %d, %v; want the primary's 1", delay, v, err)
					}
					if st := h.OpStats("op"); st.Hedges != 0 {
						t.Fatalf("%T(%v): %d hedges sent, want none", delay, d, st.Hedges)
					}
				}
			})
		})
	}
}

// TestGoexitEndsTheCall: runtime.Goexit in an attempt (t.FailNow does it)
// is invisible to recover. The call must still end, with ErrGoexit, and
// reap the other copies.
func TestGoexitEndsTheCall(t *testing.T) {
	t.Run("in a hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
			var primaryCancelled atomic.Bool
			_, err := hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index == 1 {
					runtime.Goexit()
				}
				<-ctx.Done()
				primaryCancelled.Store(true)
				return 0, ctx.Err()
			})
			if !errors.Is(err, hedge.ErrGoexit) {
				t.Fatalf("Do = %v, want ErrGoexit", err)
			}
			if !primaryCancelled.Load() {
				t.Fatal("the primary was not cancelled and reaped")
			}
		})
	})
	t.Run("in the primary, on its own goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), ReapInBackground: true})
			_, err := hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
				runtime.Goexit()
				return 0, nil
			})
			if !errors.Is(err, hedge.ErrGoexit) {
				t.Fatalf("Do = %v, want ErrGoexit", err)
			}
		})
	})
	t.Run("in the primary, on the caller's goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
			var hedgeReturned, doReturned atomic.Bool
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
					if a.Index == 1 {
						<-ctx.Done()
						hedgeReturned.Store(true)
						return 0, ctx.Err()
					}
					time.Sleep(20 * ms) // the hedge is running by now
					runtime.Goexit()
					return 0, nil
				})
				doReturned.Store(true)
			}()
			<-exited
			if doReturned.Load() {
				t.Fatal("Do returned on a goroutine that called Goexit")
			}
			if !hedgeReturned.Load() {
				t.Fatal("the goroutine ended before the hedge was cancelled and reaped")
			}
		})
	})
}

// TestConfigRefusesWhatCannotWork: configurations that can never hedge, or
// that would take gigabytes, are refused with a message that says why.
func TestConfigRefusesWhatCannotWork(t *testing.T) {
	most := func() int {
		// The largest window the message proposes must pass; one more must not.
		_, err := hedge.New(hedge.Config{Delay: hedge.Percentile{Window: 1 << 24}})
		if err == nil {
			t.Fatal("a window of 1<<24 latencies over 101 classes was accepted")
		}
		msg := err.Error()
		for _, want := range []string{"Percentile.Window = 16777216", "101 operation classes", "3.2 GiB", "64.0 MiB"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("error %q does not say %q", msg, want)
			}
		}
		i := strings.Index(msg, "at most ")
		var n int
		for _, c := range msg[i+len("at most "):] {
			if c < '0' || c > '9' {
				break
			}
			n = 10*n + int(c-'0')
		}
		return n
	}()
	if _, err := hedge.New(hedge.Config{Delay: hedge.Percentile{Window: most}}); err != nil {
		t.Fatalf("the proposed Window %d is refused: %v", most, err)
	}
	if _, err := hedge.New(hedge.Config{Delay: hedge.Percentile{Window: most + 1}}); err == nil {
		t.Fatalf("Window %d is accepted, though the message says %d is the most", most+1, most)
	}
	// Fewer classes make room for a longer window.
	if _, err := hedge.New(hedge.Config{Delay: &hedge.Percentile{Window: 1 << 20}, MaxOps: 4}); err != nil {
		t.Fatalf("a 1<<20 window over 5 classes (10 MiB) is refused: %v", err)
	}

	for _, tc := range []struct {
		name string
		cfg  hedge.Config
		want string // "" for valid
	}{
		{"one replica", hedge.Config{Replicas: 1}, "Config.Replicas = 1 leaves no other replica"},
		{"one replica, one copy", hedge.Config{Replicas: 1, MaxAttempts: 1}, ""},
		{"two replicas", hedge.Config{Replicas: 2}, ""},
		{"zero budget", hedge.Config{Budget: &hedge.Budget{}}, "zero Budget"},
	} {
		_, err := hedge.New(tc.cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestBudgetConstructorsReportEveryMistake: each argument's mistake is
// reported, not only the first.
func TestBudgetConstructorsReportEveryMistake(t *testing.T) {
	_, err := hedge.NewBudget(10, 0)
	if err == nil || !strings.Contains(err.Error(), "ratio 10") || !strings.Contains(err.Error(), "burst 0") {
		t.Errorf("NewBudget(10, 0) = %v, want both the ratio and the burst named", err)
	}
	_, err = hedge.NewThrottle(0, 0)
	if err == nil || !strings.Contains(err.Error(), "maxTokens 0") || !strings.Contains(err.Error(), "tokenRatio 0") {
		t.Errorf("NewThrottle(0, 0) = %v, want both maxTokens and tokenRatio named", err)
	}
	_, err = hedge.NewThrottle(2000, 3000)
	if err == nil || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("NewThrottle(2000, 3000) = %v, want one error: tokenRatio is judged only against a valid maxTokens", err)
	}
}

// TestNeverReadsNever: stats print a Never delay as "never".
func TestNeverReadsNever(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	st := h.OpStats("Get")
	if st.Delay != hedge.Never {
		t.Fatalf("delay %v before any sample, want Never", st.Delay)
	}
	if s := st.String(); !strings.Contains(s, "delay never") || strings.Contains(s, "2562047h") {
		t.Fatalf("Stats.String() = %q, want the delay as \"never\"", s)
	}
	if got := hedge.FormatDelay(3 * ms); got != "3ms" {
		t.Fatalf("FormatDelay(3ms) = %q", got)
	}
}

// The live percentile is fed the primary's own latency (see Percentile).
// TestPercentileDelayRecordsPrimaries covers the censored case; these cases
// tell the documented rule apart from the tempting alternatives, which
// that test cannot: feeding the winner's latency, or every copy's running
// time.

// A primary that fails fast is not a latency sample, even though a hedge
// then wins: the winner's latency must not stand in for it.
func TestPercentileIgnoresFailedPrimaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Percentile{Window: 10, MinSamples: 1}, NoBudget: true})
		for range 20 {
			s := newScript(behaviour{after: 1 * ms, err: errBoom}, behaviour{after: 2 * ms, val: 2})
			if v, err := hedge.Do(context.Background(), h, "op", s.attempt); v != 2 || err != nil {
				t.Fatalf("Do = %d, %v; want the hedge's 2", v, err)
			}
		}
		st := h.OpStats("op")
		if st.HedgeWins != 20 {
			t.Fatalf("%d hedge wins, want 20: the scenario did not run", st.HedgeWins)
		}
		if st.Delay != hedge.Never {
			t.Fatalf("delay %v, want Never: no primary succeeded, so there is no sample", st.Delay)
		}
	})
}

// A primary that ignores cancellation and succeeds after a hedge won has a
// known latency: with ReapInBackground it finishes on its own and its full
// latency is recorded, not the winner's nor the censored bound.
func TestPercentileRecordsDeafPrimaryInFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{
			Delay:            hedge.Percentile{P: 50, Window: 10, MinSamples: 1, Warmup: 10 * ms},
			ReapInBackground: true,
		})
		s := newScript(behaviour{after: 100 * ms, deaf: true, val: 1}, behaviour{after: 2 * ms, val: 2})
		if v, err := hedge.Do(context.Background(), h, "op", s.attempt); v != 2 || err != nil {
			t.Fatalf("Do = %d, %v; want the hedge's 2", v, err)
		}
		time.Sleep(time.Second) // the deaf primary finishes in the background
		synctest.Wait()
		st := h.OpStats("op")
		if st.Delay < 99*ms || st.Delay > 101*ms {
			t.Fatalf("delay %v, want the primary's full 100ms", st.Delay)
		}
		if st.PrimaryCensored != 0 {
			t.Fatalf("%d primaries counted as censored, want 0: this one finished", st.PrimaryCensored)
		}
	})
}

// At a high hedge rate, adding hedges' and cancelled losers' running times
// to the window would drag the percentile down, which sends more hedges.
// Primaries take 1..100 ms, hedges 1 ms and always win: the median delay
// must stay at the primaries' median.
func TestPercentileStableAtHighHedgeRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		st := uniformPrimaries(t, 50, 1*ms, rand.New(rand.NewPCG(3, 4)))
		if st.Delay < 45*ms || st.Delay > 55*ms {
			t.Fatalf("delay %v, want about the primaries' median of 50ms", st.Delay)
		}
		if r := st.HedgeRate(); r < 0.4 || r > 0.55 {
			t.Fatalf("hedge rate %.3f, want about one half", r)
		}
	})
}

// TestPickerTwoChoicesNotShortestQueue: with loads 0, 1, 2, 3 two choices
// takes replica i when it is drawn with a more loaded one: with probability
// 3/6, 2/6, 1/6 and 0, where joining the shortest queue would always take
// replica 0 and a uniform pick 1/4 each.
func TestPickerTwoChoicesNotShortestQueue(t *testing.T) {
	load := []int{0, 1, 2, 3}
	r := rand.New(rand.NewPCG(9, 10))
	const n = 60000
	want := []float64{3.0 / 6, 2.0 / 6, 1.0 / 6, 0}
	for _, held := range [][]int{nil, {3}} {
		var p hedge.Picker
		count := make([]int, 4)
		for range n {
			count[p.Pick(4, held, func(i int) int { return load[i] }, r)]++
		}
		w := want
		if held != nil {
			// Replica 3 is held: pairs among 0, 1, 2.
			w = []float64{2.0 / 3, 1.0 / 3, 0, 0}
		}
		for i, c := range count {
			sd := math.Sqrt(n * w[i] * (1 - w[i]))
			if math.Abs(float64(c)-n*w[i]) > 5*sd+1 {
				t.Fatalf("held %v: choices %v, want about %v of %d", held, count, w, n)
			}
		}
	}
}

// TestPushbackAfter checks the server's "hold off" (gRPC's
// grpc-retry-pushback-ms): a delay moves the next copy, a negative value
// stops further copies but lets running ones finish.
func TestPushbackAfter(t *testing.T) {
	errBusy := errors.New("busy")
	t.Run("a delay moves the next copy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(100 * ms), MaxAttempts: 3})
			s := newScript(
				behaviour{after: 5 * ms, err: hedge.PushbackAfter(errBusy, 30*ms)},
				behaviour{after: 1 * ms, val: 2},
				behaviour{val: 3},
			)
			v, err := hedge.Do(context.Background(), h, "op", s.attempt)
			if v != 2 || err != nil {
				t.Fatalf("Do = %d, %v; want the hedge's 2", v, err)
			}
			if ev := s.events()[1]; ev.start != 35*ms {
				t.Fatalf("the hedge went at %v, want 35ms: 30ms after the pushback, not at once nor at the delay", ev.start)
			}
		})
	})
	t.Run("a negative value stops further copies", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3})
			s := newScript(
				behaviour{after: 15 * ms, err: hedge.PushbackAfter(errBusy, -1)},
				behaviour{after: 40 * ms, val: 2}, // sent at 10ms, still running at 15ms; no third at 20ms
				behaviour{val: 3},
			)
			v, err := hedge.Do(context.Background(), h, "op", s.attempt)
			if v != 2 || err != nil {
				t.Fatalf("Do = %d, %v; want the running hedge's 2", v, err)
			}
			if n := s.calls.Load(); n != 2 {
				t.Fatalf("%d copies sent, want 2: none after the pushback", n)
			}
		})
	})
	t.Run("a lone copy's pushback fails the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			b, _ := hedge.NewThrottle(10, 1)
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: b})
			s := newScript(behaviour{after: 1 * ms, err: hedge.PushbackAfter(errBusy, -1)}, behaviour{val: 2})
			_, err := hedge.Do(context.Background(), h, "op", s.attempt)
			if !errors.Is(err, errBusy) || s.calls.Load() != 1 {
				t.Fatalf("Do = %v after %d copies; want busy after 1", err, s.calls.Load())
			}
			if got := b.Tokens(); got != 9 {
				t.Fatalf("throttle holds %v tokens, want 9: one debit for the pushback", got)
			}
		})
	})
	t.Run("the caller's context ends a held call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*ms, cancel)
			s := newScript(behaviour{after: 1 * ms, err: hedge.PushbackAfter(errBusy, time.Hour)}, behaviour{val: 2})
			t0 := time.Now()
			_, err := hedge.Do(ctx, h, "op", s.attempt)
			if !errors.Is(err, context.Canceled) || time.Since(t0) != 20*ms || s.calls.Load() != 1 {
				t.Fatalf("Do = %v after %v and %d copies; want canceled after 20ms and 1", err, time.Since(t0), s.calls.Load())
			}
		})
	})
	t.Run("a final error ends the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
			s := newScript(behaviour{after: 1 * ms, err: hedge.PushbackAfter(hedge.Permanent(errBusy), 5*ms)}, behaviour{val: 2})
			_, err := hedge.Do(context.Background(), h, "op", s.attempt)
			if !errors.Is(err, errBusy) || s.calls.Load() != 1 {
				t.Fatalf("Do = %v after %d copies; want busy after 1", err, s.calls.Load())
			}
		})
	})
}

// TestModeVarIsShared: Hedgers given one ModeVar switch together, and a
// nil *ModeVar is refused.
func TestModeVarIsShared(t *testing.T) {
	var mv hedge.ModeVar
	a := mustNew(t, hedge.Config{Mode: &mv})
	b := mustNew(t, hedge.Config{Mode: &mv})
	if err := a.SetMode(hedge.Shadow); err != nil {
		t.Fatal(err)
	}
	if b.Mode() != hedge.Shadow || mv.Mode() != hedge.Shadow {
		t.Fatalf("after a.SetMode(Shadow): b %v, var %v", b.Mode(), mv.Mode())
	}
	if err := mv.UnmarshalText([]byte("off")); err != nil || a.Mode() != hedge.Off {
		t.Fatalf("UnmarshalText(off): %v, a in %v", err, a.Mode())
	}
	if err := mv.Set(hedge.Mode(9)); err == nil {
		t.Fatal("Set(Mode(9)) accepted")
	}
	_, err := hedge.New(hedge.Config{Mode: (*hedge.ModeVar)(nil)})
	if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "nil *ModeVar") {
		t.Fatalf("a nil *ModeVar: %v", err)
	}
	if h := mustNew(t, hedge.Config{Mode: hedge.Shadow}); h.Mode() != hedge.Shadow || h.ModeVar() == &mv {
		t.Fatalf("a Mode value: the Hedger is in %v, with the shared ModeVar %v", h.Mode(), h.ModeVar() == &mv)
	}
	if _, err := hedge.New(hedge.Config{MaxAttempts: 9}); !errors.Is(err, hedge.ErrInvalidConfig) {
		t.Fatalf("a bad config's error %v does not match ErrInvalidConfig", err)
	}
}

// TestAttemptTimeout: a copy that outlives Config.AttemptTimeout is ended
// by its own context and the next copy goes at once; the caller's deadline
// still ends the call.
func TestAttemptTimeout(t *testing.T) {
	stuck := func(ctx context.Context, a hedge.Attempt) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	stuckPrimary := func(ctx context.Context, a hedge.Attempt) (int, error) {
		if a.Index > 0 {
			return a.Index, nil
		}
		return stuck(ctx, a)
	}
	t.Run("a stuck primary is replaced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), AttemptTimeout: 30 * ms})
			t0 := time.Now()
			v, err := hedge.Do(context.Background(), h, "op", stuckPrimary)
			if v != 1 || err != nil || time.Since(t0) != 30*ms {
				t.Fatalf("Do = %d, %v after %v; want the hedge's 1 at 30ms", v, err, time.Since(t0))
			}
		})
	})
	t.Run("the caller's deadline ends the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), AttemptTimeout: 30 * ms, MaxAttempts: 5, NoBudget: true})
			ctx, cancel := context.WithTimeout(context.Background(), 100*ms)
			defer cancel()
			t0 := time.Now()
			var copies atomic.Int32
			_, err := hedge.Do(ctx, h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
				copies.Add(1)
				return stuck(ctx, a)
			})
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 100*ms {
				t.Fatalf("Do = %v after %v; want deadline exceeded at the caller's 100ms", err, time.Since(t0))
			}
			if n := copies.Load(); n != 4 {
				t.Fatalf("%d copies, want 4: at 0, 30, 60 and 90ms", n)
			}
		})
	})
	t.Run("a lone copy is bounded too", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{MaxAttempts: 1, AttemptTimeout: 30 * ms})
			t0 := time.Now()
			_, err := hedge.Do(context.Background(), h, "op", stuck)
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 30*ms {
				t.Fatalf("Do = %v after %v; want deadline exceeded at 30ms", err, time.Since(t0))
			}
		})
	})
	if _, err := hedge.New(hedge.Config{AttemptTimeout: -1}); err == nil || !strings.Contains(err.Error(), "AttemptTimeout") {
		t.Fatalf("a negative AttemptTimeout: %v", err)
	}
}

// The engine reads the caller's deadline as a time, and measures the time
// left from now, at each decision: not from the Hedger's creation, nor
// from the call's start. The Hedger here is an hour old, so that a
// deadline read against the wrong origin is an hour off; and the second
// call's hedge, refused as busy at 10 ms, is asked for again at 20 ms,
// when 5 ms are left, less than the delay.
func TestDeadlineTimeLeftFromNow(t *testing.T) {
	type refusal struct {
		op      string
		why     hedge.Refusal
		elapsed time.Duration
	}
	var mu sync.Mutex
	var refused []refusal
	onEvent := func(e hedge.Event) {
		if e.Kind == hedge.HedgeRefused {
			mu.Lock()
			refused = append(refused, refusal{e.Op, e.Refusal, e.Elapsed})
			mu.Unlock()
		}
	}
	refusals := func(op string, why hedge.Refusal) (at []time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range refused {
			if r.op == op && r.why == why {
				at = append(at, r.elapsed)
			}
		}
		return at
	}
	t.Run("the next hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3, PayoffWinRate: -1, OnEvent: onEvent})
			time.Sleep(time.Hour)
			// The first hedge goes at 10 ms; the second would go at 20 ms
			// and could not answer before the deadline at 25 ms.
			ctx, cancel := context.WithTimeout(context.Background(), 25*ms)
			defer cancel()
			s := newScript(behaviour{after: 100 * ms}, behaviour{after: 100 * ms}, behaviour{after: ms})
			_, err := hedge.Do(ctx, h, "read", s.attempt)
			ev := s.events()
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(s.t0) != 25*ms || len(ev) != 2 || ev[1].start != 10*ms {
				t.Errorf("Do = %v after %v, copies %v: want the hedge at 10ms, no second one, and the deadline at 25ms", err, time.Since(s.t0), ev)
			}
			if at := refusals("read", hedge.RefusedDeadline); len(at) != 1 || at[0] > 20*ms {
				t.Errorf("deadline refusals at %v: want one, by 20ms", at)
			}
		})
	})
	t.Run("a hedge asked for again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Replicas: 2, Delay: hedge.Fixed(10 * ms), PayoffWinRate: -1, OnEvent: onEvent})
			time.Sleep(time.Hour)
			// x holds one replica until 15 ms; y's primary takes the other,
			// and its hedge, due at 10 ms, finds x's replica busy.
			done := make(chan struct{})
			go func() {
				defer close(done)
				hedge.Do(context.Background(), h, "x", func(ctx context.Context, a hedge.Attempt) (int, error) {
					time.Sleep(15 * ms)
					return 0, nil
				})
			}()
			synctest.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 25*ms)
			defer cancel()
			s := newScript(behaviour{after: 100 * ms}, behaviour{after: ms})
			_, err := hedge.Do(ctx, h, "y", s.attempt)
			<-done
			if ev := s.events(); !errors.Is(err, context.DeadlineExceeded) || len(ev) != 1 {
				t.Errorf("Do = %v, copies %v: want no hedge, and the deadline at 25ms", err, ev)
			}
			if at := refusals("y", hedge.RefusedBusy); len(at) != 1 || at[0] != 10*ms {
				t.Errorf("busy refusals at %v: want one at 10ms, while x held the other replica", at)
			}
			if at := refusals("y", hedge.RefusedDeadline); len(at) != 1 || at[0] != 20*ms {
				t.Errorf("deadline refusals at %v: want one at 20ms, when the hedge refused as busy was asked for again", at)
			}
		})
	})
}
