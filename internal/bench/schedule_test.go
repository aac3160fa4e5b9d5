package bench

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStallScheduleDeterministic(t *testing.T) {
	a := StallSchedule(42, 50*time.Millisecond, 0.02, time.Hour)
	b := StallSchedule(42, 50*time.Millisecond, 0.02, time.Hour)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different schedules")
	}
	c := StallSchedule(43, 50*time.Millisecond, 0.02, time.Hour)
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same schedule")
	}
	if len(StallSchedule(42, 50*time.Millisecond, 0, time.Hour)) != 0 {
		t.Fatal("share 0 must give no stalls")
	}
}

// The stalls never overlap, last the given length, stay within the span,
// and the gaps between them are exponential with the mean that makes the
// stalled share come out right: checked against the standard error of the
// mean gap (an exponential's standard deviation equals its mean).
func TestStallScheduleStatistics(t *testing.T) {
	for _, tc := range []struct {
		length time.Duration
		share  float64
	}{
		{50 * time.Millisecond, 0.02},
		{10 * time.Millisecond, 0.1},
		{200 * time.Millisecond, 0.005},
	} {
		span := 20000 * time.Duration(float64(tc.length)/tc.share) // about 20,000 stalls
		s := StallSchedule(7, tc.length, tc.share, span)
		wantGap := float64(tc.length) * (1 - tc.share) / tc.share
		var sum float64
		prevEnd := time.Duration(0)
		for i, st := range s {
			if st.Length != tc.length {
				t.Fatalf("stall %d lasts %v, want %v", i, st.Length, tc.length)
			}
			if st.At < prevEnd {
				t.Fatalf("stall %d starts at %v, before the previous one ended at %v", i, st.At, prevEnd)
			}
			if st.At >= span {
				t.Fatalf("stall %d starts at %v, after the span %v", i, st.At, span)
			}
			sum += float64(st.At - prevEnd)
			prevEnd = st.At + st.Length
		}
		n := float64(len(s))
		mean := sum / n
		se := wantGap / math.Sqrt(n)
		if math.Abs(mean-wantGap) > 4*se {
			t.Errorf("length %v share %v: mean gap %.4g, want %.4g ± 4 x %.2g", tc.length, tc.share, mean, wantGap, se)
		}
		stalled := n * float64(tc.length) / float64(span)
		if math.Abs(stalled-tc.share) > 4*tc.share/math.Sqrt(n)+0.001 {
			t.Errorf("length %v share %v: stalled %.4f of the time", tc.length, tc.share, stalled)
		}
	}
}

func TestArrivals(t *testing.T) {
	a := Arrivals(1, 10000, 10*time.Second, 0)
	if !slices.Equal(a, Arrivals(1, 10000, 10*time.Second, 0)) {
		t.Fatal("same seed, different arrivals")
	}
	if !slices.IsSorted(a) || a[0] < 0 || a[len(a)-1] >= 10*time.Second {
		t.Fatal("arrivals out of order or out of the span")
	}
	// The count of a Poisson process: mean 100,000, sd sqrt(100,000).
	if n := float64(len(a)); math.Abs(n-1e5) > 4*math.Sqrt(1e5) {
		t.Errorf("%v arrivals in 10 s at 10,000/s", n)
	}
	// Gaps: exponential, mean 100 µs.
	mean := float64(a[len(a)-1]) / float64(len(a))
	if se := 100e3 / math.Sqrt(float64(len(a))); math.Abs(mean-100e3) > 4*se {
		t.Errorf("mean gap %.0f ns, want 100,000 ± 4 x %.0f", mean, se)
	}
	if n := len(Arrivals(1, 10000, 10*time.Second, 500)); n != 500 {
		t.Errorf("max 500 gave %d arrivals", n)
	}
}

func TestDeriveSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for _, l := range []string{"arrivals", "stalls"} {
		for r := range 5 {
			for i := range 5 {
				s := DeriveSeed(1, l, r, i)
				if seen[s] {
					t.Fatalf("seed collision at %s %d %d", l, r, i)
				}
				seen[s] = true
				if s != DeriveSeed(1, l, r, i) {
					t.Fatal("DeriveSeed is not deterministic")
				}
			}
		}
	}
}

// TestStallTogether checks that with StallTogether every replica gets the
// same schedule, and without it each its own.
func TestStallTogether(t *testing.T) {
	s := Scenario{Rate: 1000, Duration: 20 * time.Second, StallLength: 50 * time.Millisecond, StallShare: 0.05, Seed: 3}.Defaults()
	apart := makePlan(s, 3, 0)
	if reflect.DeepEqual(apart.stalls[0], apart.stalls[1]) {
		t.Fatal("replicas stall together without StallTogether")
	}
	s.StallTogether = true
	together := makePlan(s, 3, 0)
	if len(together.stalls[0]) == 0 {
		t.Fatal("no stalls")
	}
	for i := 1; i < 3; i++ {
		if !reflect.DeepEqual(together.stalls[i], together.stalls[0]) {
			t.Fatalf("replica %d's stalls differ from replica 0's with StallTogether", i)
		}
	}
}

// TestStallOne checks that with StallOne replica 0 alone has stalls, its
// schedule the one it has without StallOne.
func TestStallOne(t *testing.T) {
	s := Scenario{Rate: 1000, StallShare: 0.05, Duration: 20 * time.Second, Seed: 3}.Defaults()
	all := makePlan(s, 4, 0)
	s.StallOne = true
	one := makePlan(s, 4, 0)
	if len(one.stalls[0]) == 0 || !slices.Equal(one.stalls[0], all.stalls[0]) {
		t.Fatalf("replica 0: %d stalls with StallOne, %d without; want the same, not none", len(one.stalls[0]), len(all.stalls[0]))
	}
	for i := 1; i < 4; i++ {
		if len(one.stalls[i]) != 0 {
			t.Errorf("replica %d has %d stalls with StallOne, want none", i, len(one.stalls[i]))
		}
	}
	s.StallTogether = true
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("StallOne with StallTogether: Validate = %v, want a mistake", err)
	}
}
