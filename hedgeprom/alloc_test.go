package hedgeprom_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
)

func trivial(context.Context, hedge.Attempt) (int, error) { return 1, nil }

// registered returns a fresh Hedger whose hedge timer never fires, and a
// registry with a collector over it when collected is set.
func registered(tb testing.TB, collected bool) (*hedge.Hedger, *prometheus.Registry) {
	tb.Helper()
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if collected {
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
		if err != nil {
			tb.Fatal(err)
		}
		reg.MustRegister(c)
	}
	return h, reg
}

// TestCollectorAddsNoAllocation pins what a registered collector costs the
// request path: nothing. A call that sends no hedge allocates exactly as
// much with a collector registered, and scraped between calls, as the same
// call on a Hedger no collector reads. Allocation counts are process-wide,
// so the scrape cannot run concurrently here: each run is a call and then
// a scrape, and the scrape's own allocations, measured alone on the same
// registry, are subtracted. (BenchmarkDoScraped measures the time of calls
// while another goroutine scrapes without pause.)
func TestCollectorAddsNoAllocation(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocations")
	}
	ctx := context.Background()
	do := func(h *hedge.Hedger) {
		if _, err := hedge.Do(ctx, h, "get", trivial); err != nil {
			t.Fatal(err)
		}
	}
	gather := func(reg *prometheus.Registry) {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	plain, _ := registered(t, false)
	h, reg := registered(t, true)
	do(plain)
	do(h) // the op's state exists before counting, on both
	gather(reg)

	const runs = 500
	base := testing.AllocsPerRun(runs, func() { do(plain) })
	scrape := testing.AllocsPerRun(runs, func() { gather(reg) })
	both := testing.AllocsPerRun(runs, func() { do(h); gather(reg) })
	if scrape == 0 {
		t.Fatal("a scrape allocated nothing: the measure cannot tell the call's allocations from the scrape's")
	}
	if got := both - scrape; got != base {
		t.Errorf("a call with a collector scraped between calls allocates %v (%v with the scrape, %v for the scrape alone); without a collector %v",
			got, both, scrape, base)
	}
	if base > 3 {
		t.Errorf("the fast path allocates %v, more than the 3 the root package documents", base)
	}
	t.Logf("fast path: %v allocations per call with or without the collector; a scrape of one op: %v", base, scrape)
}

// scraper scrapes reg without pause on its own goroutine until stop is
// called, and returns how many scrapes it made and the allocations those
// scrapes account for (scrapes times the allocations of one scrape,
// measured alone beforehand).
func scraper(tb testing.TB, reg *prometheus.Registry) (stop func() (scrapes int64, allocs float64)) {
	tb.Helper()
	per := testing.AllocsPerRun(20, func() { _, _ = reg.Gather() })
	var done atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			if _, err := reg.Gather(); err != nil {
				tb.Error(err)
				return
			}
			n.Add(1)
		}
	})
	return func() (int64, float64) {
		done.Store(true)
		wg.Wait()
		return n.Load(), float64(n.Load()) * per
	}
}

// mallocs returns the process's allocation count so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// measureCalls runs call b.N times, with reg scraped without pause by
// another goroutine when scrape is set, and reports the scrapes per call
// and call-allocs/op: the allocations per call once the scrapes' own are
// subtracted (allocs/op counts every goroutine's).
func measureCalls(b *testing.B, reg *prometheus.Registry, scrape bool, call func()) {
	var stop func() (int64, float64)
	if scrape {
		stop = scraper(b, reg)
	}
	b.ReportAllocs()
	m0 := mallocs()
	for b.Loop() {
		call()
	}
	var scrapes int64
	var scrapeAllocs float64
	if stop != nil {
		scrapes, scrapeAllocs = stop()
	}
	b.StopTimer()
	m1 := mallocs()
	b.ReportMetric(float64(scrapes)/float64(b.N), "scrapes/op")
	b.ReportMetric(max(0, float64(m1-m0)-scrapeAllocs)/float64(b.N), "call-allocs/op")
}

// BenchmarkDoScraped compares a call that sends no hedge on a Hedger no
// collector reads, on one a collector reads but nothing scrapes, and on
// one that another goroutine scrapes without pause (the worst case: on two
// cores the scraper takes one, and each scrape reads every counter the
// calls write). allocs/op counts the scraper's allocations too;
// call-allocs/op subtracts them.
func BenchmarkDoScraped(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name              string
		collected, scrape bool
	}{
		{"no-collector", false, false},
		{"registered", true, false},
		{"scraped", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, reg := registered(b, c.collected)
			hedge.Do(ctx, h, "get", trivial)
			measureCalls(b, reg, c.scrape, func() { hedge.Do(ctx, h, "get", trivial) })
		})
	}
}

// BenchmarkDoOneHedgeScraped is a call whose primary waits for
// cancellation and whose hedge, sent after 50µs (PreciseTimers, so that
// the runtime timer's granularity does not decide the time), answers at
// once, with no collector and with one scraped without pause by another
// goroutine.
func BenchmarkDoOneHedgeScraped(b *testing.B) {
	ctx := context.Background()
	attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
		if a.Index == 0 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 2, nil
	}
	for _, scraped := range []bool{false, true} {
		name := "no-collector"
		if scraped {
			name = "scraped"
		}
		b.Run(name, func(b *testing.B) {
			h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(50 * time.Microsecond), NoBudget: true, PreciseTimers: true})
			if err != nil {
				b.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			if scraped {
				c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
				if err != nil {
					b.Fatal(err)
				}
				reg.MustRegister(c)
			}
			hedge.Do(ctx, h, "op", attempt)
			measureCalls(b, reg, scraped, func() {
				if v, _ := hedge.Do(ctx, h, "op", attempt); v != 2 {
					b.Fatal("the hedge did not win")
				}
			})
		})
	}
}

// BenchmarkScrape measures one scrape (Gather) of a collector over one
// Hedger with one operation class.
func BenchmarkScrape(b *testing.B) {
	h, reg := registered(b, true)
	hedge.Do(context.Background(), h, "get", trivial)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
