package hedge_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

func trivial(context.Context, hedge.Attempt) (int, error) { return 1, nil }

// TestFastPathAllocations pins the fast path's allocation count: a call whose
// primary answers before the delay, with the hedge timer armed.
func TestFastPathAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocations")
	}
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ctx := range []context.Context{context.Background(), parent} {
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := hedge.Do(ctx, h, "op", trivial); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 3 {
			t.Errorf("fast path: %.1f allocations per call, want at most 3 (the documented cost)", allocs)
		}
	}
}

// BenchmarkDoNoHedge measures a call whose hedge timer is armed but never
// fires, against calling the function directly.
func BenchmarkDoNoHedge(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			trivial(ctx, hedge.Attempt{})
		}
	})
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
	b.Run("background", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(context.Background(), h, "op", trivial)
		}
	})
	b.Run("cancellable-parent", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(ctx, h, "op", trivial)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				hedge.Do(context.Background(), h, "op", trivial)
			}
		})
	})
	hr, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 3})
	b.Run("replicas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(context.Background(), hr, "op", trivial)
		}
	})
	off, _ := hedge.New(hedge.Config{Mode: hedge.Off})
	b.Run("mode-off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(context.Background(), off, "op", trivial)
		}
	})
}

// BenchmarkDoOneHedge measures a call whose primary waits for cancellation
// and whose hedge, sent after 50µs, answers at once.
func BenchmarkDoOneHedge(b *testing.B) {
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(50 * time.Microsecond), NoBudget: true})
	attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
		if a.Index == 0 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 2, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := hedge.Do(context.Background(), h, "op", attempt); v != 2 {
			b.Fatal("the hedge did not win")
		}
	}
}

// BenchmarkPercentileObserve measures recording one latency in a live p95
// delay, and reading the delay.
func BenchmarkPercentileObserve(b *testing.B) {
	e := hedge.Percentile{}.NewPercentileEstimator()
	r := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, 4096)
	for i := range lat {
		lat[i] = time.Duration(math.Exp(math.Log(1e6) + r.NormFloat64()))
	}
	b.Run("observe", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.Observe(0, lat[i&4095])
		}
	})
	b.Run("delay", func(b *testing.B) {
		b.ReportAllocs()
		var s time.Duration
		for b.Loop() {
			s += e.Delay(0)
		}
		_ = s
	})
}

// BenchmarkBudget measures one request credit plus one hedge attempt.
func BenchmarkBudget(b *testing.B) {
	bud, _ := hedge.NewBudget(0.05, 10)
	b.ReportAllocs()
	for b.Loop() {
		bud.OnRequest()
		bud.TryHedge()
	}
}
