package sim

import (
	"fmt"
	"testing"

	"github.com/tailcut/hedge"
)

// TestFanCallManyClients measures again, with four times the requests of
// the study and 8 paired runs, the points of the study's clients group
// where the fan-out call came out above none, and their neighbours:
//
//	go test ./sim -run TestFanCallManyClients -v -args -fan-call-grid
//
// It prints the request's p50, p99 and p99.9 over none's with the same
// clients and width, for the default with the fan-out call (fan), with
// the servers' low-priority copies (lp), or neither. It asserts nothing.
func TestFanCallManyClients(t *testing.T) {
	if !*fanCallGrid {
		t.Skip("a measurement, not a test: run with -fan-call-grid")
	}
	for _, pt := range []struct {
		world          string
		load           float64
		clients, width int
		fan, lp        bool
	}{
		{"noise", 0.9, 100, 40, true, false},
		{"noise", 0.9, 100, 40, true, true},
		{"noise", 0.9, 100, 40, false, true},
		{"noise", 0.9, 100, 40, false, false},
		{"noise", 0.9, 10, 40, true, false},
		{"noise", 0.9, 100, 10, true, false},
		{"noise", 0.7, 100, 40, true, false},
		{"mixed", 0.9, 100, 40, true, false},
		{"bigjobs", 0.9, 1, 40, true, false},
		{"bigjobs", 0.9, 1, 40, false, false},
	} {
		c := scenarioConfig(t, pt.world)
		c.Load, c.Fanout, c.Clients, c.Requests, c.Warmup = pt.load, pt.width, pt.clients, 40_000, 4_000
		c.Seed = DeriveSeed(99, fmt.Sprint(pt.world, pt.load, pt.clients, pt.width))
		n, d := c, c
		n.Strategy, d.Strategy, d.LowPriorityCopies = None, Default, pt.lp
		if pt.fan {
			d.FanCall = &hedge.FanOut{}
		}
		r, _ := pairedRatios(t, n, d, 8)
		t.Logf("%s %g, %d clients, %d leaves, fan %v, lp %v: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f",
			pt.world, pt.load, pt.clients, pt.width, pt.fan, pt.lp,
			r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE)
	}
}
