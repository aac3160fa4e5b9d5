package advise

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// wholeMillis is a sample logged in whole milliseconds from a service
// faster than that: 96% of the latencies 0, so that the p95 is 0, and the
// others slow (slow long) in pairs, the two sent 4 ms apart, one pair in
// 50 requests, every 4 ms over two named replicas.
func wholeMillis(n int, slow time.Duration) *Sample {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "whole milliseconds"}
	for k := range n {
		x := time.Duration(0)
		if k%50 < 2 {
			x = slow
		}
		s.Latencies = append(s.Latencies, x)
		s.Times = append(s.Times, t0.Add(time.Duration(k)*4*time.Millisecond))
		s.Replicas = append(s.Replicas, []string{"a", "b"}[k%2])
	}
	return s
}

// The moment-local default line asks for a copy a delay after the
// primary, and again every delay while it runs: with a p95 of 0 that
// never advanced, and with a p95 far below the slow latencies it asked
// millions of times per request. A delay of 0 asks once (the library
// asks again only after a positive delay, decide.Policy.Retries), and a
// request asks at most maxAsks times.
//
// In each pair of slow requests the first finds the other replica idle
// (every request of 0 or 1 ns is answered at once) and hedges; the
// second is placed on that other replica and finds the first's busy for
// 50 ms: refused once with a delay of 0, and maxAsks times, over 1 µs,
// with a delay of 1 ns. So one request in 50 hedges.
func TestLocalDefaultAsksABoundedNumberOfTimes(t *testing.T) {
	oneNs := wholeMillis(2000, 50*time.Millisecond)
	for i, x := range oneNs.Latencies {
		if x == 0 {
			oneNs.Latencies[i] = 1
		}
	}
	for _, c := range []struct {
		name string
		s    *Sample
	}{
		{"p95 of 0", wholeMillis(2000, 5*time.Millisecond)},
		{"p95 of 1ns", oneNs},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Advise(context.Background(), c.s, Options{Percentiles: []float64{95}, Sizes: []Sizes{}})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Predictions {
				if p.Kind != "independent-local" {
					continue
				}
				if p.Default == nil {
					t.Fatal("no default line with send times and two named replicas")
				}
				if r := p.Default.HedgeRate; r != 0.02 {
					t.Errorf("default line: hedge rate %v, want 0.02 (the first of each pair)", r)
				}
				return
			}
			t.Fatal("no moment-local estimate")
		})
	}
}

// countdown is a context whose Err is nil for its first n calls and
// context.Canceled from then on (its Done never closes): it ends at a
// point fixed by the count of checks, not by a clock.
type countdown struct {
	context.Context
	n, calls atomic.Int64
}

func (c *countdown) Err() error {
	c.calls.Add(1)
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// Advise stops with its context's error wherever the context ends: in
// each estimate's loops, the queueing estimate's simulations included,
// and without them (Sizes empty: nothing simulates). A first run
// counts the checks; then the context ends at checks spread over that
// count, the first included, and each run must return context.Canceled.
func TestAdviseStopsWithContext(t *testing.T) {
	s := wholeMillis(3000, 5*time.Millisecond)
	for i := range s.Latencies {
		s.Latencies[i] += time.Millisecond
	}
	for _, sizes := range [][]Sizes{{}, nil} {
		o := Options{Percentiles: []float64{90, 99}, SendLag: 100 * time.Microsecond, SendLagP99: time.Millisecond, Load: 0.3, Requests: 20_000, Sizes: sizes}
		all := &countdown{Context: context.Background()}
		all.n.Store(1 << 62)
		if _, err := Advise(all, s, o); err != nil {
			t.Fatal(err)
		}
		total := all.calls.Load()
		prev := int64(-1)
		for k := range int64(8) {
			at := k * total / 8
			if at == prev {
				continue
			}
			prev = at
			ctx := &countdown{Context: context.Background()}
			ctx.n.Store(at)
			if _, err := Advise(ctx, s, o); !errors.Is(err, context.Canceled) {
				t.Errorf("sizes %v: context ended at check %d of %d: error %v, want context.Canceled", sizes, at, total, err)
			}
		}
		t.Logf("sizes %v: %d checks", sizes, total)
	}
}
