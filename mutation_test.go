package hedge

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPayoffBoundaryWinRate checks the payoff rule where a class's win
// rate is exactly the minimum and its waste above maxWaste: it pays. Worked
// by hand in the rule's fixed point (rateOne = 2^20, averages over 32):
//
//   - MinWinRate 31/32 gives min = 31/32 * 2^20 = 1,015,808;
//   - one losing hedge moves the win rate from 2^20 to
//     2^20 - 2^20/32 = 1,015,808 = min, and the waste from 0 to
//     16*2^20/32 = 524,288 for a loser that ran 16 delays (the cap),
//     above maxWasteFixed = 2*2^20/5 = 419,430;
//   - a second loss takes the rate to 1,015,808 - 1,015,808/32 =
//     984,064 < min and the waste to 524,288 + (16*2^20 - 524,288)/32 =
//     1,032,192: it no longer pays.
//
// The hedge goes through the Policy as an engine's does (Check, Admit,
// Succeeded), and a Shadow request reads the rule without its soft gate.
func TestPayoffBoundaryWinRate(t *testing.T) {
	const delay = 10 * time.Millisecond
	p, err := NewPolicy(Config{Delay: Fixed(delay), NoBudget: true, Replicas: 3, MinWinRate: 31.0 / 32})
	if err != nil {
		t.Fatal(err)
	}
	if p.payoff.min != 1_015_808 {
		t.Fatalf("min = %d, want 1015808", p.payoff.min)
	}
	if maxWasteFixed != 419_430 {
		t.Fatalf("maxWasteFixed = %d, want 419430", maxWasteFixed)
	}
	lose := func() {
		t.Helper()
		var pl Plan
		p.Begin(&pl, 0, Fixed(delay).NewEstimator(), Never, false, nil)
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("check: %v", why)
		}
		if _, why := p.Admit(&pl, 0, EvidenceHead); why != Allowed {
			t.Fatalf("admit: %v (rate %d, waste %d)", why, p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load())
		}
		p.Succeeded(&pl, delay+16*delay, false) // the hedge lost after 16 delays
	}
	shadow := func() Refusal {
		var pl Plan
		p.Begin(&pl, 0, Fixed(delay).NewEstimator(), Never, false, nil)
		pl.Mode = Shadow
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("shadow check: %v", why)
		}
		_, why := p.Admit(&pl, 0, EvidenceHead)
		return why
	}

	lose()
	if r, w := p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load(); r != 1_015_808 || w != 524_288 {
		t.Fatalf("after one loss: rate %d, waste %d; want 1015808, 524288", r, w)
	}
	if got := p.WinRate(EvidenceHead); got != 31.0/32 {
		t.Fatalf("WinRate = %v, want exactly the minimum 31/32", got)
	}
	if !p.payoff.pays(EvidenceHead) {
		t.Fatal("a win rate exactly at the minimum does not pay")
	}
	if why := shadow(); why != Allowed {
		t.Fatalf("shadow hedge at a win rate exactly at the minimum: %v, want allowed", why)
	}

	lose()
	if r, w := p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load(); r != 984_064 || w != 1_032_192 {
		t.Fatalf("after two losses: rate %d, waste %d; want 984064, 1032192", r, w)
	}
	if p.payoff.pays(EvidenceHead) {
		t.Fatal("a win rate below the minimum with costly losers pays")
	}
	if why := shadow(); why != RefusedPayoff {
		t.Fatalf("shadow hedge below the minimum: %v, want payoff", why)
	}
}

// TestPayoffBoundaryWaste checks the other side of the rule: a class whose
// win rate is below the minimum but whose waste is exactly maxWaste pays.
// With MinWinRate 1 (min = 2^20) one loss after 12.8 delays gives a rate
// of 1,015,808 < min and a waste of int(12.8*2^20)/32 = 13,421,772/32 =
// 419,430 = maxWasteFixed. A loser that ran 12.9 delays makes it
// 419,430 + (13,526,630 - 419,430)/32 = 419,430 + 409,600 = 829,030.
func TestPayoffBoundaryWaste(t *testing.T) {
	p := newPayoff(1)
	p.outcome(EvidenceBehind, false, float64(128*time.Millisecond)/float64(10*time.Millisecond))
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 1_015_808 || w != 419_430 {
		t.Fatalf("rate %d, waste %d; want 1015808, 419430", r, w)
	}
	if !p.pays(EvidenceBehind) {
		t.Fatal("a waste exactly at maxWaste does not pay")
	}
	p.outcome(EvidenceBehind, false, 12.9)
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 984_064 || w != 829_030 {
		t.Fatalf("rate %d, waste %d; want 984064, 829030", r, w)
	}
	if p.pays(EvidenceBehind) {
		t.Fatal("a waste above maxWaste and a win rate below the minimum pay")
	}
}

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
