package hedge

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tailcut/hedge/quantile"
)

// TestRecentForgetsABurst: a burst of slow latencies followed by fast ones
// leaves the recent window's quantiles fast once the burst is more than
// a window old, while it stays in them until then. Times are given: no
// clock is read.
func TestRecentForgetsABurst(t *testing.T) {
	const ms = time.Millisecond
	var r recentHist
	for i := range 1000 { // a burst of slowness over the first 10 s
		r.record(time.Duration(i)*10*ms, int64(800*ms))
	}
	for _, tc := range []struct {
		at   time.Duration
		n    int64
		p99  time.Duration
		what string
	}{
		{10 * time.Second, 1000, 800 * ms, "during the burst's span"},
		{59 * time.Second, 1000, 800 * ms, "in the span after the burst's"},
		{60 * time.Second, 0, 0, "two spans after the burst's"},
	} {
		d := r.distribution(tc.at)
		if d.Count != tc.n || !near(d.P99, tc.p99) {
			t.Errorf("at %v (%s): n=%d p99=%v; want n=%d p99=%v", tc.at, tc.what, d.Count, d.P99, tc.n, tc.p99)
		}
	}
	// Fast answers from 40 s on: in the window at 65 s with the burst's
	// span gone, so every quantile is fast.
	for i := range 2500 {
		r.record(40*time.Second+time.Duration(i)*10*ms, int64(2*ms))
	}
	d := r.distribution(65 * time.Second)
	if d.Count == 0 || !near(d.P99, 2*ms) || !near(d.Max, 2*ms) {
		t.Errorf("at 65 s, after fast answers: %v; want every quantile near 2ms", d)
	}
	// At 50 s, the span of 30 to 60 s and the one before it, whose burst
	// had ended at 10 s: no slow value is left in either.
	var late recentHist
	late.record(5*time.Second, int64(800*ms))
	late.record(35*time.Second, int64(2*ms))
	if d := late.distribution(50 * time.Second); d.Count != 2 || !near(d.Max, 800*ms) {
		t.Errorf("two spans: %v; want both values", d)
	}
	if d := late.distribution(60 * time.Second); d.Count != 1 || !near(d.Max, 2*ms) {
		t.Errorf("one span later: %v; want the fast value alone", d)
	}
}

// TestRecentQuantiles: the quantiles over two spans are within
// quantile.RelativeError of the exact nearest-rank ones of the values
// recorded in them, and the count and sum are exact.
func TestRecentQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r recentHist
	var vals []int64
	for i := range 3000 {
		v := int64(rng.ExpFloat64() * 5e6)
		at := time.Duration(i) * 15 * time.Millisecond // 0 to 45 s: two spans
		r.record(at, v)
		vals = append(vals, v)
	}
	slices.Sort(vals)
	d := r.distribution(45 * time.Second)
	var sum int64
	for _, v := range vals {
		sum += v
	}
	if d.Count != int64(len(vals)) || int64(d.Sum) != sum {
		t.Fatalf("n=%d sum=%v; want %d, %v", d.Count, d.Sum, len(vals), time.Duration(sum))
	}
	for _, q := range []struct {
		q   float64
		got time.Duration
	}{{0.5, d.P50}, {0.9, d.P90}, {0.99, d.P99}, {0.999, d.P999}, {1, d.Max}} {
		exact := vals[quantile.Rank(q.q, len(vals))-1]
		if diff := float64(int64(q.got) - exact); diff > quantile.RelativeError*float64(exact)+1 || -diff > quantile.RelativeError*float64(exact)+1 {
			t.Errorf("q%v = %v, exact %v: beyond the relative error", q.q, q.got, time.Duration(exact))
		}
	}
}

// near reports whether got is within quantile.RelativeError of want.
func near(got, want time.Duration) bool {
	d := float64(got - want)
	return d <= quantile.RelativeError*float64(want)+1 && -d <= quantile.RelativeError*float64(want)+1
}
