package hedge_test

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

func trivial(context.Context, hedge.Attempt) (int, error) { return 1, nil }

// TestFastPathAllocations pins the fast path's allocation count: a call whose
// primary answers before the delay, with the hedge timer armed. The
// primary's context, unwatched, is the only allocation (the call itself
// is used again); DoHeld adds its release function.
func TestFastPathAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocations")
	}
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		do, held float64
	}{
		{"background", context.Background(), 1, 2},
		{"cancellable parent", parent, 1, 2},
	} {
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := hedge.Do(tc.ctx, h, "op", trivial); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tc.do {
			t.Errorf("%s: Do: %.1f allocations per call, want at most %v (the documented cost)", tc.name, allocs, tc.do)
		}
		allocs = testing.AllocsPerRun(1000, func() {
			_, release, err := hedge.DoHeld(tc.ctx, h, "op", trivial, nil)
			if err != nil {
				t.Fatal(err)
			}
			release()
		})
		if allocs > tc.held {
			t.Errorf("%s: DoHeld: %.1f allocations per call, want at most %v", tc.name, allocs, tc.held)
		}
	}
	// An attempt that asks for Done makes the context.WithCancel its
	// context stands for: four allocations more (the holder, the
	// cancelCtx, its cancel function and its channel), as Do documents.
	watching := func(ctx context.Context, _ hedge.Attempt) (int, error) {
		_ = ctx.Done()
		return 1, nil
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := hedge.Do(context.Background(), h, "op", watching); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Errorf("Do with an attempt that asks for Done: %.1f allocations per call, want at most 5 (the documented cost)", allocs)
	}
}

// TestFastPathStartsNoGoroutine checks that calls whose hedge does not
// come due start no goroutine, not even the first call of a Hedger: the
// timer queue's goroutine starts only when a timer is due. It counts the
// goroutines the process created; one started elsewhere meanwhile (by the
// runtime, say) would spoil a count, so a spoilt count is taken again,
// twice at most.
func TestFastPathStartsNoGoroutine(t *testing.T) {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	created := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var extra uint64
	for range 3 {
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
		before := created()
		for range 100 {
			if _, err := hedge.Do(context.Background(), h, "op", trivial); err != nil {
				t.Fatal(err)
			}
		}
		if extra = created() - before; extra == 0 {
			return
		}
	}
	t.Fatalf("100 calls of a fresh Hedger, none hedged, created %d goroutines; want none", extra)
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
	// An attempt that asks for its context's Done channel, as a network
	// transport's does: the context it stands for is made.
	watching := func(ctx context.Context, _ hedge.Attempt) (int, error) {
		_ = ctx.Done()
		return 1, nil
	}
	b.Run("watched", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(context.Background(), h, "op", watching)
		}
	})
	hr, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 3})
	b.Run("replicas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(context.Background(), hr, "op", trivial)
		}
	})
	hs, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 60, Shards: hedge.ShardGrid(30, 2)})
	b.Run("shard", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.DoShard(context.Background(), hs, "op", 7, trivial)
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
	e := hedge.NewEstimator(hedge.Percentile{})
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

// BenchmarkDoFan measures a fan-out of 40 leaves whose hedge timers never
// fire, against two loops of Do over the same leaves: one after the
// other on the caller's goroutine (the allocation floor: one per leaf),
// and each on a goroutine of its own, awaited with a WaitGroup (what a
// user writes to run them at once, as DoFan does). allocs/op divided by
// 40 is the allocations per leaf.
func BenchmarkDoFan(b *testing.B) {
	const n = 40
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 8})
	leaf := func(ctx context.Context, i int, a hedge.Attempt) (int, error) { return i, nil }
	b.Run("loop", func(b *testing.B) {
		b.ReportAllocs()
		vals := make([]int, n)
		for b.Loop() {
			for i := range n {
				vals[i], _ = hedge.Do(context.Background(), h, "leaf", func(ctx context.Context, a hedge.Attempt) (int, error) { return leaf(ctx, i, a) })
			}
		}
	})
	b.Run("goroutines", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			vals := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					vals[i], _ = hedge.Do(context.Background(), h, "leaf", func(ctx context.Context, a hedge.Attempt) (int, error) { return leaf(ctx, i, a) })
				})
			}
			wg.Wait()
		}
	})
	b.Run("DoFan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.DoFan(context.Background(), h, "leaf", n, hedge.FanOut{}, leaf)
		}
	})
	// The same 40 leaves over 20 shards of 2 servers.
	hs, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 40, Shards: hedge.ShardGrid(20, 2)})
	b.Run("DoFan-shards", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hedge.DoFan(context.Background(), hs, "leaf", n, hedge.FanOut{}, leaf)
		}
	})
}
