package advise

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
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
// primary, and again every delay while no replica is idle: with a p95 of
// 0 that never advanced, and with a p95 far below the slow latencies it
// asked millions of times per request. A delay of 0 asks once (the
// library asks again only after a positive delay, decide.Policy.Retries),
// and a request asks at most maxAsks times.
//
// In each pair of slow requests the first finds the other replica idle
// (every request of 0 or 1 ns is answered at once) and hedges; the
// second is placed beside one of the first's two copies and finds the
// other replica busy with the other: refused once with a delay of 0, and
// maxAsks times, over 1 µs, with a delay of 1 ns.
//
// The first's copy draws from the requests sent nearest its moment. With
// a delay of 0 that is the first itself, whose copy ties with it and is
// not counted by the payoff rule (it learns only from hedges sent after
// a positive delay), so every pair's first hedges: one request in 50.
// With 1 ns no request was sent within half a nanosecond, and the copy
// draws from the first and the second, both slow: it never wins, and each
// loss costs the payoff rule's cap of 16 delays. The class starts at the
// edge of paying, so the first pair's first hedges for certain; its loss
// (learnt 50 ms later, before the next pair) takes the win rate to 0.8 of
// the minimum and the waste far above the most that pays, and later
// firsts go only as the rule's soft gate lets them, with a chance of
// 0.8^8 = 0.17, then (2/3)^8 = 0.04, then 0.01 after each further loss
// (the probes credit less than half a token in 2,000 requests): 1 to 4
// of 2000. The samples name no replica (Options.Replicas gives two), so
// that the replay places the primaries as the library's picker does.
func TestLocalDefaultAsksABoundedNumberOfTimes(t *testing.T) {
	oneNs := wholeMillis(2000, 50*time.Millisecond)
	for i, x := range oneNs.Latencies {
		if x == 0 {
			oneNs.Latencies[i] = 1
		}
	}
	for _, c := range []struct {
		name       string
		s          *Sample
		lo, hi     float64
		asks, busy int // the most asks of one request, and busy refusals in all
	}{
		{"p95 of 0", wholeMillis(2000, 5*time.Millisecond), 0.02, 0.02, 0, 40},
		{"p95 of 1ns", oneNs, 1.0 / 2000, 4.0 / 2000, maxAsks, 40 * maxAsks},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.Replicas = nil
			rep, err := Advise(context.Background(), c.s, Options{Percentiles: []float64{95}, Sizes: []Sizes{}, Replicas: 2})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Predictions {
				if p.Kind != "independent-local" {
					continue
				}
				if p.Default == nil {
					t.Fatal("no default line with send times and two replicas")
				}
				if r := p.Default.HedgeRate; r < c.lo || r > c.hi {
					t.Errorf("default line: hedge rate %v, want %v to %v (the first of each pair)", r, c.lo, c.hi)
				}
				found = true
			}
			if !found {
				t.Fatal("no moment-local estimate")
			}
			rp := replayed(t, c.s, 2)
			most := 0
			for _, rq := range rp.reqs {
				most = max(most, rq.asks)
			}
			if most != c.asks || rp.refused[hedge.RefusedBusy] > c.busy {
				t.Errorf("the most asks of one request %d, want %d; busy refusals %d, want at most %d", most, c.asks, rp.refused[hedge.RefusedBusy], c.busy)
			}
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
