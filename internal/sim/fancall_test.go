package sim

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/decide"
)

var fanCallGrid = flag.Bool("fan-call-grid", false, "run TestFanCallGoals and TestFanCallGrid: fan-out requests run as hedge.DoFan does against none (a few minutes)")

func TestFanCallValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"need", func(c *Config) { c.FanoutNeed, c.FanCall.Need = 30, 20 }, "FanCall.Need must be 0 or equal FanoutNeed"},
		{"good enough", func(c *Config) { c.FanCall.GoodEnough = time.Millisecond }, "good-enough"},
		{"straggle", func(c *Config) { c.FanCall.Straggle = 0.5 }, "Straggle"},
		{"canaries", func(c *Config) { c.FanCall.Canaries = 41 }, "Canaries"},
	} {
		c := DefaultConfig()
		c.Strategy, c.Fanout, c.FanCall = Default, 40, &hedge.FanOut{}
		tc.set(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrInvalid that names %q", tc.name, err, tc.want)
		}
	}
	c := DefaultConfig()
	c.Strategy, c.Fanout, c.FanoutNeed, c.FanCall = Default, 40, 38, &hedge.FanOut{Need: 38}
	if err := c.Validate(); err != nil {
		t.Errorf("FanCall.Need equal to FanoutNeed: %v", err)
	}
	if s := c.String(); !strings.Contains(s, "fan-call={hedges=8 in-flight=8 mark=") {
		t.Errorf("String() = %q, want the fan-out decision with its defaults", s)
	}
}

// fanCheck checks, at every further copy of a leaf of a fan-out request
// run with Config.FanCall, what the request's decision promises, counting
// for itself from the engine's copies rather than asking the decide.Fan:
// no more extra copies of the request in flight at once than
// FanConfig.InFlight, nor sent in all than FanConfig.Hedges; every copy
// in flight holds a slot (request.fanHeld), so that each gives it back
// when it ends; and no copy goes before it is due (decide.Policy.Due:
// the delay after the copy before it, or for a first hedge the sibling
// trigger's time if that is earlier), which a timer superseded by a
// straggler's earlier one would break. The count of slots held that the
// Fan keeps must be the copies in flight, and none when the request
// retires.
type fanCheck struct {
	t        *testing.T
	cfg      decide.FanConfig
	sent     map[[2]int32]int // extra copies per (parent slot, arrival index)
	copies   int
	most     int
	failures int
}

func newFanCheck(t *testing.T, c Config) *fanCheck {
	fo, ok := c.fanOut()
	if !ok {
		t.Fatal("no fan call")
	}
	cfg, err := decide.FanFrom(fo, c.Fanout, c.replicas())
	if err != nil {
		t.Fatal(err)
	}
	return &fanCheck{t: t, cfg: cfg, sent: map[[2]int32]int{}}
}

func (fc *fanCheck) fail(format string, a ...any) {
	if fc.failures++; fc.failures <= 5 {
		fc.t.Errorf(format, a...)
	}
}

func (fc *fanCheck) copy(e *engine, r *request) {
	fc.copies++
	p := r.parent
	pr := &e.par[p]
	key := [2]int32{p, pr.idx}
	fc.sent[key]++
	if n := fc.sent[key]; n > fc.cfg.Hedges {
		fc.fail("request %d sent %d extra copies, more than FanConfig.Hedges = %d", pr.idx, n, fc.cfg.Hedges)
	}
	fc.most = max(fc.most, fc.sent[key])
	live := 0
	base := int(p) * e.c.Fanout
	for j := range int(pr.sent) {
		ref := e.subs[base+j]
		s := &e.slots[ref.slot]
		if s.gen != ref.gen {
			continue // freed: no copy in flight
		}
		n := 0
		for k := 1; k < int(s.n); k++ {
			if s.state[k] == cWaiting || s.state[k] == cRunning {
				n++
				if s.fanHeld&(1<<k) == 0 {
					fc.fail("request %d: copy %d of a leaf is in flight without its fan slot", pr.idx, k)
				}
			} else if s.fanHeld&(1<<k) != 0 {
				fc.fail("request %d: copy %d of a leaf ended and kept its fan slot", pr.idx, k)
			}
		}
		live += n
	}
	if live > fc.cfg.InFlight {
		fc.fail("request %d has %d extra copies in flight, more than FanConfig.InFlight = %d", pr.idx, live, fc.cfg.InFlight)
	}
	if n := fanInFlight(fc.t, r.plan.Fan); n != live {
		fc.fail("request %d has %d extra copies in flight, and its Fan counts %d", pr.idx, live, n)
	}
	// The copy that just went, and when it was due.
	now, pl := toDuration(e.now), &r.plan
	const slack = 2 // ns: the engine's times round to the nanosecond
	switch k := r.n - 1; {
	case k == 1:
		due := decide.AddSat(pl.Start, pl.Delay)
		if s := decide.AddSat(pl.Start, pl.Fan.Straggler()); s < due {
			due = max(s, pl.Start)
		}
		if now < due-slack {
			fc.fail("request %d: a first hedge went at %v, before it was due at %v", pr.idx, now, due)
		}
	case k == 2:
		if due := decide.AddSat(pl.HedgeAt, pl.Delay); now < due-slack {
			fc.fail("request %d: a second hedge went at %v, %v after the first; the delay is %v", pr.idx, now, now-pl.HedgeAt, pl.Delay)
		}
	}
}

// retired checks that a fan-out request all of whose leaves are freed
// holds no slot of its Fan: every copy that took one gave it back.
func (fc *fanCheck) retired(e *engine, p int32) {
	if n := fanInFlight(fc.t, e.fans[p]); n != 0 {
		fc.fail("request %d retired with %d slots of its Fan held", e.par[p].idx, n)
	}
}

// fanInFlight reads the extra copies in flight that f counts.
func fanInFlight(_ *testing.T, f *decide.Fan) int { return f.InFlight() }

// TestFanCallKeepsItsPromises runs fan-out requests with Config.FanCall in
// worlds and with options that stress the decision's accounting (a cap of
// one, three copies per leaf, stragglers' timers brought forward, copies
// cancelled as losers or because the request has what it needs, copies
// that run on, preempted by primaries or refused by busy servers, several
// clients, canaries), and checks fanCheck's promises at every extra copy.
func TestFanCallKeepsItsPromises(t *testing.T) {
	requests := 4_000
	if raceEnabled {
		requests = 1_500
	}
	type point struct {
		name string
		set  func(*Config)
	}
	for _, p := range []point{
		{"stalls", func(c *Config) {}},
		{"stalls, in flight 1", func(c *Config) { c.FanCall.Hedges, c.FanCall.InFlight = 40, 1 }},
		{"stalls, 3 copies", func(c *Config) { c.Hedge.MaxAttempts = 3; c.FanCall.Straggle = 1.5 }},
		{"stalls, need 30", func(c *Config) { c.FanoutNeed = 30 }},
		{"bigjobs, no cancel", func(c *Config) { c.World, c.NoCancel = BigJobs, true }},
		{"mixed, low-priority copies", func(c *Config) { c.World, c.LowPriorityCopies, c.Load = Mixed, true, 0.7 }},
		{"stalls, idle-only copies", func(c *Config) { c.IdleOnlyCopies, c.Load = true, 0.6 }},
		{"ps-stalls, 10 clients", func(c *Config) { c.Discipline, c.Clients = PS, 10 }},
		{"noise, canaries", func(c *Config) { c.World, c.FanCall.Canaries, c.Load = Noise, 3, 0.7 }},
	} {
		c := scenarioConfig(t, "stalls")
		c.Load, c.Fanout, c.Requests, c.Warmup = 0.4, 40, requests, requests/10
		c.Strategy, c.Hedge, c.FanCall = Default, &hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, NoBudget: true}, &hedge.FanOut{}
		p.set(&c)
		fc := newFanCheck(t, c)
		checkFanCopy, checkFanRetired = fc.copy, fc.retired
		var s Simulator
		r, err := s.Run(c)
		checkFanCopy, checkFanRetired = nil, nil
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d extra copies, at most %d per request (FanMost %d) and %d in flight (FanPeak %d), %.3f per request; refused by the fan-out %d",
			p.name, fc.copies, fc.most, r.FanMost, fc.cfg.InFlight, r.FanPeak, r.FanExtra, r.Refused[decide.RefusedFanOut])
		if fc.copies == 0 || r.FanMost > fc.cfg.Hedges || r.FanPeak > fc.cfg.InFlight || r.FanExtra == 0 {
			t.Errorf("%s: %d copies checked, FanMost %d, FanPeak %d, FanExtra %v: want some, within %d and %d", p.name, fc.copies, r.FanMost, r.FanPeak, r.FanExtra, fc.cfg.Hedges, fc.cfg.InFlight)
		}
		if p.name == "stalls, in flight 1" && r.FanMost < 2 {
			// With one slot, a request sends a second copy only once the
			// first has given its slot back.
			t.Errorf("%s: at most %d extra copies per request: a slot was not given back", p.name, r.FanMost)
		}
	}
}

// TestFanCallCanaries checks that the leaves behind the canaries wait for
// them: with one canary, a request's latency is its canary's plus that of
// the others, and with a quorum no larger than the canaries the others
// are never sent.
func TestFanCallCanaries(t *testing.T) {
	c := scenarioConfig(t, "noise")
	c.Load, c.Fanout, c.Requests, c.Warmup = 0.05, 10, 4_000, 400
	c.Strategy, c.Hedge = Default, &hedge.Config{}
	run := func(c Config) RunResult {
		t.Helper()
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	c.FanCall = &hedge.FanOut{}
	plain := run(c)
	c.FanCall = &hedge.FanOut{Canaries: 1}
	canary := run(c)
	// Without queues a leaf takes Exp(1): the max of ten has mean 2.93,
	// a canary then the max of nine 1 + 2.83.
	if d := canary.Mean - plain.Mean; d < 0.6 || d > 1.4 {
		t.Errorf("mean latency %.3f with a canary, %.3f without: want about one service time more", canary.Mean, plain.Mean)
	}
	c.FanoutNeed, c.FanCall = 2, &hedge.FanOut{Canaries: 3}
	sent := 0
	checkFanRetired = func(e *engine, p int32) { sent = max(sent, int(e.par[p].sent)) }
	quorum := run(c)
	checkFanRetired = nil
	if sent != 3 || quorum.Requests != c.Requests-c.Warmup {
		t.Errorf("2 of 10 leaves with 3 canaries: %d leaves sent, %d requests measured; want 3 and %d", sent, quorum.Requests, c.Requests-c.Warmup)
	}
}

// fanCallRatios runs default (Config.Hedge h, nil for the zero Config)
// with fo, and none with one copy per leaf, in scenario at load (which
// counts leaves) for fan-outs of w leaves, of which the default waits for
// need (0: all) and none for noneNeed, and returns the default's p50, p99
// and p99.9 over none's, paired by run, and the default's summary.
func fanCallRatios(t *testing.T, scenario string, load float64, w, need, noneNeed, requests, runs int, h *hedge.Config, fo *hedge.FanOut) (map[string]Estimate, Summary) {
	t.Helper()
	c := scenarioConfig(t, scenario)
	c.Load, c.Fanout, c.Requests, c.Warmup = load, w, requests, requests/10
	c.Seed = DeriveSeed(67, fmt.Sprint(scenario, load, w))
	n, d := c, c
	n.Strategy, n.MaxAttempts, n.FanoutNeed = None, 1, noneNeed
	d.Strategy, d.Hedge, d.FanCall, d.FanoutNeed = Default, h, fo, need
	if d.Hedge == nil {
		d.Hedge = &hedge.Config{}
	}
	return pairedRatios(t, n, d, runs)
}

// TestFanCallKeepsTheGain checks the goals of the fan-out call that the
// library's defaults meet, in the stalls world at load 0.3: with 40
// leaves, a request p99 at most 0.5 of none's for at most 5% more leaf
// requests; and waiting for 38 of the 40 leaves, a p99 at most 0.4 of
// that of none waiting for all 40. A goal is missed when the ratio is
// above it by more than two standard errors.
func TestFanCallKeepsTheGain(t *testing.T) {
	requests, runs := 20_000, 4
	if raceEnabled {
		requests, runs = 5_000, 3
	}
	r, sd := fanCallRatios(t, "stalls", 0.3, 40, 0, 0, requests, runs, nil, &hedge.FanOut{})
	extra := sd.FanExtra.Value / 40
	t.Logf("40 leaves: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f of none's; %.2f%% extra leaf requests",
		r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*extra)
	if e := r["p99"]; math.IsNaN(e.Value) || e.Value-2*e.SE > 0.5 {
		t.Errorf("40 leaves: p99 %.3f ± %.3f of none's, want at most 0.5", e.Value, e.SE)
	}
	if extra > 0.05 {
		t.Errorf("40 leaves: %.2f%% extra leaf requests, want at most 5%%", 100*extra)
	}
	r, sd = fanCallRatios(t, "stalls", 0.3, 40, 38, 0, requests, runs, nil, &hedge.FanOut{})
	t.Logf("38 of 40 leaves against all 40 unhedged: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f; %.2f%% extra leaf requests",
		r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*sd.FanExtra.Value/40)
	if e := r["p99"]; math.IsNaN(e.Value) || e.Value-2*e.SE > 0.4 {
		t.Errorf("38 of 40 leaves: p99 %.3f ± %.3f of none's waiting for all 40, want at most 0.4", e.Value, e.SE)
	}
}

// TestFanCallGoals measures the fan-out call's goals in the stalls world
// at load 0.3, and the FanOut knobs around the defaults:
//
//	go test ./internal/sim -run TestFanCallGoals -v -args -fan-call-grid
//
// For 40 and 100 leaves (all awaited) and 38 of 40 (against all 40
// unhedged), 8 runs of 20,000 requests (8,000 with 100 leaves), it
// prints the request's p50, p99 and p99.9 over none's, the extra leaf
// requests, and whether the p99 goal (0.5; 0.4 for 38 of 40) is met
// ("within 2 SE": above it, by less than two standard errors); then
// the same for other Hedges, Straggle and Mark, for the zero hedge.Config
// and for one without the Hedger's own budget. It asserts nothing.
func TestFanCallGoals(t *testing.T) {
	if !*fanCallGrid {
		t.Skip("a measurement, not a test: run with -fan-call-grid")
	}
	type point struct {
		w, need, requests int
		goal              float64
	}
	points := []point{{40, 0, 20_000, 0.5}, {100, 0, 8_000, 0.5}, {40, 38, 20_000, 0.4}}
	type knob struct {
		name string
		fo   *hedge.FanOut
	}
	knobs := []knob{
		{"no fan call", nil},
		{"FanOut{}", &hedge.FanOut{}},
		{"Straggle -1", &hedge.FanOut{Straggle: -1}},
		{"Straggle 2", &hedge.FanOut{Straggle: 2}},
		{"Straggle 5", &hedge.FanOut{Straggle: 5}},
		{"Mark 0.5", &hedge.FanOut{Mark: 0.5}},
		{"Mark 0.9", &hedge.FanOut{Mark: 0.9}},
		{"Hedges 2x", nil},
		{"Hedges 2x, InFlight 1x", nil},
		{"Hedges 4x", nil},
	}
	for _, h := range []struct {
		name string
		h    *hedge.Config
	}{{"zero Config", &hedge.Config{}}, {"NoBudget", &hedge.Config{NoBudget: true}}} {
		for _, p := range points {
			t.Logf("| %s, %d leaves, need %d | p50 | p99 | p99.9 | extra leaf requests | p99 goal %g |", h.name, p.w, p.need, p.goal)
			for _, k := range knobs {
				fo := k.fo
				def := decide.DefaultFanHedges(p.w, 10)
				switch k.name {
				case "Hedges 2x":
					fo = &hedge.FanOut{Hedges: 2 * def}
				case "Hedges 2x, InFlight 1x":
					fo = &hedge.FanOut{Hedges: 2 * def, InFlight: def}
				case "Hedges 4x":
					fo = &hedge.FanOut{Hedges: 4 * def}
				}
				if fo != nil {
					fo.Need = p.need
				}
				r, sd := fanCallRatios(t, "stalls", 0.3, p.w, p.need, 0, p.requests, 8, h.h, fo)
				extra := sd.HedgedFraction.Value // one copy per leaf at most (MaxAttempts 2)
				if fo != nil {
					extra = sd.FanExtra.Value / float64(p.w)
				}
				met := "met"
				switch e := r["p99"]; {
				case e.Value-2*e.SE > p.goal:
					met = "missed"
				case e.Value > p.goal:
					met = "within 2 SE"
				}
				t.Logf("| %s | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2f%% | %s |", k.name,
					r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*extra, met)
			}
		}
	}
}

// TestFanCallGrid measures the zero Config with FanCall = &hedge.FanOut{}
// against none (one copy per leaf, the same routing) over every world of
// DefaultScenarios but the lognormal spreads other than σ=1, widths 1,
// 10, 40 and 100 (all leaves awaited) and loads 0.1 to 0.9:
//
//	go test ./internal/sim -run TestFanCallGrid -v -args -fan-call-grid
//
// Three runs per point, of 100,000 requests (20,000 with 10 or 40 leaves,
// 8,000 with 100). It prints every point's ratios of p50, p99 and p99.9,
// flags those worse than none's by more than 5% and two standard errors,
// and measures the worst ratio per width and every flagged point again
// with 8 runs of three times as many requests (a flagged point also
// without the fan-out call). It asserts nothing.
func TestFanCallGrid(t *testing.T) {
	if !*fanCallGrid {
		t.Skip("a measurement, not a test: run with -fan-call-grid")
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "lognormal σ=1", "correlated", "ps-stalls", "ps-bigjobs"}
	loads := []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9}
	for _, w := range []int{1, 10, 40, 100} {
		requests := map[int]int{1: 100_000, 10: 20_000, 40: 20_000, 100: 8_000}[w]
		worst, where := 0.0, ""
		var worstWorld, worstQ string
		var worstLoad float64
		type at struct {
			world, q string
			load     float64
		}
		var flagged []string
		var again []at
		t.Logf("| width %d | load | p50 | p99 | p99.9 | extra leaf requests |", w)
		for _, world := range worlds {
			for _, l := range loads {
				r, sd := fanCallRatios(t, world, l, w, 0, 0, requests, 3, nil, &hedge.FanOut{})
				extra := sd.HedgedFraction.Value
				if w > 1 {
					extra = sd.FanExtra.Value / float64(w)
				}
				t.Logf("| %s | %g | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2f%% |", world, l,
					r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*extra)
				for _, q := range []string{"p50", "p99", "p99.9"} {
					e := r[q]
					if e.Value > worst {
						worst, where = e.Value, fmt.Sprintf("%s %s at %g, ± %.3f", world, q, l, e.SE)
						worstWorld, worstQ, worstLoad = world, q, l
					}
					if e.Value > 1.05 && e.Value > 1+2*e.SE {
						flagged = append(flagged, fmt.Sprintf("%s %s at %g: %.3f ± %.3f", world, q, l, e.Value, e.SE))
						again = append(again, at{world, q, l})
					}
				}
			}
		}
		t.Logf("width %d: worst ratio %.3f (%s); worse than none by more than 5%% and 2 SE: %v", w, worst, where, flagged)
		r, _ := fanCallRatios(t, worstWorld, worstLoad, w, 0, 0, 3*requests, 8, nil, &hedge.FanOut{})
		t.Logf("width %d: the worst point again, 8 runs of %d requests: %s %.3f ± %.3f", w, 3*requests, worstQ, r[worstQ].Value, r[worstQ].SE)
		for _, a := range again {
			// Each flagged point again, and the zero Config without the
			// fan-out call at the same point, to tell whose it is.
			r, _ := fanCallRatios(t, a.world, a.load, w, 0, 0, 3*requests, 8, nil, &hedge.FanOut{})
			rn, _ := fanCallRatios(t, a.world, a.load, w, 0, 0, 3*requests, 8, nil, nil)
			t.Logf("width %d: flagged %s %s at %g again, 8 runs of %d requests: %.3f ± %.3f (without the fan-out call %.3f ± %.3f)",
				w, a.world, a.q, a.load, 3*requests, r[a.q].Value, r[a.q].SE, rn[a.q].Value, rn[a.q].SE)
		}
	}
}

// TestFanOutTailFormula checks the guide's formula for a fan-out of N
// independent leaves: P(request slower than x) = 1 - (1 - p)^N, where p
// is a leaf's probability of being slower than x. Unhedged leaves of the
// noise world at a very low load on a hundred servers are independent
// (each almost always finds its server idle: its latency is its own
// Exp(1) size). For N = 5 and 20 and x at the leaves' p90 and p99, the
// requests slower than x must match the formula, with p measured on the
// same run's leaves, within a binomial bound of three standard errors
// (of the requests' count and of p's estimate).
func TestFanOutTailFormula(t *testing.T) {
	for _, n := range []int{5, 20} {
		c := DefaultConfig()
		c.Servers, c.Load, c.Fanout, c.Requests, c.Warmup = 100, 0.02, n, 40_000, 1_000
		c.Seed = DeriveSeed(71, fmt.Sprint(n))
		var s Simulator
		if _, err := s.Run(c); err != nil {
			t.Fatal(err)
		}
		leaves := slices.Clone(s.e.unitLat)
		reqs := slices.Clone(s.e.lat)
		slices.Sort(leaves)
		for _, q := range []float64{0.9, 0.99} {
			x := leaves[int(q*float64(len(leaves)))]
			p := float64(len(leaves)-sortedAbove(leaves, x)) / float64(len(leaves)) // leaves slower than x
			want := 1 - math.Pow(1-p, float64(n))
			slower := 0
			for _, l := range reqs {
				if l > x {
					slower++
				}
			}
			got := float64(slower) / float64(len(reqs))
			m := float64(len(reqs))
			se := math.Sqrt(want*(1-want)/m) + float64(n)*math.Pow(1-p, float64(n-1))*math.Sqrt(p*(1-p)/float64(len(leaves)))
			t.Logf("N = %d, x = leaves' p%g = %.3f: p = %.4f, 1-(1-p)^N = %.4f, requests slower %.4f (%d of %d), bound ± %.4f",
				n, 100*q, x, p, want, got, slower, len(reqs), 3*se)
			if math.Abs(got-want) > 3*se {
				t.Errorf("N = %d, x = %.3f: %.4f of requests slower than x, the formula says %.4f ± %.4f", n, x, got, want, 3*se)
			}
		}
	}
}

// sortedAbove returns the index of the first value of the sorted xs above
// x.
func sortedAbove(xs []float64, x float64) int {
	i, _ := slices.BinarySearchFunc(xs, x, func(a, b float64) int {
		if a <= b {
			return -1
		}
		return 1
	})
	return i
}
