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
//	go test ./internal/sim -run TestFanCallManyClients -v -args -fan-call-grid
//
// It prints the request's p50, p99 and p99.9 over none's with the same
// clients and width, for the default with the fan-out call (fan), with
// the servers' low-priority copies (lp), or neither; the first point with
// two seeds. It asserts nothing.
func TestFanCallManyClients(t *testing.T) {
	if !*fanCallGrid {
		t.Skip("a measurement, not a test: run with -fan-call-grid")
	}
	for _, pt := range []struct {
		world          string
		load           float64
		clients, width int
		fan, lp        bool
		seed           uint64
	}{
		{"noise", 0.9, 100, 40, true, false, 99},
		{"noise", 0.9, 100, 40, true, false, 100},
		{"noise", 0.9, 100, 40, true, true, 99},
		{"noise", 0.9, 100, 40, false, true, 99},
		{"noise", 0.9, 100, 40, false, false, 99},
		{"noise", 0.9, 10, 40, true, false, 99},
		{"noise", 0.9, 100, 10, true, false, 99},
		{"noise", 0.7, 100, 40, true, false, 99},
		{"mixed", 0.9, 100, 40, true, false, 99},
		{"bigjobs", 0.9, 1, 40, true, false, 99},
		{"bigjobs", 0.9, 1, 40, false, false, 99},
		{"stalls", 0.9, 1, 40, true, false, 99},
	} {
		c := scenarioConfig(t, pt.world)
		c.Load, c.Fanout, c.Clients, c.Requests, c.Warmup = pt.load, pt.width, pt.clients, 40_000, 4_000
		c.Seed = DeriveSeed(pt.seed, fmt.Sprint(pt.world, pt.load, pt.clients, pt.width))
		n, d := c, c
		n.Strategy, d.Strategy, d.LowPriorityCopies = None, Default, pt.lp
		if pt.fan {
			d.FanCall = &hedge.FanOut{}
		}
		r, _ := pairedRatios(t, n, d, 8)
		t.Logf("%s %g, %d clients, %d leaves, fan %v, lp %v, seed %d: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f",
			pt.world, pt.load, pt.clients, pt.width, pt.fan, pt.lp, pt.seed,
			r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE)
	}
}

// TestFanCallBurst measures what the Hedger's budget burst does to the
// fan-out call's gain in the stalls world at load 0.3, 40 and 100 leaves,
// 6 paired runs of 800,000 leaves: the default burst of 10 tokens, and
// 20 and 40 at the same ratio (0.1):
//
//	go test ./internal/sim -run TestFanCallBurst -v -args -fan-call-grid
//
// It prints the request's p50, p99 and p99.9 over none's, the extra leaf
// requests and the copies the budget refused per request. It asserts
// nothing.
func TestFanCallBurst(t *testing.T) {
	if !*fanCallGrid {
		t.Skip("a measurement, not a test: run with -fan-call-grid")
	}
	for _, burst := range []float64{10, 20, 40} {
		for _, w := range []int{40, 100} {
			// A Budget per point: runs in sequence share it, as the
			// requests of one long run would.
			b, err := hedge.NewBudget(0.1, burst)
			if err != nil {
				t.Fatal(err)
			}
			r, sd := fanCallRatios(t, "stalls", 0.3, w, 0, 0, 800_000/w, 6, &hedge.Config{Budget: b}, &hedge.FanOut{})
			var refused int64
			for _, run := range sd.Runs {
				refused += run.Refused[hedge.RefusedBudget]
			}
			t.Logf("burst %g, %d leaves: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f; %.2f%% extra leaf requests; %.3f refused by the budget per request",
				burst, w, r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE,
				100*sd.FanExtra.Value/float64(w), float64(refused)/float64(len(sd.Runs)*800_000/w))
		}
	}
}
