package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/bench"
)

// scrapeMetrics reads the text exposition at http://addr/metrics.
func scrapeMetrics(addr string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value returns the value of the series of family name with labels
// hedger and op (and path, if given), and whether it is there.
func value(fams map[string]*dto.MetricFamily, name, hedger, op string, extra ...string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		ok := got["hedger"] == hedger && got["op"] == op
		for i := 0; i+1 < len(extra); i += 2 {
			ok = ok && got[extra[i]] == extra[i+1]
		}
		if ok {
			return m, true
		}
	}
	return nil, false
}

// TestBenchMetrics runs a short HTTP bench with --metrics-addr, scrapes
// the metrics once after the comparison has ended (the server is still
// up: benchMetricsReady runs before it stops), and checks each
// configuration's series against what the bench itself reported.
func TestBenchMetrics(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var fams map[string]*dto.MetricFamily
	var scrapeErr error
	scraped := false
	benchMetricsReady = func(addr string) {
		scraped = true
		fams, scrapeErr = scrapeMetrics(addr)
	}
	defer func() { benchMetricsReady = nil }()

	dir := t.TempDir()
	configs := []string{"none-random", bench.DefaultStrategy}
	code, _, stderr := runCLI("bench", "--backend", "http", "--repeats", "1",
		"--requests", "300", "--rate", "300", "--warmup", "200ms",
		"--stall-share", "0.1", "--stall-length", "20ms", "--timeout", "1m",
		"--configs", strings.Join(configs, ","), "--reruns", "-1", "--out", dir,
		"--metrics-addr", "127.0.0.1:0")
	if code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stderr, "hedge bench: metrics on http://127.0.0.1:") {
		t.Errorf("the metrics address is not printed: %q", stderr)
	}
	if !scraped || scrapeErr != nil {
		t.Fatalf("scraped %v: %v", scraped, scrapeErr)
	}
	rep := readBenchReport(t, dir)
	runs := rep.Backends[0].Runs
	for _, cfg := range configs {
		i := slices.IndexFunc(runs, func(r bench.RunResult) bool { return r.Config == cfg })
		if i < 0 {
			t.Fatalf("no run of %s in results.json", cfg)
		}
		r := runs[i]
		get := func(name string, extra ...string) float64 {
			t.Helper()
			m, ok := value(fams, name, cfg, "http", extra...)
			if !ok {
				t.Fatalf("%s{hedger=%q,op=\"http\"} is missing", name, cfg)
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Summary != nil:
				return float64(m.Summary.GetSampleCount())
			}
			t.Fatalf("%s: no value", name)
			return 0
		}
		if got := get("hedge_bench_runs_total"); got != 1 {
			t.Errorf("%s: %v runs; want 1", cfg, got)
		}
		if got := get("hedge_bench_running"); got != 0 {
			t.Errorf("%s: running %v after the comparison; want 0", cfg, got)
		}
		requests := get("hedge_requests_total")
		// Warm-up requests are counted too; the measured ones are in
		// results.json.
		if requests < float64(r.Requests) || r.Requests < 250 {
			t.Errorf("%s: hedge_requests_total %v; results.json measured %d", cfg, requests, r.Requests)
		}
		// Two independent counts of the same calls: the Hedger's, and
		// the timing around each call of the client's Do.
		if got := get("hedge_latency_seconds", "path", "caller"); got != requests {
			t.Errorf("%s: %v calls timed; the Hedger counted %v", cfg, got, requests)
		}
		hedges := get("hedge_hedges_sent_total")
		measured := r.ExtraPct * float64(r.Requests) / 100
		if hedges < measured-0.5 {
			t.Errorf("%s: %v hedges sent; results.json measured %.0f in the measured span alone", cfg, hedges, measured)
		}
		if cfg == "none-random" && (hedges != 0 || get("hedge_hedge_wins_total") != 0 || get("hedge_wasted_work_seconds_total") != 0) {
			t.Errorf("none-random (MaxAttempts 1) hedged: %v hedges", hedges)
		}
		refused := get("hedge_hedges_refused_total", "reason", "budget")
		t.Logf("%s: %v calls (%d measured), %v hedges (%.0f in the measured span), %v refused by the budget", cfg, requests, r.Requests, hedges, measured, refused)
		if _, ok := value(fams, "hedge_delay_seconds", cfg, "http"); ok {
			t.Errorf("%s: a delay gauge between runs", cfg)
		}
	}
}
