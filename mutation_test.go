package hedge

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pickFreq checks the frequencies of n picks of p against two choices'
// exact probabilities: with m eligible replicas of distinct loads, the
// pair is uniform among the m(m-1)/2 pairs and its less loaded member
// wins, so the replica with k eligible replicas more loaded than itself is
// picked with probability k / (m(m-1)/2), and the most loaded never. Each
// count must lie within 5 binomial sigmas of its expectation, and a
// replica with probability 0 (held, in a held zone, the most loaded) must
// never be picked.
func pickFreq(t *testing.T, p Picker, load []int, held []int, eligible []int, draws int, seed uint64) {
	t.Helper()
	n := len(load)
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	count := make([]int, n)
	f := func(i int) int { return load[i] }
	for range draws {
		i := p.Pick(n, held, f, r)
		if i < 0 || i >= n {
			t.Fatalf("pick %d of %d replicas", i, n)
		}
		count[i]++
	}
	m := len(eligible)
	pairs := float64(m * (m - 1) / 2)
	want := make([]float64, n)
	for _, i := range eligible {
		more := 0
		for _, j := range eligible {
			if load[j] > load[i] {
				more++
			}
		}
		want[i] = float64(more) / pairs
	}
	for i := range n {
		if want[i] == 0 {
			if count[i] != 0 {
				t.Errorf("replica %d (load %d) picked %d times of %d, want never (held %v, eligible %v)", i, load[i], count[i], draws, held, eligible)
			}
			continue
		}
		mean := float64(draws) * want[i]
		sigma := math.Sqrt(mean * (1 - want[i]))
		if d := math.Abs(float64(count[i]) - mean); d > 5*sigma {
			t.Errorf("replica %d (load %d) picked %d times of %d, want %.0f ± %.0f (p = %.4f; held %v, eligible %v)",
				i, load[i], count[i], draws, mean, 5*sigma, want[i], held, eligible)
		}
	}
	if t.Failed() {
		t.Logf("counts %v, loads %v", count, load)
	}
}

// TestPickerTwoChoicesHeldFrequencies checks two choices on the general
// path (two or more replicas held, as for the third copy of a request):
// each eligible replica is picked as often as its rank in load says, the
// most loaded never. The held replicas are the least loaded, so that a
// pick that ignored them would show.
func TestPickerTwoChoicesHeldFrequencies(t *testing.T) {
	const draws = 30_000
	for _, tc := range []struct {
		load, held, eligible []int
	}{
		// 3 eligible: 2/3, 1/3, 0.
		{[]int{30, 0, 10, 1, 20}, []int{1, 3}, []int{0, 2, 4}},
		// 5 eligible: 4/10, 3/10, 2/10, 1/10, 0.
		{[]int{7, 40, 0, 10, 30, 1, 20}, []int{5, 2}, []int{0, 1, 3, 4, 6}},
		// 3 held, 3 eligible.
		{[]int{2, 50, 0, 5, 1, 9}, []int{0, 2, 4}, []int{1, 3, 5}},
	} {
		pickFreq(t, Picker{}, tc.load, tc.held, tc.eligible, draws, uint64(len(tc.load)))
	}
}

// TestPickerTwoChoicesZoneFrequencies checks two choices among the
// replicas of the zones that hold no copy yet: frequencies by rank in
// load, the most loaded never, and nothing from a held zone (whose other
// replicas are the least loaded of all).
func TestPickerTwoChoicesZoneFrequencies(t *testing.T) {
	const draws = 30_000
	for _, tc := range []struct {
		zones                []string
		load, held, eligible []int
	}{
		// Zone a held: 4 eligible, 3/6, 2/6, 1/6, 0.
		{[]string{"a", "a", "b", "b", "c", "c"}, []int{5, 0, 30, 10, 40, 20}, []int{0}, []int{2, 3, 4, 5}},
		// Zones a and b held: 3 eligible in c, 2/3, 1/3, 0.
		{[]string{"a", "b", "a", "c", "b", "c", "c"}, []int{9, 8, 0, 20, 1, 10, 30}, []int{0, 1}, []int{3, 5, 6}},
		// Zones b and c held: a's two, the less loaded always.
		{[]string{"b", "a", "c", "a", "b"}, []int{3, 20, 0, 10, 1}, []int{2, 4}, []int{1, 3}},
	} {
		pickFreq(t, Picker{Zones: tc.zones}, tc.load, tc.held, tc.eligible, draws, uint64(len(tc.load))+100)
	}
}

// refusals records a Hedger's hedges sent and refused, by reason, from
// Config.OnEvent.
type refusals struct {
	mu     sync.Mutex
	sent   int
	reason map[Refusal]int
}

func (r *refusals) event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case HedgeSent:
		r.sent++
	case HedgeRefused:
		if r.reason == nil {
			r.reason = map[Refusal]int{}
		}
		r.reason[e.Refusal]++
	}
}

// take returns what was recorded since the last take, and forgets it.
func (r *refusals) take() (sent int, reason map[Refusal]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent, reason = r.sent, r.reason
	r.sent, r.reason = 0, nil
	return sent, reason
}

// after returns an attempt function whose primary answers after d and
// whose other copies after c, or when cancelled.
func after(d, c time.Duration) func(ctx context.Context, a Attempt) (int, error) {
	return func(ctx context.Context, a Attempt) (int, error) {
		took := d
		if a.Index > 0 {
			took = c
		}
		t := time.NewTimer(took)
		defer t.Stop()
		select {
		case <-t.C:
			return a.Index, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// A hedge the budget refuses gives back what the rules before the
// budget took for it: its MaxHedgesInFlight slot, its fan-out's token
// and slot, and the payoff rule's probe token. Each check below spends
// the budget, has hedges refused by it, then refills it and asks for one
// more hedge, which must go: a slot or token kept by a refused hedge
// would refuse it (or, for the in-flight slots, every hedge after
// MaxHedgesInFlight refusals, for the Hedger's whole life).
func TestBudgetRefusalGivesBack(t *testing.T) {
	const delay = 10 * time.Millisecond
	t.Run("in-flight slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, _ := NewBudget(0.001, 1)
			var log refusals
			h, err := New(Config{Delay: Fixed(delay), Budget: b, MaxHedgesInFlight: 2, PayoffWinRate: -1, OnEvent: log.event})
			if err != nil {
				t.Fatal(err)
			}
			b.dec().TryHedge() // the one token: the budget is spent
			for range 5 {
				Do(context.Background(), h, "read", after(2*delay, time.Hour))
			}
			if sent, why := log.take(); sent != 0 || why[RefusedBudget] != 5 || len(why) != 1 {
				t.Fatalf("%d hedges sent, refused %v: want 5 refused by the budget, nothing else", sent, why)
			}
			b.dec().Refund()
			if v, err := Do(context.Background(), h, "read", after(2*delay, time.Millisecond)); err != nil || v != 1 {
				t.Errorf("Do = %d, %v; want the hedge's 1", v, err)
			}
			if sent, why := log.take(); sent != 1 || len(why) != 0 {
				t.Errorf("with a token back: %d hedges sent, refused %v; want the hedge sent: the refused hedges kept their in-flight slots", sent, why)
			}
			time.Sleep(time.Second) // the Hedger's timer goroutine ends
		})
	})
	t.Run("fan-out token and slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, _ := NewBudget(0.001, 1)
			var log refusals
			h, err := New(Config{Delay: Fixed(delay), Budget: b, PayoffWinRate: -1, OnEvent: log.event})
			if err != nil {
				t.Fatal(err)
			}
			b.dec().TryHedge()
			// The canary's hedge is refused by the budget at 10 ms; the
			// canary refills the budget as it answers at 20 ms, and leaf
			// 1's hedge asks for the fan-out's one token and slot at 30 ms.
			res, err := DoFan(context.Background(), h, "read", 2, FanOut{Canaries: 1, Hedges: 1, InFlight: 1, Straggle: -1}, func(ctx context.Context, i int, a Attempt) (int, error) {
				v, err := after(2*delay, time.Millisecond)(ctx, a)
				if i == 0 && err == nil {
					if sent, why := log.take(); sent != 0 || why[RefusedBudget] != 1 || len(why) != 1 {
						t.Errorf("the canary: %d hedges sent, refused %v; want its hedge refused by the budget", sent, why)
					}
					b.dec().Refund()
				}
				return v, err
			})
			if err != nil || res.Values[1] != 1 {
				t.Fatalf("DoFan = %v, %v; want leaf 1 answered by its hedge", res.Values, err)
			}
			if sent, why := log.take(); sent != 1 || len(why) != 0 {
				t.Errorf("leaf 1: %d hedges sent, refused %v; want its hedge sent: the canary's refused hedge kept the fan-out's token or slot", sent, why)
			}
			if st := h.OpStats("read"); st.Fan.Extra != 1 {
				t.Errorf("Stats.Fan.Extra = %d; want the one hedge sent", st.Fan.Extra)
			}
			time.Sleep(time.Second)
		})
	})
	t.Run("payoff probe token", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, _ := NewBudget(0.001, 1)
			var log refusals
			h, err := New(Config{Delay: Fixed(delay), Budget: b, OnEvent: log.event})
			if err != nil {
				t.Fatal(err)
			}
			// A hedge that loses and runs 19 delays for nothing: hedges
			// of this class no longer pay, and go only on probe tokens.
			Do(context.Background(), h, "read", after(20*delay, time.Hour))
			Do(context.Background(), h, "read", after(2*delay, time.Millisecond))
			if sent, why := log.take(); sent != 1 || why[RefusedPayoff] != 1 || len(why) != 1 {
				t.Fatalf("%d hedges sent, refused %v: want the losing hedge sent, then one refused by the payoff rule", sent, why)
			}
			// Requests earn the class a probe token (one in 5,000), and
			// refill the budget.
			for range 5000 {
				Do(context.Background(), h, "read", func(context.Context, Attempt) (int, error) { return 0, nil })
			}
			b.dec().TryHedge()
			Do(context.Background(), h, "read", after(2*delay, time.Hour))
			if sent, why := log.take(); sent != 0 || why[RefusedBudget] != 1 || len(why) != 1 {
				t.Fatalf("with the budget spent: %d hedges sent, refused %v; want one refused by the budget", sent, why)
			}
			b.dec().Refund()
			Do(context.Background(), h, "read", after(2*delay, time.Millisecond))
			if sent, why := log.take(); sent != 1 || len(why) != 0 {
				t.Errorf("with a token back: %d hedges sent, refused %v; want the probe sent: the hedge the budget refused kept the probe token", sent, why)
			}
			time.Sleep(time.Second)
		})
	})
}
