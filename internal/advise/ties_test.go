package advise

import (
	"context"
	"testing"
	"time"
)

// A request hedges when its primary is still running at the delay: its
// latency exceeds the delay, and one that answers exactly at the delay
// sends no copy. On a sample with ties at the delay, by hand:
//
//	latencies: 500 of 1ms, 400 of 2ms, 100 of 10ms (n = 1000); delay 2ms
//	hedged: the 100 of 10ms (2ms is not above 2ms): hedge rate 100/1000 = 0.1
//	(counting x >= d would hedge the 400 ties too: 0.5)
//	a hedged one answers at min(10ms, 2ms + X2): 3ms for X2 = 1ms (1/2),
//	4ms for 2ms (2/5), 10ms for 10ms (1/10): 50, 40 and 10 requests
//	all: 500 at 1ms, 400 at 2ms, 50 at 3ms, 40 at 4ms, 10 at 10ms
//	p99 (the 990th): 500+400+50+40 = 990, so 4ms; p99.9 (the 999th): 10ms
//
// The moment-local estimate counts its hedges by the same rule.
func TestHedgedCountsLatenciesAboveTheDelay(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "ties"}
	for k := range 1000 {
		x := time.Millisecond
		switch {
		case k%10 == 9:
			x = 10 * time.Millisecond
		case k%10 >= 5:
			x = 2 * time.Millisecond
		}
		s.Latencies = append(s.Latencies, x)
		s.Times = append(s.Times, t0.Add(time.Duration(k)*time.Millisecond))
	}
	rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{}, Delays: []time.Duration{2 * time.Millisecond}, Sizes: []Sizes{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Predictions {
		o := p.Rows[0] // without the budget
		if o.Budget || o.Choice.Delay != 2*time.Millisecond {
			t.Fatalf("%s: first row %+v, want 2ms without the budget", p.Kind, o)
		}
		if o.HedgeRate != 0.1 {
			t.Errorf("%s: hedge rate %v, want 0.1 (only the latencies above the delay)", p.Kind, o.HedgeRate)
		}
		if p.Kind == "independent" && (o.P99 != 4*time.Millisecond || o.P999 != 10*time.Millisecond) {
			t.Errorf("independent: p99 %v, p99.9 %v; want 4ms and 10ms", o.P99, o.P999)
		}
	}
	if len(rep.Predictions) != 2 {
		t.Errorf("%d predictions, want the independent and the moment-local", len(rep.Predictions))
	}
}
