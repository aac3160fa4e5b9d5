package lab

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tailcut/hedge/sim"
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
	for _, ch := range choices {
		if !seen[ch.name+"|"+ch.calib] {
			t.Errorf("choice %q (calib %q) is never selected", ch.name, ch.calib)
		}
		if ch.label == nil || (ch.note == nil) != (ch.strategy == sim.None || ch.strategy == sim.Tied) {
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

// With ten clients in the big-jobs world at 0.8, the library default
// raises the median; servers that run copies at low priority keep it.
func TestExploreClientsAndServersHelp(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	q := "runs=2&requests=50000&world=bigjobs&load=0.8&routing=two-choice&strategy=default&clients=10"
	without := explore(t, ts, q)
	with := explore(t, ts, q+"&help=low-priority")
	if without.Params.Clients != 10 || with.Params.Help != "low-priority" {
		t.Fatalf("params %+v, %+v", without.Params, with.Params)
	}
	if !strings.Contains(without.Config, "clients=10") || !strings.Contains(with.Config, "low-priority-copies=true") {
		t.Fatalf("configs %q, %q", without.Config, with.Config)
	}
	t.Logf("p50 of none's: %.3f without help, %.3f with low-priority copies; verdicts %+v, %+v", without.Gap.P50, with.Gap.P50, without.Verdict, with.Verdict)
	if without.Gap.P50 < 1.15 || with.Gap.P50 > 1.05 {
		t.Errorf("p50 of none's: %.3f without the servers' help, %.3f with low-priority copies: want above 1.15 and at most 1.05", without.Gap.P50, with.Gap.P50)
	}
	if without.Verdict.Tone != "bad" || !strings.Contains(without.Verdict.Title, "median") || !strings.Contains(without.Verdict.Text, "servers' help") {
		t.Errorf("verdict without help %+v: want a bad trade that names the median and the servers' help", without.Verdict)
	}
	if with.Verdict.Tone == "bad" {
		t.Errorf("verdict with low-priority copies %+v", with.Verdict)
	}
	if with.Baseline.P50 != without.Baseline.P50 {
		t.Errorf("the unhedged baseline moved with the servers' help: %v, %v", without.Baseline.P50, with.Baseline.P50)
	}
}
