package hedgeprom_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/hedgewatch"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
	"github.com/tailcut/hedge/internal/hedgetest"
)

// dashboardFile is the Grafana dashboard made for this package's metrics.
const dashboardFile = "../docs/grafana/hedge-dashboard.json"

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			RefID        string `json:"refId"`
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t testing.TB) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	if !json.Valid(data) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	return d
}

// exportedNames gathers a collector that exports every series it can
// (a budget, a fixed delay, a hedge that won, a watcher, replicas,
// shards, a tied client and server) and returns the names PromQL can select: each
// family's name, and _sum and _count of the summaries.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		hedge.Do(context.Background(), h, "get", hedgetest.Sleeper(50*ms, 5*ms))
		w, err := hedgewatch.New(h, hedgewatch.Config{})
		if err != nil {
			t.Fatal(err)
		}
		tt := settest.TiedTraffic(t)
		defer tt.Release()
		sharded := mustNew(t, hedge.Config{Replicas: 4, Shards: hedge.ShardGrid(2, 2)})
		hedge.DoShard(context.Background(), sharded, "get", 1, hedgetest.Sleeper(1*ms))
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h, "replicas": settest.Replicas(t, 10), "shards": sharded}, hedgeprom.WithWatcher("items", w),
			hedgeprom.WithTiedClient("front", tt.Client), hedgeprom.WithTiedServer("items", tt.Server))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			names[mf.GetName()] = true
			switch mf.GetType() {
			case dto.MetricType_SUMMARY:
				names[mf.GetName()+"_sum"] = true
				names[mf.GetName()+"_count"] = true
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				names[mf.GetName()+"_sum"] = true
				names[mf.GetName()+"_count"] = true
				names[mf.GetName()+"_bucket"] = true
			}
		}
		time.Sleep(time.Second) // the Hedger's timer goroutine lingers
	})
	return names
}

var (
	// promqlStrings are string literals; promqlBraces label matchers;
	// promqlRanges range and subquery selectors; promqlGrouping the
	// label lists of by, without, on, ignoring, group_left and
	// group_right; promqlVars Grafana's variables.
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlVars     = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlDuration = regexp.MustCompile(`\b(?:\d+(?:ms|[smhdwy]))+\b`)
	promqlNumber   = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b`)
	promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "atan2", "Inf", "NaN", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges, grouping label
// lists, variables, durations and numbers are removed, that are neither a keyword nor
// a function (an identifier followed by an opening parenthesis).
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlVars.ReplaceAllString(e, " 1 ")
	e = promqlBraces.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = promqlDuration.ReplaceAllString(e, " ")
	e = promqlNumber.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promqlKeywords, id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (hedger, op) (rate(a_total{x="y{z}"}[5m])) / on (hedger) group_left (op) b`, []string{"a_total", "b"}},
		{`vector($budget_ratio) * 2 > bool 1e3`, nil},
		{`max without(path) (c{path=~"caller|primary"}) unless d offset 5m`, []string{"c", "d"}},
		{`histogram_quantile(0.99, sum by (le) (rate(e_bucket[${__rate_interval}])))`, []string{"e_bucket"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q; want %q", c.expr, got, c.want)
		}
	}
}

// TestDashboardUsesExportedMetrics: the dashboard is valid JSON, has the
// panels an operator needs, and every metric name its PromQL selects is
// one this package exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	d := loadDashboard(t)
	exported := exportedNames(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard without uid or title: %q %q", d.UID, d.Title)
	}
	var titles []string
	used := map[string]bool{}
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricNames(tg.Expr)
			if len(names) == 0 && !strings.HasPrefix(tg.Expr, "vector(") {
				t.Errorf("panel %q, query %s: no metric name in %q", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !exported[n] {
					t.Errorf("panel %q, query %s: %s is not a metric hedgeprom exports", p.Title, tg.RefID, n)
				}
			}
		}
	}
	for _, want := range []string{"Hedge rate against budget", "Win rate", "p99 with and without hedging", "Hedge-path latency",
		"Wasted work", "Refusals by reason", "Alarm state", "With vs without hedging (holdout)", "Rescues", "Replicas", "Mode and rollout"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q among %q", want, titles)
		}
	}
	for _, must := range []string{"hedge_hedges_sent_total", "hedge_requests_total", "hedge_hedge_wins_total", "hedge_latency_seconds",
		"hedge_wasted_work_seconds_total", "hedge_hedges_refused_total", "hedge_watch_alarmed", "hedge_watch_shadowed",
		"hedge_latency_distribution_seconds", "hedge_rescued_requests_total", "hedge_saved_at_least_seconds_total",
		"hedge_replica_latency_recent_seconds", "hedge_replica_errors_total", "hedge_replica_copies_total", "hedge_replica_probation",
		"hedge_mode", "hedge_rollout"} {
		if !used[must] {
			t.Errorf("the dashboard never queries %s", must)
		}
	}
	// With and without hedging is caller against holdout; the primary,
	// censored, is never drawn as the latency without hedging.
	for _, p := range d.Panels {
		if p.Title != "p99 with and without hedging" {
			continue
		}
		paths := map[string]bool{}
		for _, tg := range p.Targets {
			for _, path := range []string{"caller", "primary", "holdout"} {
				if strings.Contains(tg.Expr, `path="`+path+`"`) {
					paths[path] = true
					if path == "primary" && !strings.Contains(tg.LegendFormat, "primary alone (censored)") {
						t.Errorf("panel %q, query %s: the primary is drawn as %q; label it \"primary alone (censored)\"", p.Title, tg.RefID, tg.LegendFormat)
					}
					if path == "holdout" && !strings.Contains(tg.LegendFormat, "without hedging") {
						t.Errorf("panel %q, query %s: the holdout is drawn as %q, not as the latency without hedging", p.Title, tg.RefID, tg.LegendFormat)
					}
				}
			}
		}
		if !paths["caller"] || !paths["holdout"] {
			t.Errorf("panel %q does not draw path=caller against path=holdout", p.Title)
		}
	}
	for _, v := range d.Templating.List {
		if v.Name != "hedger" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil || !strings.Contains(q.Query, "hedge_requests_total") {
			t.Errorf("the hedger variable's query %s does not read hedge_requests_total", v.Query)
		}
	}
}
