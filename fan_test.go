package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// sleepLeaf returns a leaf function whose copy a of leaf i takes d(i, a),
// and returns i*10 (or ctx's error, when cancelled first).
func sleepLeaf(d func(i int, a hedge.Attempt) time.Duration) func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
	return func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
		t := time.NewTimer(d(i, a))
		defer t.Stop()
		select {
		case <-t.C:
			return i * 10, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// linger waits out the Hedger's timer goroutine, so that the bubble can
// end.
func linger() { time.Sleep(time.Second) }

func TestDoFanAllLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4})
		res, err := hedge.DoFan(context.Background(), h, "read", 7, hedge.FanOut{}, sleepLeaf(func(i int, _ hedge.Attempt) time.Duration {
			return time.Duration(i+1) * time.Millisecond
		}))
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range res.Values {
			if v != i*10 || res.Errs[i] != nil {
				t.Errorf("leaf %d: %d, %v; want %d, answered", i, v, res.Errs[i], i*10)
			}
		}
		st := h.OpStats("read")
		if st.Fan.Requests != 1 || st.Fan.Leaves != 7 || st.Requests != 7 || st.Fan.Partial != 0 || st.Fan.ExtraCopies[0] != 1 {
			t.Errorf("stats: %+v, %d requests", st.Fan, st.Requests)
		}
		if st.Fan.Latency.Count != 1 || st.Fan.Latency.Max < 7*time.Millisecond {
			t.Errorf("fan-out latency %v: want one sample of at least 7ms", st.Fan.Latency)
		}
		linger()
	})
}

// A leaf whose primary is stuck is hedged once most of its siblings have
// answered, long before the Hedger's own delay: its siblings took 1 ms,
// so it is a straggler at 3 ms (FanOut.Straggle's default multiple of the
// time the 30th of 40 answers took).
func TestDoFanSiblingTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 8, Delay: hedge.Fixed(time.Second)})
		start := time.Now()
		res, err := hedge.DoFan(hedge.WithFanOut(context.Background()), h, "read", 40, hedge.FanOut{}, sleepLeaf(func(i int, a hedge.Attempt) time.Duration {
			if i == 5 && a.Index == 0 {
				return time.Minute
			}
			return time.Millisecond
		}))
		took := time.Since(start)
		if err != nil || res.Values[5] != 50 {
			t.Fatalf("leaf 5: %d, %v", res.Values[5], err)
		}
		if took != 4*time.Millisecond {
			t.Errorf("the fan-out took %v; want 4ms: a hedge at 3ms, answering 1ms later", took)
		}
		st := h.OpStats("read")
		if st.Hedges != 1 || st.HedgeWins != 1 || st.Fan.Extra != 1 || st.Fan.ExtraCopies[1] != 1 {
			t.Errorf("%d hedges, %d won, fan-out extra %d: want the straggler's one hedge", st.Hedges, st.HedgeWins, st.Fan.Extra)
		}
		linger()
	})
}

// Without the sibling trigger (Straggle < 0), the same straggler, at the
// head of this Hedger's requests on its replica once its siblings there
// have answered, waits three of the Hedger's delays (decide.HeadDelays).
func TestDoFanSiblingTriggerOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 8, Delay: hedge.Fixed(100 * time.Millisecond)})
		start := time.Now()
		_, err := hedge.DoFan(context.Background(), h, "read", 40, hedge.FanOut{Straggle: -1}, sleepLeaf(func(i int, a hedge.Attempt) time.Duration {
			if i == 5 && a.Index == 0 {
				return time.Minute
			}
			return time.Millisecond
		}))
		if took := time.Since(start); err != nil || took != 301*time.Millisecond {
			t.Errorf("took %v, %v; want 301ms: three delays, then the hedge", took, err)
		}
		linger()
	})
}

// The request's own cap holds: however many leaves straggle, no more than
// FanOut.InFlight extra copies of one fan-out run at once, nor more than
// FanOut.Hedges in all; thousands of fan-outs run at once, and each
// counts its own copies.
func TestDoFanCap(t *testing.T) {
	const fanouts, leaves, hedges, inFlight = 1000, 20, 4, 2
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 10, Delay: hedge.Fixed(time.Millisecond), NoBudget: true, MaxAttempts: 3, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
		var wg sync.WaitGroup
		var worst, extra, spent atomic.Int64
		for f := range fanouts {
			wg.Go(func() {
				var now, peak, sent atomic.Int64
				_, err := hedge.DoFan(context.Background(), h, "read", leaves, hedge.FanOut{Hedges: hedges, InFlight: inFlight}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
					if a.Hedge {
						sent.Add(1)
						n := now.Add(1)
						defer now.Add(-1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
					}
					d := time.Millisecond
					if (i+f)%3 == 0 { // a third of the leaves straggle, every copy
						d = time.Duration(5+i%7) * time.Millisecond
					}
					select {
					case <-time.After(d):
						return i, nil
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				})
				if err != nil {
					t.Error(err)
				}
				for p := worst.Load(); peak.Load() > p && !worst.CompareAndSwap(p, peak.Load()); p = worst.Load() {
				}
				if sent.Load() > hedges {
					t.Errorf("fan-out %d sent %d extra copies; the budget is %d", f, sent.Load(), hedges)
				}
				if sent.Load() == hedges {
					spent.Add(1)
				}
				extra.Add(sent.Load())
			})
		}
		wg.Wait()
		st := h.OpStats("read")
		t.Logf("%d extra copies, most in flight at once in one fan-out %d, %d refused by the fan-outs' own caps, %d fan-outs spent their budget", extra.Load(), worst.Load(), st.Refused[hedge.RefusedFanOut], spent.Load())
		if worst.Load() > inFlight {
			t.Errorf("a fan-out had %d extra copies in flight at once; the cap is %d", worst.Load(), inFlight)
		}
		if worst.Load() < inFlight || st.Refused[hedge.RefusedFanOut] == 0 || spent.Load() == 0 {
			t.Errorf("the cap or the budget was never reached (peak %d, %d refused, %d fan-outs spent their budget): the test does not test them", worst.Load(), st.Refused[hedge.RefusedFanOut], spent.Load())
		}
		if st.Fan.Extra != extra.Load() {
			t.Errorf("Stats.Fan.Extra = %d; the leaves saw %d", st.Fan.Extra, extra.Load())
		}
		linger()
	})
}

func TestDoFanNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		var cancelled atomic.Int64
		start := time.Now()
		res, err := hedge.DoFan(context.Background(), h, "read", 10, hedge.FanOut{Need: 8}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			d := time.Millisecond
			if i >= 8 {
				d = time.Hour
			}
			select {
			case <-time.After(d):
				return i, nil
			case <-ctx.Done():
				cancelled.Add(1)
				return 0, ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("took %v; want 1ms, when 8 leaves had answered", took)
		}
		for i := range 10 {
			if want := i < 8; (res.Errs[i] == nil) != want {
				t.Errorf("leaf %d answered %v, error %v", i, res.Errs[i] == nil, res.Errs[i])
			}
		}
		if !errors.Is(res.Errs[9], hedge.ErrNotNeeded) || cancelled.Load() != 2 {
			t.Errorf("leaf 9: %v, %d leaves saw their context cancelled; want ErrNotNeeded and 2", res.Errs[9], cancelled.Load())
		}
		if st := h.OpStats("read").Fan; st.NotNeeded != 2 || st.Partial != 0 {
			t.Errorf("stats %+v: want 2 not needed, no partial", st)
		}
		linger()
	})
}

func TestDoFanGoodEnough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		start := time.Now()
		res, err := hedge.DoFan(context.Background(), h, "read", 5, hedge.FanOut{GoodEnough: 10 * time.Millisecond}, sleepLeaf(func(i int, _ hedge.Attempt) time.Duration {
			if i == 1 || i == 3 {
				return time.Hour
			}
			return time.Millisecond
		}))
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Errorf("took %v; want the good-enough time, 10ms", took)
		}
		var fe *hedge.FanError
		if !errors.As(err, &fe) || !errors.Is(err, hedge.ErrLate) || fe.Answered != 3 || fe.Need != 5 {
			t.Fatalf("error %v: want a *FanError with 3 of 5 answered, matching ErrLate", err)
		}
		for i := range 5 {
			late := i == 1 || i == 3
			if late != errors.Is(res.Errs[i], hedge.ErrLate) || !late && res.Values[i] != i*10 {
				t.Errorf("leaf %d: %d, %v", i, res.Values[i], res.Errs[i])
			}
		}
		if st := h.OpStats("read").Fan; st.Late != 2 || st.Partial != 1 {
			t.Errorf("stats %+v: want 2 late, 1 partial", st)
		}
		linger()
	})
}

func TestDoFanCanaries(t *testing.T) {
	boom := errors.New("boom")
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		// A canary that fails: the other leaves never go.
		var calls atomic.Int64
		res, err := hedge.DoFan(context.Background(), h, "read", 10, hedge.FanOut{Canaries: 2}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			calls.Add(1)
			if i == 1 {
				return 0, hedge.Permanent(boom)
			}
			time.Sleep(time.Millisecond)
			return i, ctx.Err()
		})
		if !errors.Is(err, boom) || !errors.Is(err, hedge.ErrNotSentCanary) || calls.Load() > 2 {
			t.Fatalf("error %v after %d leaf calls: want the canary's error and ErrNotSentCanary, and no leaf but the canaries called", err, calls.Load())
		}
		if !errors.Is(res.Errs[1], boom) || !errors.Is(res.Errs[5], hedge.ErrNotSentCanary) {
			t.Errorf("leaf 1: %v, leaf 5: %v", res.Errs[1], res.Errs[5])
		}
		// Canaries that answer: every leaf goes after them.
		calls.Store(0)
		start := time.Now()
		res, err = hedge.DoFan(context.Background(), h, "read", 10, hedge.FanOut{Canaries: 2}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			calls.Add(1)
			time.Sleep(time.Millisecond)
			return i, nil
		})
		if err != nil || calls.Load() != 10 || res.Values[9] != 9 {
			t.Fatalf("%v after %d calls", err, calls.Load())
		}
		if took := time.Since(start); took != 2*time.Millisecond {
			t.Errorf("took %v; want 2ms, the canaries then the rest", took)
		}
		linger()
	})
}

// A leaf that fails when every leaf is needed fails the fan-out at once:
// the others are cancelled.
func TestDoFanLeafFails(t *testing.T) {
	boom := errors.New("boom")
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		start := time.Now()
		res, err := hedge.DoFan(context.Background(), h, "read", 4, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			if i == 2 {
				time.Sleep(time.Millisecond)
				return 0, hedge.Permanent(boom)
			}
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if took := time.Since(start); took != time.Millisecond {
			t.Errorf("took %v; want 1ms", took)
		}
		if !errors.Is(err, boom) || !errors.Is(res.Errs[0], hedge.ErrFanOutFailed) || !errors.Is(res.Errs[2], boom) {
			t.Errorf("error %v; leaf 0 %v; leaf 2 %v", err, res.Errs[0], res.Errs[2])
		}
		linger()
	})
}

func TestDoFanCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		_, err := hedge.DoFan(ctx, h, "read", 3, hedge.FanOut{}, sleepLeaf(func(int, hedge.Attempt) time.Duration { return time.Hour }))
		var fe *hedge.FanError
		if !errors.As(err, &fe) || !errors.Is(err, context.DeadlineExceeded) || fe.Answered != 0 {
			t.Errorf("error %v: want a *FanError matching context.DeadlineExceeded", err)
		}
		linger()
	})
}

func TestDoFanPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		var returned atomic.Int64
		defer func() {
			p, ok := recover().(*hedge.PanicError)
			if !ok || p.Value != "leaf 3" {
				t.Errorf("recovered %v; want the leaf's panic as a *PanicError", p)
			}
			if returned.Load() != 4 {
				t.Errorf("%d other leaves had returned when the panic reached the caller; want 4", returned.Load())
			}
			linger()
		}()
		hedge.DoFan(context.Background(), h, "read", 5, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			if i == 3 {
				panic("leaf 3")
			}
			defer returned.Add(1)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		t.Error("DoFan returned")
	})
}

func TestDoFanBadInput(t *testing.T) {
	h := mustNew(t, hedge.Config{Replicas: 2})
	leaf := func(context.Context, int, hedge.Attempt) (int, error) {
		t.Error("a leaf was called")
		return 0, nil
	}
	for _, f := range []hedge.FanOut{{Need: 4}, {Need: -1}, {Canaries: 4}, {GoodEnough: -1}, {InFlight: -1}, {Mark: 1.5}, {Straggle: 0.5}} {
		if _, err := hedge.DoFan(context.Background(), h, "read", 3, f, leaf); !errors.Is(err, hedge.ErrInvalidConfig) {
			t.Errorf("%+v: error %v; want ErrInvalidConfig", f, err)
		}
	}
	ctx := hedge.WithIdempotencyKey(context.Background(), "k")
	if _, err := hedge.DoFan(ctx, h, "read", 3, hedge.FanOut{}, leaf); !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "idempotency key") {
		t.Errorf("a context with a key: %v; want ErrInvalidConfig, about the key", err)
	}
	res, err := hedge.DoFan(context.Background(), h, "read", 0, hedge.FanOut{}, leaf)
	if err != nil || len(res.Values) != 0 {
		t.Errorf("no leaves: %v, %v", res, err)
	}
}

// Leaves of a request marked NotIdempotent go once each.
func TestDoFanNotIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, Delay: hedge.Fixed(time.Millisecond)})
		_, err := hedge.DoFan(hedge.NotIdempotent(context.Background()), h, "write", 4, hedge.FanOut{}, sleepLeaf(func(int, hedge.Attempt) time.Duration { return 10 * time.Millisecond }))
		st := h.OpStats("write")
		if err != nil || st.Hedges != 0 || st.Unhedgeable != 4 {
			t.Errorf("%v; %d hedges, %d unhedgeable: want none and 4", err, st.Hedges, st.Unhedgeable)
		}
		linger()
	})
}

func ExampleDoFan() {
	h, err := hedge.New(hedge.Config{Replicas: 3})
	if err != nil {
		panic(err)
	}
	// Read 6 shards, each from one of 3 replicas; return once 5 have
	// answered (as an erasure-coded read of 5 splits out of 6 would).
	res, err := hedge.DoFan(context.Background(), h, "shard", 6, hedge.FanOut{Need: 5}, func(ctx context.Context, shard int, a hedge.Attempt) (string, error) {
		return fmt.Sprintf("shard %d from replica %d", shard, a.Replica), nil
	})
	if err != nil {
		panic(err)
	}
	answered := 0
	for i := range res.Values {
		if res.Errs[i] == nil {
			answered++
		}
	}
	fmt.Println(answered >= 5)
	// Output: true
}

// Canaries that are all the leaves Need asks for answer the fan-out: the
// other leaves never go, and their error says the fan-out did not need
// them, not that a canary failed. Neither they nor the leaves cancelled
// because Need was met count as failures.
func TestDoFanNeedMetByCanaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		var calls atomic.Int64
		res, err := hedge.DoFan(context.Background(), h, "read", 10, hedge.FanOut{Need: 2, Canaries: 2}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			calls.Add(1)
			time.Sleep(time.Millisecond)
			return i * 10, nil
		})
		if err != nil || calls.Load() != 2 {
			t.Fatalf("error %v after %d leaf calls: want none after the 2 canaries", err, calls.Load())
		}
		for i := range 10 {
			switch {
			case i < 2 && (res.Errs[i] != nil || res.Values[i] != i*10):
				t.Errorf("canary %d: %d, %v", i, res.Values[i], res.Errs[i])
			case i >= 2 && (!errors.Is(res.Errs[i], hedge.ErrNotSentNeedMet) || errors.Is(res.Errs[i], hedge.ErrNotSentCanary)):
				t.Errorf("leaf %d: %v; want ErrNotSentNeedMet", i, res.Errs[i])
			}
		}
		if st := h.OpStats("read"); st.Requests != 2 || st.Failures != 0 || st.Fan.Partial != 0 {
			t.Errorf("%d requests, %d failures, %d partial: want the canaries' 2 requests, no failure", st.Requests, st.Failures, st.Fan.Partial)
		}

		// Need met with leaves still running: they are cancelled, and
		// are not failures either.
		res, err = hedge.DoFan(context.Background(), h, "write", 10, hedge.FanOut{Need: 8}, sleepLeaf(func(i int, _ hedge.Attempt) time.Duration {
			return time.Duration(i+1) * time.Millisecond
		}))
		if err != nil || !errors.Is(res.Errs[9], hedge.ErrNotNeeded) {
			t.Fatalf("error %v, leaf 9 %v", err, res.Errs[9])
		}
		if st := h.OpStats("write"); st.Requests != 10 || st.Failures != 0 || st.Fan.NotNeeded != 2 {
			t.Errorf("%d requests, %d failures, %d not needed: want 10, none, 2", st.Requests, st.Failures, st.Fan.NotNeeded)
		}
		linger()
	})
}

// A fan-out that ends while its canaries run leaves the other leaves
// unsent, with the reason it ended: the good-enough time, or the caller's
// context.
func TestDoFanEndsDuringCanaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
		slow := sleepLeaf(func(int, hedge.Attempt) time.Duration { return time.Hour })
		res, err := hedge.DoFan(context.Background(), h, "read", 4, hedge.FanOut{Canaries: 1, GoodEnough: 5 * time.Millisecond}, slow)
		if !errors.Is(err, hedge.ErrLate) || !errors.Is(res.Errs[0], hedge.ErrLate) || !errors.Is(res.Errs[3], hedge.ErrLate) || errors.Is(res.Errs[3], hedge.ErrNotSentCanary) {
			t.Errorf("error %v; canary %v; leaf 3 %v: want ErrLate for both", err, res.Errs[0], res.Errs[3])
		}
		// The message says what happened to each: the canary was
		// cancelled, leaf 3 never went.
		if msg := res.Errs[3].Error(); !strings.Contains(msg, "not sent") || strings.Contains(msg, "cancelled") {
			t.Errorf("leaf 3's error %q: want it to say the leaf was not sent", msg)
		}
		if msg := res.Errs[0].Error(); !strings.Contains(msg, "cancelled") {
			t.Errorf("canary's error %q: want it to say the leaf was cancelled", msg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		res, err = hedge.DoFan(ctx, h, "read", 4, hedge.FanOut{Canaries: 1}, slow)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(res.Errs[3], context.DeadlineExceeded) || errors.Is(res.Errs[3], hedge.ErrNotSentCanary) {
			t.Errorf("error %v; leaf 3 %v: want the context's error", err, res.Errs[3])
		}
		linger()
	})
}

// A request budget or cap too large for the decision's counters is as
// good as no limit, not a limit of none: a straggler is hedged whatever
// the size of FanOut.Hedges and FanOut.InFlight.
func TestDoFanHugeBudget(t *testing.T) {
	big := int64(1) << 31
	if int64(math.MaxInt) < big {
		t.Skip("int has 32 bits: FanOut.Hedges cannot reach 2^31")
	}
	for _, f := range []hedge.FanOut{
		{Hedges: int(big)},
		{Hedges: int(big << 1)},
		{Hedges: int(big + 5)},
		{Hedges: math.MaxInt},
		{InFlight: int(big)},
		{InFlight: int(big << 1), Hedges: 3},
		{InFlight: math.MaxInt, Hedges: math.MaxInt},
	} {
		t.Run(fmt.Sprintf("Hedges=%d,InFlight=%d", f.Hedges, f.InFlight), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Millisecond), MaxAttempts: 2, NoBudget: true, PayoffWinRate: -1})
				f.Straggle = -1
				res, err := hedge.DoFan(context.Background(), h, "read", 2, f, sleepLeaf(func(i int, a hedge.Attempt) time.Duration {
					if i == 1 && a.Index == 0 {
						return 100 * time.Millisecond
					}
					return 500 * time.Microsecond // before the Hedger's delay
				}))
				st := h.OpStats("read")
				if err != nil || res.Values[1] != 10 || st.Hedges != 1 || st.Fan.Extra != 1 {
					t.Errorf("FanOut{Hedges: %d, InFlight: %d}: %v, leaf 1 %d, %d hedges, %d extra: want the straggler hedged once", f.Hedges, f.InFlight, err, res.Values[1], st.Hedges, st.Fan.Extra)
				}
				linger()
			})
		})
	}
}

// A fan-out that needs Need of n leaves survives n-Need failed leaves,
// and fails at once with the one after: the failed leaves fail at 1 ms,
// the others answer at 2 ms.
func TestDoFanSurvivesSpareFailures(t *testing.T) {
	boom := errors.New("boom")
	const n = 5
	for need := 1; need <= n; need++ {
		for failed := n - need; failed <= n-need+1; failed++ {
			t.Run(fmt.Sprintf("need=%d,failed=%d", need, failed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := mustNew(t, hedge.Config{Replicas: 4, MaxAttempts: 1})
					start := time.Now()
					res, err := hedge.DoFan(context.Background(), h, "read", n, hedge.FanOut{Need: need}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
						if i < failed {
							time.Sleep(time.Millisecond)
							return 0, hedge.Permanent(boom)
						}
						select {
						case <-time.After(2 * time.Millisecond):
							return i, nil
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					})
					took := time.Since(start)
					if failed == n-need {
						if err != nil || took != 2*time.Millisecond || (failed > 0 && !errors.Is(res.Errs[0], boom)) {
							t.Errorf("%v after %v, leaf 0 %v: want success at 2ms, with %d leaves answered and %d failed", err, took, res.Errs[0], n-failed, failed)
						}
					} else {
						var fe *hedge.FanError
						if !errors.As(err, &fe) || !errors.Is(err, boom) || fe.Answered != 0 || took != time.Millisecond {
							t.Errorf("%v after %v: want a *FanError at 1ms, when %d of %d leaves had failed", err, took, failed, n)
						}
					}
					linger()
				})
			})
		}
	}
}
