package hedge

import (
	"math"
	"math/rand/v2"
	"testing"
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
