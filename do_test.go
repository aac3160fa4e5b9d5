package hedge_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// behaviour scripts one copy of a request: how long it takes, and what it
// returns. A copy honours its context unless deaf is set.
type behaviour struct {
	after time.Duration
	val   int
	err   error
	panic any
	deaf  bool // ignores cancellation and runs to the end
}

// script runs scripted copies and records what happened to each, with
// times measured on the synctest clock from the script's creation.
type script struct {
	t0    time.Time
	by    []behaviour // by copy index
	mu    sync.Mutex
	log   []event
	calls atomic.Int32
}

type event struct {
	copy      int
	replica   int
	key       string
	start     time.Duration
	end       time.Duration
	cancelled bool
}

func newScript(by ...behaviour) *script { return &script{t0: time.Now(), by: by} }

func (s *script) attempt(ctx context.Context, a hedge.Attempt) (int, error) {
	s.calls.Add(1)
	b := s.by[a.Index]
	ev := event{copy: a.Index, replica: a.Replica, key: a.Key, start: time.Since(s.t0)}
	defer func() {
		ev.end = time.Since(s.t0)
		s.mu.Lock()
		s.log = append(s.log, ev)
		s.mu.Unlock()
	}()
	if b.deaf {
		time.Sleep(b.after)
	} else {
		select {
		case <-time.After(b.after):
		case <-ctx.Done():
			ev.cancelled = true
			return 0, ctx.Err()
		}
	}
	if b.panic != nil {
		panic(b.panic)
	}
	return b.val, b.err
}

func (s *script) events() map[int]event {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[int]event{}
	for _, e := range s.log {
		m[e.copy] = e
	}
	return m
}

// settle lets a Hedger's timer goroutine, which lingers briefly after its
// last timer, exit before a synctest bubble ends (fake time: instant).
func settle() { time.Sleep(time.Second) }

func mustNew(t *testing.T, cfg hedge.Config) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const ms = time.Millisecond

var errBoom = errors.New("boom")

// TestDoRules checks the semantics of one call, on synctest's fake clock:
// the times below are exact.
func TestDoRules(t *testing.T) {
	type want struct {
		val      int
		err      error // checked with errors.Is
		elapsed  time.Duration
		started  []time.Duration // start of each copy that ran
		winner   int             // -1 for an error
		hedges   int64
		canceled []int // copies that saw their context cancelled
	}
	cases := []struct {
		name   string
		cfg    hedge.Config
		ctx    func(context.Context) (context.Context, context.CancelFunc)
		copies []behaviour
		want   want
	}{
		{
			name:   "fast primary sends nothing else",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 5 * ms, val: 1}},
			want:   want{val: 1, elapsed: 5 * ms, started: []time.Duration{0}, winner: 0},
		},
		{
			name:   "slow primary is hedged after the delay, hedge wins, primary is cancelled and reaped",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 100 * ms, val: 1}, {after: 5 * ms, val: 2}},
			want:   want{val: 2, elapsed: 15 * ms, started: []time.Duration{0, 10 * ms}, winner: 1, hedges: 1, canceled: []int{0}},
		},
		{
			name:   "primary wins a race against a slower hedge",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 20 * ms, val: 1}, {after: 50 * ms, val: 2}},
			want:   want{val: 1, elapsed: 20 * ms, started: []time.Duration{0, 10 * ms}, winner: 0, hedges: 1, canceled: []int{1}},
		},
		{
			name:   "a retryable failure fires the next copy at once",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 2 * ms, err: errBoom}, {after: 5 * ms, val: 2}},
			want:   want{val: 2, elapsed: 7 * ms, started: []time.Duration{0, 2 * ms}, winner: 1, hedges: 1},
		},
		{
			name:   "a permanent failure ends the call",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 2 * ms, err: hedge.Permanent(errBoom)}},
			want:   want{err: errBoom, elapsed: 2 * ms, started: []time.Duration{0}, winner: -1},
		},
		{
			name:   "a user classifier decides what is retryable",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), Retryable: func(err error) bool { return !errors.Is(err, errBoom) }},
			copies: []behaviour{{after: 2 * ms, err: errBoom}},
			want:   want{err: errBoom, elapsed: 2 * ms, started: []time.Duration{0}, winner: -1},
		},
		{
			name:   "a non-retryable failure of the hedge ends the call and cancels the primary",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms)},
			copies: []behaviour{{after: 100 * ms, val: 1}, {after: 1 * ms, err: hedge.Permanent(errBoom)}},
			want:   want{err: errBoom, elapsed: 11 * ms, started: []time.Duration{0, 10 * ms}, winner: -1, hedges: 1, canceled: []int{0}},
		},
		{
			name:   "every copy failing returns an error wrapping each",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3},
			copies: []behaviour{{after: 1 * ms, err: errBoom}, {after: 1 * ms, err: context.DeadlineExceeded}, {after: 1 * ms, err: errBoom}},
			want:   want{err: context.DeadlineExceeded, elapsed: 3 * ms, started: []time.Duration{0, 1 * ms, 2 * ms}, winner: -1, hedges: 2},
		},
		{
			name:   "the third copy waits another delay",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3},
			copies: []behaviour{{after: 100 * ms}, {after: 100 * ms}, {after: 3 * ms, val: 3}},
			want:   want{val: 3, elapsed: 23 * ms, started: []time.Duration{0, 10 * ms, 20 * ms}, winner: 2, hedges: 2, canceled: []int{0, 1}},
		},
		{
			name: "the caller's cancellation is final",
			cfg:  hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(15*ms, cancel)
				return ctx, cancel
			},
			copies: []behaviour{{after: 100 * ms}, {after: 100 * ms}, {after: 100 * ms}},
			want:   want{err: context.Canceled, elapsed: 15 * ms, started: []time.Duration{0, 10 * ms}, winner: -1, hedges: 1, canceled: []int{0, 1}},
		},
		{
			name: "no hedge when the time left is shorter than the delay",
			cfg:  hedge.Config{Delay: hedge.Fixed(10 * ms)},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 8*ms)
			},
			copies: []behaviour{{after: 100 * ms}},
			want:   want{err: context.DeadlineExceeded, elapsed: 8 * ms, started: []time.Duration{0}, winner: -1, canceled: []int{0}},
		},
		{
			name: "the second hedge is skipped when it could not finish before the deadline",
			cfg:  hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 25*ms)
			},
			copies: []behaviour{{after: 100 * ms}, {after: 100 * ms}, {after: 1 * ms}},
			want:   want{err: context.DeadlineExceeded, elapsed: 25 * ms, started: []time.Duration{0, 10 * ms}, winner: -1, hedges: 1, canceled: []int{0, 1}},
		},
		{
			name: "a copy after a failure is not held back by a deadline shorter than the delay",
			cfg:  hedge.Config{Delay: hedge.Fixed(time.Hour)},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 50*ms)
			},
			copies: []behaviour{{after: 2 * ms, err: errBoom}, {after: 5 * ms, val: 2}},
			want:   want{val: 2, elapsed: 7 * ms, started: []time.Duration{0, 2 * ms}, winner: 1, hedges: 1},
		},
		{
			name:   "zero delay sends every copy at once",
			cfg:    hedge.Config{Delay: hedge.Fixed(0), MaxAttempts: 3},
			copies: []behaviour{{after: 9 * ms, val: 1}, {after: 8 * ms, val: 2}, {after: 7 * ms, val: 3}},
			want:   want{val: 3, elapsed: 7 * ms, started: []time.Duration{0, 0, 0}, winner: 2, hedges: 2, canceled: []int{0, 1}},
		},
		{
			name:   "mode Off sends one copy",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), Mode: hedge.Off},
			copies: []behaviour{{after: 100 * ms, val: 1}},
			want:   want{val: 1, elapsed: 100 * ms, started: []time.Duration{0}, winner: 0},
		},
		{
			name:   "mode Shadow sends one copy",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), Mode: hedge.Shadow},
			copies: []behaviour{{after: 100 * ms, val: 1}},
			want:   want{val: 1, elapsed: 100 * ms, started: []time.Duration{0}, winner: 0},
		},
		{
			name:   "MaxAttempts 1 sends one copy",
			cfg:    hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 1},
			copies: []behaviour{{after: 2 * ms, err: errBoom}},
			want:   want{err: errBoom, elapsed: 2 * ms, started: []time.Duration{0}, winner: -1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				h := mustNew(t, tc.cfg)
				s := newScript(tc.copies...)
				ctx := context.Background()
				if tc.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = tc.ctx(ctx)
					defer cancel()
				}
				v, err := hedge.Do(ctx, h, "op", s.attempt)
				elapsed := time.Since(s.t0)
				// Do reaps: every copy has returned by now.
				evs := s.events()
				if len(evs) != int(s.calls.Load()) {
					t.Fatalf("%d copies started but %d returned before Do did", s.calls.Load(), len(evs))
				}
				w := tc.want
				if w.err != nil {
					if !errors.Is(err, w.err) {
						t.Fatalf("err = %v, want one wrapping %v", err, w.err)
					}
				} else if err != nil || v != w.val {
					t.Fatalf("Do = %d, %v; want %d, nil", v, err, w.val)
				}
				if elapsed != w.elapsed {
					t.Errorf("returned after %v, want %v", elapsed, w.elapsed)
				}
				if len(evs) != len(w.started) {
					t.Fatalf("%d copies ran, want %d: %+v", len(evs), len(w.started), evs)
				}
				for i, at := range w.started {
					if evs[i].start != at {
						t.Errorf("copy %d started at %v, want %v", i, evs[i].start, at)
					}
				}
				var canceled []int
				for i := range len(evs) {
					if evs[i].cancelled {
						canceled = append(canceled, i)
					}
				}
				if !equalInts(canceled, w.canceled) {
					t.Errorf("cancelled copies %v, want %v", canceled, w.canceled)
				}
				st := h.OpStats("op")
				if st.Requests != 1 || st.Hedges != w.hedges {
					t.Errorf("stats: %d requests, %d hedges; want 1, %d", st.Requests, st.Hedges, w.hedges)
				}
				var pw, hw, fl int64
				switch {
				case w.winner == 0:
					pw = 1
				case w.winner > 0:
					hw = 1
				default:
					fl = 1
				}
				if st.PrimaryWins != pw || st.HedgeWins != hw || st.Failures != fl {
					t.Errorf("stats: primary wins %d, hedge wins %d, failures %d; want %d %d %d",
						st.PrimaryWins, st.HedgeWins, st.Failures, pw, hw, fl)
				}
			})
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDoAllFailedWrapsEach checks the error type of a call whose copies all
// failed.
func TestDoAllFailedWrapsEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		errA, errB := errors.New("a"), errors.New("b")
		s := newScript(behaviour{after: ms, err: errA}, behaviour{after: ms, err: errB})
		_, err := hedge.Do(context.Background(), h, "op", s.attempt)
		var ae *hedge.AttemptsError
		if !errors.As(err, &ae) || len(ae.Errs) != 2 {
			t.Fatalf("err = %v, want an AttemptsError with 2 errors", err)
		}
		if !errors.Is(err, errA) || !errors.Is(err, errB) {
			t.Fatalf("err = %v does not wrap both copies' errors", err)
		}
	})
}

// TestDoPanics checks that a panic in either copy reaches the caller, after
// the other copy was cancelled and reaped.
func TestDoPanics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		copies []behaviour
	}{
		{"in the hedge", []behaviour{{after: 100 * ms}, {after: 1 * ms, panic: "kaboom"}}},
		{"in the primary", []behaviour{{after: 15 * ms, panic: "kaboom"}, {after: 100 * ms}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
				s := newScript(tc.copies...)
				var got any
				func() {
					defer func() { got = recover() }()
					hedge.Do(context.Background(), h, "op", s.attempt)
				}()
				pe, ok := got.(*hedge.PanicError)
				if !ok || pe.Value != "kaboom" || len(pe.Stack) == 0 {
					t.Fatalf("recovered %v, want a *PanicError of kaboom with a stack", got)
				}
				evs := s.events()
				if len(evs) != 2 {
					t.Fatalf("%d copies returned before the panic reached the caller, want 2", len(evs))
				}
				if other := evs[0]; tc.copies[0].panic == nil && !other.cancelled {
					t.Fatal("the primary was not cancelled after the hedge panicked")
				}
				if other := evs[1]; tc.copies[1].panic == nil && !other.cancelled {
					t.Fatal("the hedge was not cancelled after the primary panicked")
				}
			})
		})
	}
}

// TestDoReapInBackground checks that the option returns at once while a
// loser that ignores cancellation goes on, and that it is still reaped.
func TestDoReapInBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), ReapInBackground: true})
		s := newScript(behaviour{after: 100 * ms, deaf: true, val: 1}, behaviour{after: 5 * ms, val: 2})
		v, err := hedge.Do(context.Background(), h, "op", s.attempt)
		if v != 2 || err != nil || time.Since(s.t0) != 15*ms {
			t.Fatalf("Do = %d, %v after %v; want 2, nil after 15ms", v, err, time.Since(s.t0))
		}
		synctest.Wait() // the deaf primary is still sleeping
		if n := len(s.events()); n != 1 {
			t.Fatalf("%d copies returned, want only the hedge", n)
		}
		time.Sleep(100 * ms)
		synctest.Wait()
		if n := len(s.events()); n != 2 {
			t.Fatalf("the primary did not finish in the background")
		}
		if st := h.OpStats("op"); st.WastedWork != 100*ms {
			t.Errorf("wasted work %v, want the primary's 100ms", st.WastedWork)
		}
	})
}

// TestDoReapInBackgroundCallerCancel checks that with the option the
// caller's context ending returns at once even if no copy listens.
func TestDoReapInBackgroundCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), ReapInBackground: true})
		s := newScript(behaviour{after: 100 * ms, deaf: true}, behaviour{after: 100 * ms, deaf: true})
		ctx, cancel := context.WithTimeout(context.Background(), 30*ms)
		defer cancel()
		_, err := hedge.Do(ctx, h, "op", s.attempt)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(s.t0) != 30*ms {
			t.Fatalf("Do = %v after %v; want deadline exceeded after 30ms", err, time.Since(s.t0))
		}
		time.Sleep(100 * ms) // let the deaf copies finish inside the bubble
	})
}

// TestBudgetLimitsHedges runs slow requests one after another: a ratio
// budget of 0.1 with a burst of 1 lets the first hedge through, then one in
// ten.
func TestBudgetLimitsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		b, err := hedge.NewBudget(0.1, 1)
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: b})
		var hedged []int
		for i := range 25 {
			s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
			if v, _ := hedge.Do(context.Background(), h, "op", s.attempt); v == 2 {
				hedged = append(hedged, i)
			}
		}
		if !equalInts(hedged, []int{0, 10, 20}) {
			t.Fatalf("requests hedged %v, want [0 10 20]", hedged)
		}
		st := h.OpStats("op")
		if st.Hedges != 3 || st.Refused[hedge.RefusedBudget] != 22 {
			t.Fatalf("hedges %d, budget denials %d; want 3, 22", st.Hedges, st.Refused[hedge.RefusedBudget])
		}
	})
}

// TestMaxHedgesInFlight runs two slow requests at once with room for one
// hedge in flight.
func TestMaxHedgesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), MaxHedgesInFlight: 1, NoBudget: true})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 20 * ms, val: 2})
				hedge.Do(context.Background(), h, "op", s.attempt)
			})
		}
		wg.Wait()
		st := h.OpStats("op")
		if st.Hedges != 1 || st.Refused[hedge.RefusedInFlight] != 1 {
			t.Fatalf("hedges %d, in-flight denials %d; want 1, 1", st.Hedges, st.Refused[hedge.RefusedInFlight])
		}
		// The slot is released: a later request may hedge again.
		s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
		if v, _ := hedge.Do(context.Background(), h, "op", s.attempt); v != 2 {
			t.Fatal("the in-flight slot was not released")
		}
	})
}

// TestShadowCountsWithoutSending checks that Shadow mode makes the whole
// decision, budget included, and sends nothing.
func TestShadowCountsWithoutSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		b, _ := hedge.NewBudget(0.5, 1)
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Mode: hedge.Shadow, Budget: b})
		for range 4 {
			s := newScript(behaviour{after: 50 * ms, val: 1})
			if v, err := hedge.Do(context.Background(), h, "op", s.attempt); v != 1 || err != nil || s.calls.Load() != 1 {
				t.Fatalf("Do = %d, %v with %d copies; want 1, nil, 1 copy", v, err, s.calls.Load())
			}
		}
		st := h.OpStats("op")
		// Budget 0.5 per request, burst 1: requests 1, 3 would hedge.
		if st.ShadowHedges != 2 || st.Refused[hedge.RefusedBudget] != 2 || st.Hedges != 0 {
			t.Fatalf("shadow hedges %d, denials %d, hedges %d; want 2, 2, 0", st.ShadowHedges, st.Refused[hedge.RefusedBudget], st.Hedges)
		}
		if b.Tokens() != 1 {
			t.Fatalf("shadow decisions spent the real budget: %v tokens left, want 1", b.Tokens())
		}
		// Switch on at run time: the next slow request hedges.
		if err := h.SetMode(hedge.On); err != nil {
			t.Fatal(err)
		}
		s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
		if v, _ := hedge.Do(context.Background(), h, "op", s.attempt); v != 2 {
			t.Fatal("after SetMode(On) the slow request was not hedged")
		}
	})
}

// TestRollout checks that a rollout fraction hedges about that share of
// requests and shadows the rest.
func TestRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Rollout: 0.25})
		const n = 2000
		for range n {
			s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
			hedge.Do(context.Background(), h, "op", s.attempt)
		}
		st := h.OpStats("op")
		if st.Hedges+st.ShadowHedges != n {
			t.Fatalf("hedges %d + shadow %d != %d requests", st.Hedges, st.ShadowHedges, n)
		}
		// Binomial(2000, 0.25): sd 19.4; 6 sd either side.
		if st.Hedges < 500-117 || st.Hedges > 500+117 {
			t.Fatalf("%d of %d requests hedged, want about 25%%", st.Hedges, n)
		}
	})
}

// TestIdempotency checks that a write without a key is sent once and a
// write with a key is hedged, carrying the key on every copy.
func TestIdempotency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		ctx := hedge.NotIdempotent(context.Background())
		s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
		if v, _ := hedge.Do(ctx, h, "write", s.attempt); v != 1 || s.calls.Load() != 1 {
			t.Fatalf("unkeyed write: got %d from %d copies; want 1 from 1", v, s.calls.Load())
		}
		if st := h.OpStats("write"); st.Unhedgeable != 1 {
			t.Fatalf("Unhedgeable = %d, want 1", st.Unhedgeable)
		}
		ctx = hedge.WithIdempotencyKey(ctx, "k-42")
		s = newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
		if v, _ := hedge.Do(ctx, h, "write", s.attempt); v != 2 {
			t.Fatalf("keyed write was not hedged")
		}
		for i, e := range s.events() {
			if e.key != "k-42" {
				t.Fatalf("copy %d saw key %q, want k-42", i, e.key)
			}
		}
	})
}

// TestReplicasDistinct checks that copies of a request go to distinct
// replicas, with three copies over three replicas and over two.
func TestReplicasDistinct(t *testing.T) {
	for _, n := range []int{2, 3} {
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), MaxAttempts: 3, Replicas: n, NoBudget: true, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
			for range 50 {
				s := newScript(behaviour{after: 50 * ms}, behaviour{after: 50 * ms}, behaviour{after: 1 * ms})
				hedge.Do(context.Background(), h, "op", s.attempt)
				seen := map[int]bool{}
				for _, e := range s.events() {
					if e.replica < 0 || e.replica >= n || seen[e.replica] {
						t.Fatalf("copies went to replicas %+v", s.events())
					}
					seen[e.replica] = true
				}
				if len(seen) != n {
					t.Fatalf("%d replicas: %d copies ran, want %d", n, len(seen), n)
				}
			}
			if st := h.OpStats("op"); n == 2 && st.Refused[hedge.RefusedReplicas] != 50 {
				t.Fatalf("RefusedReplicas = %d, want 50", st.Refused[hedge.RefusedReplicas])
			}
		})
	}
}

// TestOpCardinalityBounded checks that operation classes beyond MaxOps share
// one state.
func TestOpCardinalityBounded(t *testing.T) {
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), MaxOps: 3})
	for i := range 10 {
		hedge.Do(context.Background(), h, string(rune('a'+i)), func(context.Context, hedge.Attempt) (int, error) { return 0, nil })
	}
	st := h.Stats()
	if len(st) != 4 {
		t.Fatalf("%d operation classes, want 3 + %s", len(st), hedge.OtherOp)
	}
	if o := h.OpStats(hedge.OtherOp); o.Requests != 7 {
		t.Fatalf("%s has %d requests, want 7", hedge.OtherOp, o.Requests)
	}
}

// TestCountersExactUnderConcurrency runs many concurrent requests and checks
// that the counters add up.
func TestCountersExactUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Replicas: 4, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
		var wg sync.WaitGroup
		const n = 400
		for i := range n {
			wg.Go(func() {
				slow := i%4 == 0
				p := behaviour{after: 5 * ms, val: 1}
				if slow {
					p.after = 50 * ms
				}
				s := newScript(p, behaviour{after: 5 * ms, val: 2})
				hedge.Do(context.Background(), h, "op", s.attempt)
			})
		}
		wg.Wait()
		st := h.OpStats("op")
		if st.Requests != n || st.Hedges != n/4 || st.HedgeWins != n/4 || st.PrimaryWins != 3*n/4 {
			t.Fatalf("stats %+v", st)
		}
		if st.Latency.Count != n || st.HedgePath.Count != n/4 || st.PrimaryCensored != n/4 {
			t.Fatalf("distributions: latency %d, hedge path %d, censored %d", st.Latency.Count, st.HedgePath.Count, st.PrimaryCensored)
		}
		if st.WastedWork != n/4*15*ms {
			t.Fatalf("wasted work %v, want %v", st.WastedWork, n/4*15*ms)
		}
	})
}

// TestPercentileDelayRecordsPrimaries checks the choice documented on
// Percentile: the delay tracks the primaries' own p95 even though hedges
// win often and primaries are often cancelled. Primaries take 1..100 ms
// uniformly (p95 = 95 ms); hedges take 2 ms and win whenever they are sent,
// so every primary slower than the delay is cancelled and only a lower
// bound of its latency is known.
func TestPercentileDelayRecordsPrimaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		st := uniformPrimaries(t, 95, 2*ms, rand.New(rand.NewPCG(1, 2)))
		if st.Delay < 93*ms || st.Delay > 97*ms {
			t.Fatalf("delay %v, want about the primaries' p95 of 95ms", st.Delay)
		}
		if st.PrimaryCensored == 0 || st.HedgeWins == 0 {
			t.Fatalf("the test did not exercise censoring: %+v", st)
		}
		// No hedging during the 100 warm-up requests, then about 5%.
		if r := st.HedgeRate(); r < 0.03 || r > 0.07 {
			t.Fatalf("hedge rate %.3f, want about 0.05", r)
		}
	})
}

// uniformPrimaries runs 3,000 calls whose primaries take 1..100 ms
// uniformly and whose hedges take hedgeTook, through a Hedger with a live p-th
// percentile delay and no budget, and returns the stats.
func uniformPrimaries(t *testing.T, p float64, hedgeTook time.Duration, r *rand.Rand) hedge.Stats {
	t.Helper()
	h := mustNew(t, hedge.Config{
		Delay:    hedge.Percentile{P: p, Window: 1000, MinSamples: 100},
		NoBudget: true,
	})
	for range 3000 {
		primary := time.Duration(1+r.IntN(100)) * ms
		s := newScript(behaviour{after: primary, val: 1}, behaviour{after: hedgeTook, val: 2})
		hedge.Do(context.Background(), h, "op", s.attempt)
	}
	return h.OpStats("op")
}

// TestPercentileWarmup checks that no hedge is sent before MinSamples when
// there is no warm-up delay.
func TestPercentileWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Percentile{MinSamples: 10}})
		for range 10 {
			s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2})
			hedge.Do(context.Background(), h, "op", s.attempt)
		}
		st := h.OpStats("op")
		if st.Hedges != 0 || st.Delay < 50*ms || st.Delay > 50*ms+50*ms/128 {
			t.Fatalf("hedges %d, delay %v; want none during warm-up, then 50ms", st.Hedges, st.Delay)
		}
	})
}

// TestDoHeldKeepsWinnerContext checks DoHeld's contract: the winner's
// context lives until release, and a copy that succeeds after losing is
// handed to discard.
func TestDoHeldKeepsWinnerContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		type res struct {
			ctx  context.Context
			copy int
		}
		var discarded []int
		// The primary is deaf to cancellation and succeeds late; the hedge
		// wins.
		v, release, err := hedge.DoHeld(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (res, error) {
			if a.Index == 0 {
				time.Sleep(30 * ms)
			} else {
				time.Sleep(5 * ms)
			}
			return res{ctx, a.Index}, nil
		}, func(r res) { discarded = append(discarded, r.copy) })
		if err != nil || v.copy != 1 {
			t.Fatalf("DoHeld = copy %d, %v; want copy 1", v.copy, err)
		}
		if v.ctx.Err() != nil {
			t.Fatal("the winner's context was cancelled before release")
		}
		if len(discarded) != 1 || discarded[0] != 0 {
			t.Fatalf("discarded %v, want the late primary [0]", discarded)
		}
		release()
		if v.ctx.Err() == nil {
			t.Fatal("release did not cancel the winner's context")
		}
	})
}

func TestDoHeldSingleCopy(t *testing.T) {
	h := mustNew(t, hedge.Config{Mode: hedge.Off})
	_, release, err := hedge.DoHeld(context.Background(), h, "op", trivial, nil)
	if err != nil || release == nil {
		t.Fatalf("release is nil: %v, err %v", release == nil, err)
	}
	release()
}

// TestThrottleInDo checks gRPC A6 semantics through Do: every failed copy
// debits a token, and a copy may follow a failure only while the bucket
// holds more than half its tokens.
func TestThrottleInDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		b, _ := hedge.NewThrottle(4, 1)
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: b})
		fail := func() *script {
			return newScript(behaviour{after: ms, err: errBoom}, behaviour{after: ms, err: errBoom})
		}
		// 4 tokens: the primary fails (3 > 2: a copy may follow), the copy fails (2).
		s := fail()
		hedge.Do(context.Background(), h, "op", s.attempt)
		if s.calls.Load() != 2 || b.Tokens() != 2 {
			t.Fatalf("first call: %d copies, %v tokens; want 2 copies, 2 tokens", s.calls.Load(), b.Tokens())
		}
		// 2 tokens: the primary fails (1): no copy may follow.
		s = fail()
		hedge.Do(context.Background(), h, "op", s.attempt)
		if s.calls.Load() != 1 || b.Tokens() != 1 {
			t.Fatalf("second call: %d copies, %v tokens; want 1 copy, 1 token", s.calls.Load(), b.Tokens())
		}
		// Successes credit tokenRatio each.
		for range 3 {
			hedge.Do(context.Background(), h, "op", trivial)
		}
		if b.Tokens() != 4 {
			t.Fatalf("after 3 successes: %v tokens, want 4", b.Tokens())
		}
		if st := h.OpStats("op"); st.Refused[hedge.RefusedBudget] != 1 || st.Hedges != 1 {
			t.Fatalf("hedges %d, denials %d; want 1, 1", st.Hedges, st.Refused[hedge.RefusedBudget])
		}
	})
}

// TestPushback checks that a pushback ends the call even when the classifier
// calls everything retryable, and debits a throttle.
func TestPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		b, _ := hedge.NewThrottle(10, 1)
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: b, Retryable: func(error) bool { return true }})
		s := newScript(behaviour{after: 2 * ms, err: hedge.Pushback(errBoom)}, behaviour{after: ms, val: 2})
		_, err := hedge.Do(context.Background(), h, "op", s.attempt)
		if !errors.Is(err, errBoom) || s.calls.Load() != 1 {
			t.Fatalf("err %v after %d copies; want boom after 1", err, s.calls.Load())
		}
		if b.Tokens() != 9 {
			t.Fatalf("%v tokens, want 9: a pushback debits the throttle", b.Tokens())
		}
	})
}

// TestCallsReusedSafely runs many calls at once on one Hedger and checks
// that every call returns its own result, and that no hedge goes before
// its call's delay unless its primary failed. The engine reuses the state
// of calls that hedged nothing, and must never hand one call's state,
// timer or outcome to another: a timer taken to fire just as its call
// ended (primaries here that answer exactly at the delay) would otherwise
// send a hedge for whichever call the state went to next, early.
func TestCallsReusedSafely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = time.Millisecond
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(delay), NoBudget: true, MaxAttempts: 3})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					id := g*1000 + i
					start := time.Now()
					attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
						if a.Index > 0 {
							if id%4 != 1 && time.Since(start) < delay {
								t.Errorf("call %d: hedge %d sent after %v, before the delay", id, a.Index, time.Since(start))
							}
							return id, nil
						}
						switch id % 4 {
						case 0: // hedged
							<-ctx.Done()
							return 0, ctx.Err()
						case 1: // failed over at once
							return 0, errors.New("retryable")
						case 2: // answers as the timer comes due
							time.Sleep(delay)
						}
						return id, nil
					}
					var v int
					var err error
					if i%3 == 2 {
						var release func()
						v, release, err = hedge.DoHeld(context.Background(), h, "op", attempt, nil)
						release()
					} else {
						v, err = hedge.Do(context.Background(), h, "op", attempt)
					}
					if err != nil || v != id {
						t.Errorf("call %d: Do = %d, %v; want %d, nil", id, v, err, id)
						return
					}
				}
			})
		}
		wg.Wait()
		settle()
	})
}

// TestTimerLag checks that Stats.TimerLag counts each hedge timer that came
// due, and none for a call answered before its delay. On synctest's clock a
// timer fires exactly when due, so the lag is zero; a timer the Hedger acts
// on late is measured from when it was due.
func TestTimerLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		fast := newScript(behaviour{after: ms, val: 1})
		if _, err := hedge.Do(context.Background(), h, "op", fast.attempt); err != nil {
			t.Fatal(err)
		}
		if lag := h.OpStats("op").TimerLag; lag.Count != 0 {
			t.Fatalf("after a call answered before its delay: timer lag %v; want none", lag)
		}
		slow := newScript(behaviour{after: 100 * ms, val: 1}, behaviour{after: ms, val: 2})
		if _, err := hedge.Do(context.Background(), h, "op", slow.attempt); err != nil {
			t.Fatal(err)
		}
		if lag := h.OpStats("op").TimerLag; lag.Count != 1 || lag.Max != 0 {
			t.Fatalf("after one hedge: timer lag %v; want one timer, on time", lag)
		}
	})
}
