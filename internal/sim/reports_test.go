package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
)

// reportRatios runs the zero hedge.Config against none at one point, with
// servers that report their load (Config.LoadReports) and, with low, run
// copies at low priority, paired by run.
func reportRatios(t *testing.T, world string, load float64, clients, requests, runs int, low bool) (map[string]Estimate, Summary) {
	t.Helper()
	c := scenarioConfig(t, world)
	c.Load, c.Requests, c.Warmup, c.Clients = load, requests, requests/10, clients
	c.Seed = DeriveSeed(61, fmt.Sprint(world, load, clients))
	n, d := c, c
	n.Strategy, d.Strategy = None, Default
	d.Hedge, d.LoadReports, d.LowPriorityCopies = &hedge.Config{}, true, low
	return pairedRatios(t, n, d, runs)
}

// TestLoadReportsGrid measures the zero Config against none when servers
// report their load with every answer (docs/default.md, "Load reports"):
//
//	go test ./internal/sim -run TestLoadReportsGrid -v -args -clients-grid
//
// Seven worlds at loads 0.1 to 0.9, one, ten and a hundred clients, three
// runs per point of 100,000 requests, with reports alone and with
// reports and low-priority copies (FCFS worlds). It prints every point
// worse than none by more than 5% and two standard errors, the worst
// ratio per row, and the gains the goals name: stalls p99.9 and noise
// p99. It asserts nothing.
func TestLoadReportsGrid(t *testing.T) {
	if !*clientsGrid {
		t.Skip("a measurement, not a test: run with -clients-grid")
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "lognormal σ=1", "correlated", "ps-stalls"}
	loads := []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9}
	for _, low := range []bool{false, true} {
		for _, clients := range []int{1, 10, 100} {
			worst, where := 0.0, ""
			var stalls, noise []string
			for _, world := range worlds {
				if low && strings.HasPrefix(world, "ps-") {
					continue // no queue to put a copy at the back of
				}
				for _, l := range loads {
					r, sd := reportRatios(t, world, l, clients, 100_000, 3, low)
					miss := ""
					for _, q := range []string{"p50", "p99", "p99.9"} {
						e := r[q]
						if e.Value > 1+max(0.05, 2*e.SE) {
							miss += " " + q
						}
						if e.Value-2*e.SE > worst {
							worst, where = e.Value-2*e.SE, fmt.Sprintf("%s %s at %g: %.3f ± %.3f", world, q, l, e.Value, e.SE)
						}
					}
					if miss != "" {
						t.Logf("low-priority %v, C = %d, %s at %g, worse at%s: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f, hedged %.2f%%", low, clients, world, l, miss,
							r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*sd.HedgedFraction.Value)
					}
					switch world {
					case "stalls":
						stalls = append(stalls, fmt.Sprintf("%g: %.2f", l, r["p99.9"].Value))
					case "noise":
						noise = append(noise, fmt.Sprintf("%g: %.2f", l, r["p99"].Value))
					}
				}
			}
			t.Logf("low-priority %v, C = %d: worst ratio less two standard errors %.3f (%s); stalls p99.9 %s; noise p99 %s", low, clients, worst, where, strings.Join(stalls, ", "), strings.Join(noise, ", "))
		}
	}
}

// TestLoadReportsNeverWorse runs the zero Config against none with
// servers that report their load, at the points nearest to harm in the
// grid (TestLoadReportsGrid) and of the default without reports, and
// fails if p50, p99 or p99.9 is worse than none's by more than 5% or two
// standard errors. It also requires that the reports were read: with ten
// clients, a report shows the other clients' work on a replica this
// client sees idle, and copies move past such replicas to the picker's
// next choice (decide.Policy.Place).
func TestLoadReportsNeverWorse(t *testing.T) {
	requests, runs := 60_000, 3
	pts := []struct {
		world   string
		load    float64
		clients int
	}{{"bigjobs", 0.8, 10}, {"mixed", 0.8, 1}, {"mixed", 0.5, 10}, {"stalls", 0.7, 1}, {"bigjobs", 0.5, 100}}
	if raceEnabled {
		requests, runs = 20_000, 3
		pts = pts[:1]
	}
	for _, p := range pts {
		r, sd := reportRatios(t, p.world, p.load, p.clients, requests, runs, false)
		for _, q := range []string{"p50", "p99", "p99.9"} {
			if e := r[q]; math.IsNaN(e.Value) || e.Value > 1+max(0.05, 2*e.SE) {
				t.Errorf("%s at %g, %d clients, load reports: %s is %.3f ± %.3f of none's: worse than not hedging", p.world, p.load, p.clients, q, e.Value, e.SE)
			}
		}
		t.Logf("%s at %g, %d clients, load reports: p50 %.3f, p99 %.3f, p99.9 %.3f, hedged %.2f%%", p.world, p.load, p.clients, r["p50"].Value, r["p99"].Value, r["p99.9"].Value, 100*sd.HedgedFraction.Value)
	}
	c := scenarioConfig(t, "stalls")
	c.Load, c.Requests, c.Warmup, c.Clients = 0.5, requests, requests/10, 10
	c.Strategy, c.Hedge, c.LoadReports = Default, &hedge.Config{}, true
	// hidden counts the replicas read busy by their report and idle by
	// the client's own view; moved, the candidates read after a first in
	// one decision (the same request at the same instant).
	hidden, moved := 0, 0
	var last *request
	lastAt := -1.0
	checkPlace = func(e *engine, q int) {
		if e.curR == last && e.now == lastAt {
			moved++
		}
		last, lastAt = e.curR, e.now
		v := &e.views[e.vbase+q]
		if l, by := e.vpol.ReportedLoad(e.report(v), int(v.sent), e.load(q), toDuration(e.now)); by && l > 0 && e.load(q) == 0 {
			hidden++
		}
	}
	defer func() { checkPlace = nil }()
	var s Simulator
	if _, err := s.Run(c); err != nil {
		t.Fatal(err)
	}
	if hidden == 0 || moved == 0 {
		t.Errorf("stalls at 0.5, ten clients: %d replicas read busy by their report and idle by the client's own view, %d copies moved to the next candidate: the reports were not read", hidden, moved)
	}
	t.Logf("stalls at 0.5, ten clients: %d replicas busy by their report and idle to the client, %d copies moved to the next candidate", hidden, moved)
}

// TestLoadReportsOneClientExact checks the model of reports against what
// they stand for: with one client, every answer brings the queue's report
// and every copy the client places since is counted, so a fresh report
// plus the copies sent since is the queue's own count, but for copies
// cancelled since (they leave without an answer to carry a report): never
// fewer, and the same at most decisions.
func TestLoadReportsOneClientExact(t *testing.T) {
	c := scenarioConfig(t, "stalls")
	c.Load, c.Requests, c.Warmup = 0.6, 20_000, 2_000
	c.Strategy, c.Hedge, c.LoadReports = Default, &hedge.Config{}, true
	checked, fresh, exact := 0, 0, 0
	checkPlace = func(e *engine, q int) {
		v := &e.views[q]
		checked++
		if rep := e.report(v); e.pol.Fresh(rep.At, toDuration(e.now)) {
			fresh++
			got, want := int(v.repBusy+v.sent), e.qs[q].busy
			if got < want {
				t.Fatalf("at %.3f: queue %d's report (%d) and copies sent since (%d) count %d, the queue holds %d", e.now, q, v.repBusy, v.sent, got, want)
			}
			if got == want {
				exact++
			}
		}
	}
	defer func() { checkPlace = nil }()
	var s Simulator
	if _, err := s.Run(c); err != nil {
		t.Fatal(err)
	}
	if checked == 0 || fresh < checked/2 || exact < fresh*9/10 {
		t.Fatalf("%d decisions placed, %d of them with a fresh report, %d exact: want most fresh and nearly all exact", checked, fresh, exact)
	}
	t.Logf("%d decisions placed, %d with a fresh report, %d of those exact", checked, fresh, exact)
}
