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

// slow runs one request whose primary takes 50 ms and whose copies take
// 1 ms, and returns the copy that answered (1 for the primary).
func slow(h *hedge.Hedger, op string) int {
	s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 1 * ms, val: 2}, behaviour{after: 1 * ms, val: 3})
	v, _ := hedge.Do(context.Background(), h, op, s.attempt)
	return v
}

// TestSetLiveMode checks that live settings turn a class or the whole
// Hedger to Shadow or Off, that the Hedger's own mode, when more cautious,
// still wins, and that the zero Live returns to the Config.
func TestSetLiveMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		if err := h.SetLive(hedge.Live{Ops: map[string]hedge.Settings{"get": {Mode: hedge.Shadow}}}); err != nil {
			t.Fatal(err)
		}
		if v := slow(h, "get"); v != 1 {
			t.Errorf("get in Shadow: copy %d answered, want the primary", v)
		}
		if v := slow(h, "put"); v != 2 {
			t.Errorf("put, not in Live.Ops: copy %d answered, want the hedge", v)
		}
		if st := h.OpStats("get"); st.ShadowHedges != 1 || st.Hedges != 0 {
			t.Errorf("get: %d shadow hedges, %d hedges; want 1, 0", st.ShadowHedges, st.Hedges)
		}

		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}}); err != nil {
			t.Fatal(err)
		}
		if v := slow(h, "put"); v != 1 {
			t.Errorf("Off: copy %d answered, want the primary", v)
		}
		if h.Mode() != hedge.On {
			t.Errorf("SetLive changed the Hedger's own mode to %v", h.Mode())
		}

		// The Hedger's own kill switch wins over a live On.
		if err := h.SetLive(hedge.Live{}); err != nil {
			t.Fatal(err)
		}
		if err := h.SetMode(hedge.Off); err != nil {
			t.Fatal(err)
		}
		if v := slow(h, "put"); v != 1 {
			t.Errorf("SetMode(Off) under a live On: copy %d answered, want the primary", v)
		}
		if err := h.SetMode(hedge.On); err != nil {
			t.Fatal(err)
		}
		if v := slow(h, "put"); v != 2 {
			t.Errorf("back to the Config: copy %d answered, want the hedge", v)
		}
	})
}

// TestSetLiveMaxAttempts checks that MaxAttempts changes for requests
// that begin after SetLive.
func TestSetLiveMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		// The payoff rule would stop hedges that lost: it is off here.
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: -1})
		third := func() int {
			// The first hedge is as slow as the primary: only a third
			// copy answers quickly.
			s := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 50 * ms, val: 2}, behaviour{after: 1 * ms, val: 3})
			v, _ := hedge.Do(context.Background(), h, "op", s.attempt)
			return v
		}
		if v := third(); v != 1 {
			t.Fatalf("MaxAttempts 2: copy %d answered, want the primary", v)
		}
		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{MaxAttempts: 3}}); err != nil {
			t.Fatal(err)
		}
		if v := third(); v != 3 {
			t.Fatalf("MaxAttempts 3: copy %d answered, want the third", v)
		}
		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{MaxAttempts: 1}}); err != nil {
			t.Fatal(err)
		}
		if v := slow(h, "op"); v != 1 {
			t.Fatalf("MaxAttempts 1: copy %d answered, want the primary", v)
		}
	})
}

// TestSetLiveRate checks the cap on hedges per second: a request every
// 100 ms, each wanting a hedge 10 ms in, under a cap of 2 per second. The
// bucket holds 2 and gains 0.2 per request: hedges go at requests 0 and 1
// (the burst), then at 5, when 0.2 + 4 x 0.2 makes a token again; the
// other seven are refused with RefusedRate, counted and told as events.
func TestSetLiveRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		var mu sync.Mutex
		refused := 0
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, OnEvent: func(e hedge.Event) {
			if e.Kind == hedge.HedgeRefused && e.Refusal == hedge.RefusedRate {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}})
		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{MaxHedgesPerSecond: 2}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var hedged []int
		for i := range 10 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * 100 * ms)))
			if slow(h, "op") == 2 {
				hedged = append(hedged, i)
			}
		}
		if !equalInts(hedged, []int{0, 1, 5}) {
			t.Errorf("requests hedged %v, want [0 1 5]", hedged)
		}
		st := h.OpStats("op")
		mu.Lock()
		defer mu.Unlock()
		if st.Refused[hedge.RefusedRate] != 7 || refused != 7 {
			t.Errorf("rate refusals: %d in Stats, %d events; want 7", st.Refused[hedge.RefusedRate], refused)
		}
	})
}

// TestSetLiveBudget checks a live budget, and that a new bucket starts with
// no more tokens than the one it replaces: a change never allows a burst
// the budget in force would have refused.
func TestSetLiveBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		code, err := hedge.NewBudget(0.1, 1)
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: code})
		if v := slow(h, "op"); v != 2 {
			t.Fatalf("the Config's budget: copy %d answered, want the hedge", v)
		}
		// The Config's bucket is empty now (0.1 of a token). A live budget
		// with a burst of 10 starts with what the bucket held.
		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{BudgetRatio: 0.5, BudgetBurst: 10}}); err != nil {
			t.Fatal(err)
		}
		var hedged []int
		for i := range 6 {
			if slow(h, "op") == 2 {
				hedged = append(hedged, i)
			}
		}
		// 0.1 + 0.5 per request: a token at the second request, then
		// every other one.
		if !equalInts(hedged, []int{1, 3, 5}) {
			t.Errorf("requests hedged %v, want [1 3 5]", hedged)
		}
		if code.Tokens() > 0.11 {
			t.Errorf("the Config's bucket was spent or credited under the live one: %v tokens", code.Tokens())
		}
	})
}

// TestSetLivePercentile checks that a live percentile is read from the
// samples the window already holds, at once, for existing classes and
// new ones, and that the zero Live returns to the Config's percentile.
func TestSetLivePercentile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Percentile{Window: 1000, MinSamples: 100}, NoBudget: true, MaxAttempts: 1})
		for i := range 200 {
			s := newScript(behaviour{after: time.Duration(1+i%100) * ms, val: 1})
			hedge.Do(context.Background(), h, "op", s.attempt)
		}
		near := func(got, want time.Duration) bool { return got > want-want/20 && got < want+want/20 }
		if d := h.OpStats("op").Delay; !near(d, 95*ms) {
			t.Fatalf("Config's p95: delay %v, want about 95ms", d)
		}
		if err := h.SetLive(hedge.Live{Settings: hedge.Settings{Percentile: 60}}); err != nil {
			t.Fatal(err)
		}
		if d := h.OpStats("op").Delay; !near(d, 60*ms) {
			t.Errorf("live p60 with no new sample: delay %v, want about 60ms", d)
		}
		// A class made after SetLive takes the live percentile.
		for i := range 200 {
			s := newScript(behaviour{after: time.Duration(1+i%100) * ms, val: 1})
			hedge.Do(context.Background(), h, "new", s.attempt)
		}
		if d := h.OpStats("new").Delay; !near(d, 60*ms) {
			t.Errorf("a class made under a live p60: delay %v, want about 60ms", d)
		}
		if err := h.SetLive(hedge.Live{}); err != nil {
			t.Fatal(err)
		}
		if d := h.OpStats("op").Delay; !near(d, 95*ms) {
			t.Errorf("back to the Config's p95: delay %v, want about 95ms", d)
		}
	})
}

// TestSetLiveRefuses checks that SetLive refuses what cannot change live
// (ErrNotLive) and mistakes (ErrInvalidConfig), and changes nothing then.
func TestSetLiveRefuses(t *testing.T) {
	fixed := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
	one := mustNew(t, hedge.Config{Replicas: 1, MaxAttempts: 1})
	good := hedge.Live{Settings: hedge.Settings{Mode: hedge.Shadow}}
	for _, tc := range []struct {
		name string
		h    *hedge.Hedger
		l    hedge.Live
		want error
	}{
		{"percentile of a fixed delay", fixed, hedge.Live{Ops: map[string]hedge.Settings{"get": {Percentile: 99}}}, hedge.ErrNotLive},
		{"hedges with one replica", one, hedge.Live{Settings: hedge.Settings{MaxAttempts: 2}}, hedge.ErrNotLive},
		{"too many attempts", fixed, hedge.Live{Settings: hedge.Settings{MaxAttempts: hedge.HardMaxAttempts + 1}}, hedge.ErrInvalidConfig},
		{"percentile out of range", fixed, hedge.Live{Settings: hedge.Settings{Percentile: 100}}, hedge.ErrInvalidConfig},
		{"half a budget", fixed, hedge.Live{Settings: hedge.Settings{BudgetRatio: 0.1}}, hedge.ErrInvalidConfig},
		{"negative rate", fixed, hedge.Live{Settings: hedge.Settings{MaxHedgesPerSecond: -1}}, hedge.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.h.SetLive(good); err != nil {
				t.Fatal(err)
			}
			err := tc.h.SetLive(tc.l)
			if !errors.Is(err, tc.want) {
				t.Fatalf("SetLive = %v, want an error matching %v", err, tc.want)
			}
			if got := tc.h.Live(); got.Mode != hedge.Shadow || got.Ops != nil {
				t.Fatalf("a refused SetLive changed the settings to %+v", got)
			}
		})
	}
}

// TestSetLiveOffStopsInFlight checks that live settings that turn a class
// off stop the hedges of its requests in flight, whose timers have not
// fired yet, and that other changes leave them alone.
func TestSetLiveOffStopsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first *hedge.Live // applied before the request begins, if set
		then  hedge.Live  // applied while it waits for its hedge
		want  int         // the copy that answers
	}{
		{"off from the Config", nil, hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}}, 1},
		{"off from live settings", &hedge.Live{Settings: hedge.Settings{MaxAttempts: 3}}, hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}}, 1},
		{"its class off", &hedge.Live{Ops: map[string]hedge.Settings{"op": {}}}, hedge.Live{Ops: map[string]hedge.Settings{"op": {Mode: hedge.Off}}}, 1},
		{"another class off", nil, hedge.Live{Ops: map[string]hedge.Settings{"scan": {Mode: hedge.Off}}}, 2},
		{"shadow", nil, hedge.Live{Settings: hedge.Settings{Mode: hedge.Shadow}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
				if tc.first != nil {
					if err := h.SetLive(*tc.first); err != nil {
						t.Fatal(err)
					}
				}
				got := make(chan int)
				go func() { got <- slow(h, "op") }()
				time.Sleep(5 * ms) // the request waits for its hedge, due at 10 ms
				if err := h.SetLive(tc.then); err != nil {
					t.Fatal(err)
				}
				if v := <-got; v != tc.want {
					t.Fatalf("copy %d answered, want %d", v, tc.want)
				}
			})
		})
	}
}
