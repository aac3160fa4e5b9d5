package lab

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tailcut/hedge/internal/sim"
)

// Each strategy choice runs the simulator strategy it names, through the
// one table, and every row of the table is reachable.
func TestChoices(t *testing.T) {
	if want := []string{"none", "fixed", "percentile", "live", "budget", "default"}; !slices.Equal(exploreStrategies, want) {
		t.Errorf("strategies %v, want %v", exploreStrategies, want)
	}
	type want struct{ run, calibration sim.Strategy }
	for _, tc := range []struct {
		strategy, calib string
		want            want
	}{
		{"none", "quiet", want{sim.None, sim.None}},
		{"fixed", "load", want{sim.HedgeFixed, sim.None}},
		{"percentile", "quiet", want{sim.HedgeP95Quiet, sim.HedgeP95Quiet}},
		{"percentile", "load", want{sim.HedgeP95PerLoad, sim.HedgeP95PerLoad}},
		{"live", "quiet", want{sim.HedgeP95Live, sim.None}},
		{"budget", "quiet", want{sim.HedgeQuietBudget, sim.HedgeQuietBudget}},
		{"budget", "load", want{sim.HedgeQuietBudget, sim.HedgeP95PerLoad}},
		{"default", "load", want{sim.Default, sim.None}},
	} {
		p := DefaultExploreParams()
		p.Strategy, p.Calibration = tc.strategy, tc.calib
		c, ch := p.config()
		got := want{c.Strategy, sim.None}
		if ch.calibrated() {
			got.calibration = ch.calibration()
		}
		if got != tc.want || ch.name != tc.strategy {
			t.Errorf("strategy=%s calib=%s: runs %v calibrated as %v (choice %q), want %v calibrated as %v",
				tc.strategy, tc.calib, got.run, got.calibration, ch.name, tc.want.run, tc.want.calibration)
		}
		p.Tied = true
		if c, ch := p.config(); c.Strategy != sim.Tied || ch.name != "tied" {
			t.Errorf("strategy=%s&tied=true runs %v, want tied", tc.strategy, c.Strategy)
		}
		p.Help, p.Routing = "idle-only", sim.TwoChoice.String() // the servers' help needs a queue per server
		if c, ch := p.config(); c.Strategy != sim.TiedSpare || ch.name != "tied-spare" || c.IdleOnlyCopies || c.Validate() != nil {
			t.Errorf("strategy=%s&tied=true&help=idle-only runs %v (idle-only copies %v, %v), want tied-spare", tc.strategy, c.Strategy, c.IdleOnlyCopies, c.Validate())
		}
	}
	seen := map[string]bool{}
	for _, s := range exploreStrategies {
		for _, calib := range exploreCalibs {
			for _, tied := range []bool{false, true} {
				p := DefaultExploreParams()
				p.Strategy, p.Calibration, p.Tied = s, calib, tied
				ch := p.choice()
				seen[ch.name+"|"+ch.calib] = true
				if c, _ := p.config(); c.Validate() != nil {
					t.Errorf("strategy=%s calib=%s tied=%v: %v", s, calib, tied, c.Validate())
				}
			}
		}
	}
	p := DefaultExploreParams()
	p.Tied, p.Help, p.Routing = true, "idle-only", sim.TwoChoice.String()
	seen[p.choice().name+"|"] = true
	for _, ch := range choices {
		if !seen[ch.name+"|"+ch.calib] {
			t.Errorf("choice %q (calib %q) is never selected", ch.name, ch.calib)
		}
		if ch.label == nil || (ch.note == nil) != (ch.strategy == sim.None || ch.strategy == sim.Tied || ch.strategy == sim.TiedSpare) {
			t.Errorf("choice %q: label or note missing", ch.name)
		}
	}
}

// The lab calibrates as "hedge sim" and "hedge study" do: at p95 its delay
// is sim.Calibrate's for the strategy it runs, with sim's seed rule. The
// budget at this load borrows the per-load calibration, from the cache.
func TestCalibrationIsSims(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, q := range []string{"strategy=percentile&calib=quiet", "strategy=percentile&calib=load&load=0.7", "strategy=budget&calib=quiet&seed=9"} {
		r := explore(t, ts, small+"&"+q)
		hc, _ := r.Params.config()
		d, err := sim.Calibrate(context.Background(), hc, calibrationRuns, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := sim.Units(d); r.Delay != want || !(want > 0) {
			t.Errorf("%s: delay %v, sim.Calibrate says %v", q, r.Delay, want)
		}
	}
	perLoad := explore(t, ts, small+"&strategy=percentile&calib=load&load=0.7")
	budget := explore(t, ts, small+"&strategy=budget&calib=load&load=0.7")
	if budget.Delay != perLoad.Delay || budget.Simulated != 2*5000 {
		t.Errorf("budget at this load: delay %v, want the per-load %v; simulated %d, want 10000 (calibration and baseline cached)",
			budget.Delay, perLoad.Delay, budget.Simulated)
	}
	p99 := explore(t, ts, small+"&strategy=percentile&calib=load&load=0.7&p=99")
	if !(p99.Delay > perLoad.Delay) || p99.Simulated != 2*5000 {
		t.Errorf("p99 at this load: delay %v (p95 %v), simulated %d, want 10000", p99.Delay, perLoad.Delay, p99.Simulated)
	}
}

// The library default hedges after the live p95 of primaries within its
// 10% budget (burst 10): where a quiet-day p95 without cancellation
// collapses (TestExploreCollapseWarning), the budget holds the extra
// attempts.
func TestExploreDefault(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	r := explore(t, ts, "runs=2&requests=20000&load=0.85&cancel=false&strategy=default")
	if measured := 18000.0; r.ExtraAttempts > 0.1+10/measured {
		t.Errorf("extra attempts %v, over the 10%% budget", r.ExtraAttempts)
	}
	if !(r.Delay > 0) || r.Delay != r.Hedged.MeanDelay || !strings.HasPrefix(r.Label, "the library default (p95 of the last 1000 primary latencies") {
		t.Errorf("delay %v (mean in force %v), label %q", r.Delay, r.Hedged.MeanDelay, r.Label)
	}
	if r.Verdict.Tone == "collapse" {
		t.Errorf("verdict %+v", r.Verdict)
	}
}

// The cache key holds exactly the parameters that matter: those of the
// chosen strategy, not of the others.
func TestExploreKey(t *testing.T) {
	with := func(f func(*ExploreParams)) ExploreParams {
		p := DefaultExploreParams()
		f(&p)
		return p
	}
	for _, tc := range []struct {
		what string
		a, b func(*ExploreParams)
		same bool
	}{
		{"delay under percentile", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Delay = 7 }, true},
		{"livep and budget under percentile", func(p *ExploreParams) {}, func(p *ExploreParams) { p.LiveP, p.Budget = 99, 50 }, true},
		{"p and calib under default", func(p *ExploreParams) { p.Strategy = "default" },
			func(p *ExploreParams) { p.Strategy, p.Percentile, p.Calibration = "default", "99", "load" }, true},
		{"cancel under none", func(p *ExploreParams) { p.Strategy = "none" }, func(p *ExploreParams) { p.Strategy, p.Cancel = "none", false }, true},
		{"sigma outside lognormal", func(p *ExploreParams) { p.World = "noise" }, func(p *ExploreParams) { p.World, p.Sigma = "noise", 2 }, true},
		{"strategy under tied", func(p *ExploreParams) { p.Tied = true }, func(p *ExploreParams) { p.Tied, p.Strategy = true, "live" }, true},
		{"p under percentile", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Percentile = "99" }, false},
		{"calib under budget", func(p *ExploreParams) { p.Strategy = "budget" }, func(p *ExploreParams) { p.Strategy, p.Calibration = "budget", "load" }, false},
		{"budget under budget", func(p *ExploreParams) { p.Strategy = "budget" }, func(p *ExploreParams) { p.Strategy, p.Budget = "budget", 6 }, false},
		{"livep under live", func(p *ExploreParams) { p.Strategy = "live" }, func(p *ExploreParams) { p.Strategy, p.LiveP = "live", 99 }, false},
		{"delay under fixed", func(p *ExploreParams) { p.Strategy, p.Delay = "fixed", 2.00001 }, func(p *ExploreParams) { p.Strategy, p.Delay = "fixed", 2.00002 }, false},
		{"cancel under default", func(p *ExploreParams) { p.Strategy = "default" }, func(p *ExploreParams) { p.Strategy, p.Cancel = "default", false }, false},
		{"sigma in lognormal", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Sigma = 2 }, false},
		{"tied", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Tied = true }, false},
		{"default or live", func(p *ExploreParams) { p.Strategy = "default" }, func(p *ExploreParams) { p.Strategy = "live" }, false},
		{"seed", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Seed = 2 }, false},
		{"runs", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Runs = 3 }, false},
		{"requests", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Requests = 5000 }, false},
		{"width", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Width = 10 }, false},
		{"need and fancall without a fan-out", func(p *ExploreParams) {}, func(p *ExploreParams) { p.Need, p.FanCall = 1, false }, true},
		{"need all, or 0", func(p *ExploreParams) { p.Width = 10 }, func(p *ExploreParams) { p.Width, p.Need = 10, 10 }, true},
		{"need", func(p *ExploreParams) { p.Width = 10 }, func(p *ExploreParams) { p.Width, p.Need = 10, 8 }, false},
		{"fancall under a fan-out", func(p *ExploreParams) { p.Width = 10 }, func(p *ExploreParams) { p.Width, p.FanCall = 10, false }, false},
		{"fancall under none", func(p *ExploreParams) { p.Width, p.Strategy = 10, "none" },
			func(p *ExploreParams) { p.Width, p.Strategy, p.FanCall = 10, "none", false }, true},
		{"fancall under tied", func(p *ExploreParams) { p.Width, p.Tied = 10, true },
			func(p *ExploreParams) { p.Width, p.Tied, p.FanCall = 10, true, false }, true},
	} {
		a, b := with(tc.a), with(tc.b)
		if same := a.key() == b.key(); same != tc.same {
			t.Errorf("%s: same key %v, want %v:\n%s\n%s", tc.what, same, tc.same, a.key(), b.key())
		}
	}
}

// Delays that sim.Config.String prints alike are distinct points: the
// point cache keys every field in full.
func TestDistinctDelays(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	explore(t, ts, small+"&strategy=fixed&delay=2.00001")
	r := explore(t, ts, small+"&strategy=fixed&delay=2.00002")
	if r.Simulated != 2*5000 || r.Delay != 2.00002 {
		t.Errorf("simulated %d (want 10000: the hedged runs), delay %v", r.Simulated, r.Delay)
	}
}

// With ten clients in the big-jobs world at 0.8, a plain live p95 raises
// the median, and the verdict says so and names the servers' help;
// servers that run copies at low priority keep it. The library default
// keeps it without their help.
func TestExploreClientsAndServersHelp(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	q := "runs=2&requests=50000&world=bigjobs&load=0.8&routing=two-choice&clients=10"
	without := explore(t, ts, q+"&strategy=live&livep=95")
	with := explore(t, ts, q+"&strategy=live&livep=95&help=low-priority")
	def := explore(t, ts, q+"&strategy=default")
	if without.Params.Clients != 10 || with.Params.Help != "low-priority" {
		t.Fatalf("params %+v, %+v", without.Params, with.Params)
	}
	if !strings.Contains(without.Config, "clients=10") || !strings.Contains(with.Config, "low-priority-copies=true") {
		t.Fatalf("configs %q, %q", without.Config, with.Config)
	}
	t.Logf("p50 of none's: live p95 %.3f without help, %.3f with low-priority copies; default %.3f; verdicts %+v, %+v, %+v", without.Gap.P50, with.Gap.P50, def.Gap.P50, without.Verdict, with.Verdict, def.Verdict)
	if without.Gap.P50 < 1.15 || with.Gap.P50 > 1.05 {
		t.Errorf("live p95's p50 of none's: %.3f without the servers' help, %.3f with low-priority copies: want above 1.15 and at most 1.05", without.Gap.P50, with.Gap.P50)
	}
	if without.Verdict.Tone != "bad" || !strings.Contains(without.Verdict.Title, "median") || !strings.Contains(without.Verdict.Text, "servers' help") {
		t.Errorf("verdict without help %+v: want a bad trade that names the median and the servers' help", without.Verdict)
	}
	if with.Verdict.Tone == "bad" {
		t.Errorf("verdict with low-priority copies %+v", with.Verdict)
	}
	if def.Gap.P50 > 1.05 || def.Verdict.Tone == "bad" {
		t.Errorf("the default with ten clients: p50 %.3f of none's, verdict %+v; want at most 1.05, not bad", def.Gap.P50, def.Verdict)
	}
	if with.Baseline.P50 != without.Baseline.P50 {
		t.Errorf("the unhedged baseline moved with the servers' help: %v, %v", without.Baseline.P50, with.Baseline.P50)
	}
}

// A fan-out answers with its leaves' percentiles and the copies per
// request on both sides, and the fan-out call's numbers only where the
// call ran; a request that waits for all its leaves is no faster than
// its median leaf.
func TestExploreFanOut(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	q := "runs=2&requests=2000&world=stalls&load=0.3&routing=two-choice&width=10"
	for _, tc := range []struct {
		query   string
		call    bool // the hedged side ran the fan-out call
		verdict string
	}{
		{q + "&strategy=default", true, "all 10 of its leaves"},
		{q + "&strategy=default&fancall=false", false, "1 − 0.99^10"},
		{q + "&strategy=fixed&delay=3&need=8", true, "first 8 of its 10 leaves"},
		{q + "&strategy=none", false, "One copy per leaf"},
		{q + "&tied=true", false, "all 10"},
	} {
		code, _, body := get(t, ts, "/api/explore?"+tc.query)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, code, body)
		}
		var r ExploreResponse
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		b, h := r.Baseline.Fan, r.Hedged.Fan
		if b == nil || h == nil || r.Gap.Leaf == nil {
			t.Fatalf("%s: no fan-out measures: %+v, %+v, gap %+v", tc.query, b, h, r.Gap.Leaf)
		}
		if b.Copies != 10 {
			t.Errorf("%s: unhedged copies per request %v, want the width, 10", tc.query, b.Copies)
		}
		if h.Copies < 10 || (r.Params.Tied && h.Copies != 20) {
			t.Errorf("%s: hedged copies per request %v", tc.query, h.Copies)
		}
		for _, m := range []Measures{r.Baseline, r.Hedged} {
			if f := m.Fan; !(f.LeafP50 > 0 && f.LeafP50 <= f.LeafP99 && f.LeafP99 <= f.LeafP999) {
				t.Errorf("%s: leaf percentiles out of order: %+v", tc.query, f)
			}
			if r.Params.Need == 0 && m.P50 < m.Fan.LeafP50 {
				t.Errorf("%s: a request that waits for all its leaves has p50 %v below the leaves' %v", tc.query, m.P50, m.Fan.LeafP50)
			}
		}
		if b.Call != nil || (h.Call != nil) != tc.call || strings.Contains(r.Config, "fan-call") != tc.call {
			t.Errorf("%s: fan-out call's measures %+v, %+v, config %q: want them only on the hedged side with the call (%v)", tc.query, b.Call, h.Call, r.Config, tc.call)
		}
		if n := strings.Count(string(body), `"call":`); n != map[bool]int{true: 1, false: 0}[tc.call] {
			t.Errorf("%s: %d fan-out call objects in the answer", tc.query, n)
		}
		if h.Call != nil && !(h.Call.Extra >= 0 && h.Call.Refused >= 0 && h.Call.Peak >= 0 && math.Abs(h.Copies-10-h.Call.Extra) < 1e-9) {
			t.Errorf("%s: fan-out call %+v with %v copies per request", tc.query, h.Call, h.Copies)
		}
		if !strings.Contains(r.Config, "fanout=10") || !strings.Contains(r.Verdict.Text, tc.verdict) {
			t.Errorf("%s: config %q, verdict %q: want the width and %q", tc.query, r.Config, r.Verdict.Text, tc.verdict)
		}
	}
	// A calibrated delay is a percentile of leaf latency, not of request
	// latency: the leaf is what is hedged.
	r := explore(t, ts, q+"&strategy=percentile&calib=load&p=99")
	c := r.Params.baseConfig()
	c.Strategy = r.Params.choice().calibration()
	cal, err := sim.RunPoint(context.Background(), sim.CalibrationConfig(c), calibrationRuns, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.DelayNote, "leaf latency") || math.Abs(r.Delay-cal.LeafP99.Value) > 1e-6 || cal.LeafP99.Value >= cal.P99.Value {
		t.Errorf("delay %v (%q): want the calibration's leaf p99 %v, below its request p99 %v", r.Delay, r.DelayNote, cal.LeafP99.Value, cal.P99.Value)
	}
	// Without a fan-out there is no fan-out in the answer.
	code, _, body := get(t, ts, "/api/explore?runs=2&requests=2000&strategy=default&fancall=true")
	if code != http.StatusOK || strings.Contains(string(body), `"fan"`) || strings.Contains(string(body), `"leaf"`) {
		t.Errorf("width 1: %d, fan-out measures in %.300s", code, body)
	}
}
