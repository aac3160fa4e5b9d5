package sim

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tailcut/hedge/quantile"
)

// BenchmarkRunNoiseHedgeFixed measures the engine on the headline case of
// the brief: noise world, two-choice routing, hedge after a fixed delay,
// load 0.9, exact percentile bookkeeping included. One b.N iteration is one
// simulated request; the metric requests/s is what BENCHMARKS.md quotes.
func BenchmarkRunNoiseHedgeFixed(b *testing.B) {
	benchRun(b, func(c *Config) {
		c.Strategy = HedgeFixed
		c.Delay = 4.3 // about the unhedged p95 at this load
	})
}

// BenchmarkRunYardstick is the case of the yardstick that
// scripts/sim-yardstick compares the engine with: noise world, two-choice
// routing, load 0.9, hedge after a fixed delay of one mean service time
// (three in four requests send a second copy).
func BenchmarkRunYardstick(b *testing.B) {
	benchRun(b, func(c *Config) {
		c.Strategy = HedgeFixed
		c.Delay = 1
	})
}

// BenchmarkRunNoiseNone is the same without hedging.
func BenchmarkRunNoiseNone(b *testing.B) { benchRun(b, func(c *Config) {}) }

// BenchmarkRunStallsLive is the stalls world with the live p95 delay.
func BenchmarkRunStallsLive(b *testing.B) {
	benchRun(b, func(c *Config) {
		c.World = Stalls
		c.Strategy = HedgeP95Live
	})
}

// BenchmarkRunBigJobsTied is the big-jobs world with tied requests.
func BenchmarkRunBigJobsTied(b *testing.B) {
	benchRun(b, func(c *Config) {
		c.World = BigJobs
		c.Strategy = Tied
	})
}

func benchRun(b *testing.B, set func(*Config)) {
	c := DefaultConfig()
	c.Load = 0.9
	set(&c)
	const perRun = 1_000_000
	var s Simulator
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		n := min(perRun, b.N-done)
		c.Requests = max(n, 2)
		c.Warmup = c.Requests / 10
		c.Seed = uint64(done + 1)
		if _, err := s.Run(c); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkStudyQuick runs the quick study (hedge study --quick) on
// GOMAXPROCS workers, writing nothing: one iteration is the whole grid,
// about a minute: the study's cost in one number, and a CPU profile of
// the whole grid (BENCHMARKS.md, "The study's time").
func BenchmarkStudyQuick(b *testing.B) {
	for b.Loop() {
		if _, err := RunStudy(context.Background(), StudyOptions{Quick: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPicker measures hedge.Picker.Pick as the engine calls it: ten
// servers, the queue lengths as the load, for a primary (nothing held) and
// for a hedge (one server held).
func BenchmarkPicker(b *testing.B) {
	var e engine
	e.init(DefaultConfig())
	for i := range e.qs {
		e.qs[i].busy = i % 4
	}
	for _, held := range [][]int{nil, {3}} {
		name := "primary"
		if held != nil {
			name = "hedge"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for b.Loop() {
				s += e.picker.Pick(10, held, e.load, e.rM.Uint64())
			}
			_ = s
		})
	}
}

// TestQuantilesBracketed checks quantiles on inputs large enough to be
// bracketed (see bracketSelect) against a sort: with many ties, and with
// a sample that misrepresents the values, so that a bracket misses and
// the quantile is selected in all of them.
func TestQuantilesBracketed(t *testing.T) {
	r := seedRNG(5, 5)
	const n = 100_000
	ties := make([]float64, n)
	for i := range ties {
		ties[i] = math.Floor(r.ExpFloat64() * 20)
	}
	// The sample takes every 16th value (n/16 of them): all ones here,
	// while most values are zeros.
	skewed := make([]float64, n)
	for i := range skewed {
		if i%16 == 0 {
			skewed[i] = 1
		}
	}
	qs := []float64{0.5, 0.9, 0.95, 0.99, 0.999}
	for name, xs := range map[string][]float64{"ties": ties, "skewed": skewed} {
		sorted := slices.Clone(xs)
		slices.Sort(sorted)
		got := quantiles(xs, qs)
		for i, q := range qs {
			if want := sorted[quantile.Rank(q, n)-1]; got[i] != want {
				t.Errorf("%s: q=%v: got %v, want %v", name, q, got[i], want)
			}
		}
	}
}
