package hedge_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

func TestPickerNeverPicksHeld(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range []hedge.Picker{{}, {Random: true}, {Zones: []string{"a", "a", "b", "b", "c"}}} {
		for range 2000 {
			n := 1 + r.IntN(5)
			var held []int
			for i := range n {
				if r.IntN(2) == 0 {
					held = append(held, i)
				}
			}
			got := p.Pick(n, held, func(i int) int { return r.IntN(3) }, r)
			if len(held) == n {
				if got != -1 {
					t.Fatalf("all %d held, Pick = %d, want -1", n, got)
				}
				continue
			}
			if got < 0 || got >= n || contains(held, got) {
				t.Fatalf("Pick(%d, held %v) = %d", n, held, got)
			}
		}
	}
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestPickerTwoChoices checks the defining property of two choices: the
// most loaded replica is never chosen while others are eligible, and among
// equal loads the choice is uniform.
func TestPickerTwoChoices(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var p hedge.Picker
	load := []int{0, 0, 0, 9}
	count := make([]int, 4)
	const n = 30000
	for range n {
		count[p.Pick(4, nil, func(i int) int { return load[i] }, r)]++
	}
	if count[3] != 0 {
		t.Fatalf("the loaded replica was chosen %d times", count[3])
	}
	for i := range 3 {
		// Each of three equal replicas: n/3 expected, sd about 82.
		if math.Abs(float64(count[i])-n/3) > 500 {
			t.Fatalf("choices %v are not uniform over the idle replicas", count)
		}
	}
	// With one held, the other two of equal load share the picks.
	count = make([]int, 4)
	for range n {
		count[p.Pick(4, []int{0}, func(i int) int { return load[i] }, r)]++
	}
	if count[0] != 0 || count[3] != 0 || math.Abs(float64(count[1]-count[2])) > 1000 {
		t.Fatalf("with replica 0 held: choices %v", count)
	}
}

// TestPickerZones checks that a copy prefers a zone that holds no copy.
func TestPickerZones(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := hedge.Picker{Zones: []string{"a", "a", "a", "b"}}
	for range 1000 {
		if got := p.Pick(4, []int{0}, func(int) int { return 0 }, r); got != 3 {
			t.Fatalf("held in zone a: Pick = %d, want 3 (zone b)", got)
		}
		// Every zone holds a copy: fall back to any other replica.
		if got := p.Pick(4, []int{0, 3}, func(int) int { return 0 }, r); got != 1 && got != 2 {
			t.Fatalf("every zone held: Pick = %d, want 1 or 2", got)
		}
	}
}

// TestConfigValidation checks that each mistake is refused with a message
// naming the field.
func TestConfigValidation(t *testing.T) {
	bud, _ := hedge.NewBudget(0.1, 10)
	cases := []struct {
		name string
		cfg  hedge.Config
		want string
	}{
		{"negative fixed delay", hedge.Config{Delay: hedge.Fixed(-time.Second)}, "negative"},
		{"percentile 0<", hedge.Config{Delay: hedge.Percentile{P: -1}}, "Percentile.P"},
		{"percentile 100", hedge.Config{Delay: hedge.Percentile{P: 100}}, "Percentile.P"},
		{"percentile NaN", hedge.Config{Delay: hedge.Percentile{P: math.NaN()}}, "Percentile.P"},
		{"median refused", hedge.Config{Delay: hedge.Percentile{P: 40}}, "AllowBelowMedian"},
		{"window", hedge.Config{Delay: hedge.Percentile{Window: -5}}, "Percentile.Window"},
		{"min samples", hedge.Config{Delay: hedge.Percentile{Window: 10, MinSamples: 11}}, "MinSamples"},
		{"warmup", hedge.Config{Delay: hedge.Percentile{Warmup: -1}}, "Warmup"},
		{"floor", hedge.Config{Delay: hedge.Percentile{Floor: -1}}, "Floor"},
		{"ceiling below floor", hedge.Config{Delay: hedge.Percentile{Floor: 2, Ceiling: 1}}, "Ceiling"},
		{"max attempts", hedge.Config{MaxAttempts: 6}, "MaxAttempts"},
		{"max attempts negative", hedge.Config{MaxAttempts: -1}, "MaxAttempts"},
		{"in flight", hedge.Config{MaxHedgesInFlight: -1}, "MaxHedgesInFlight"},
		{"replicas", hedge.Config{Replicas: -1}, "Replicas"},
		{"zones", hedge.Config{Replicas: 3, Picker: hedge.Picker{Zones: []string{"a"}}}, "Zones"},
		{"budget and none", hedge.Config{Budget: bud, NoBudget: true}, "NoBudget"},
		{"mode", hedge.Config{Mode: hedge.Mode(7)}, "Mode"},
		{"rollout", hedge.Config{Rollout: 2}, "Rollout"},
		{"max ops", hedge.Config{MaxOps: -1}, "MaxOps"},
	}
	for _, c := range cases {
		_, err := hedge.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a message mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := hedge.New(hedge.Config{Delay: hedge.Percentile{P: 40, AllowBelowMedian: true}}); err != nil {
		t.Errorf("forced p40 refused: %v", err)
	}
	// Several mistakes are reported together.
	_, err := hedge.New(hedge.Config{MaxAttempts: 9, Replicas: -2})
	if err == nil || !strings.Contains(err.Error(), "MaxAttempts") || !strings.Contains(err.Error(), "Replicas") {
		t.Errorf("err = %v, want both mistakes", err)
	}
}

func TestModes(t *testing.T) {
	for _, m := range []hedge.Mode{hedge.On, hedge.Shadow, hedge.Off} {
		got, err := hedge.ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := hedge.ParseMode("maybe"); err == nil {
		t.Fatal("ParseMode accepted maybe")
	}
	h, _ := hedge.New(hedge.Config{})
	if err := h.SetMode(9); err == nil || h.Mode() != hedge.On {
		t.Fatal("SetMode accepted a bad mode")
	}
	if err := h.SetRollout(-1); err == nil || h.Rollout() != 1 {
		t.Fatal("SetRollout accepted -1")
	}
}

// TestOpStatsBeforeFirstCall checks what a class never used reports.
func TestOpStatsBeforeFirstCall(t *testing.T) {
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(7 * time.Millisecond)})
	if st := h.OpStats("never"); st.Requests != 0 || st.Delay != 7*time.Millisecond {
		t.Fatalf("OpStats = %+v, want no requests and the fixed 7ms delay", st)
	}
	h, _ = hedge.New(hedge.Config{})
	if st := h.OpStats("never"); st.Delay != hedge.Never {
		t.Fatalf("live delay before any sample: %v, want Never", st.Delay)
	}
}

// TestHedgerString: a Hedger describes its decision, then the rollout
// and the mode when they are not 1 and On.
func TestHedgerString(t *testing.T) {
	h, err := hedge.New(hedge.Config{Replicas: 3, Delay: hedge.Fixed(time.Millisecond), Mode: hedge.Shadow, Rollout: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	got := h.String()
	if !strings.HasPrefix(got, "fixed delay 1ms, budget ratio(0.1, burst=10), at most 2 copies") || !strings.HasSuffix(got, ", rollout 0.5, mode shadow") {
		t.Errorf("String() = %q", got)
	}
	if err := h.SetMode(hedge.On); err != nil {
		t.Fatal(err)
	}
	if got := h.String(); strings.Contains(got, "mode") {
		t.Errorf("String() in mode On = %q, want no mode", got)
	}
}
