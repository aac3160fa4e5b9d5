package hedgeprom_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgetest"
)

const ms = time.Millisecond

func mustNew(t *testing.T, cfg hedge.Config) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// workload drives two Hedgers through every counter the collector exports,
// on synctest's fake clock.
func workload(t *testing.T) map[string]*hedge.Hedger {
	budget, err := hedge.NewBudget(0.1, 1) // one hedge, then refusals
	if err != nil {
		t.Fatal(err)
	}
	// Plain hedging (no spare-capacity or payoff rule), so that each
	// counter below moves exactly as scripted.
	a := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: budget, MaxOps: 2, PayoffWinRate: -1})
	b := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, MaxAttempts: 3,
		Replicas: 2, MaxHedgesInFlight: 1, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
	ctx := context.Background()

	// a: a hedge wins (the primary is censored), then the budget refuses.
	hedge.Do(ctx, a, "get", hedgetest.Sleeper(50*ms, 5*ms))
	hedge.Do(ctx, a, "get", hedgetest.Sleeper(50*ms, 5*ms))
	hedge.Do(ctx, a, "get", hedgetest.Sleeper(3*ms, 3*ms)) // primary wins, no hedge due
	// a: the caller's deadline is closer than the delay.
	dctx, cancel := context.WithTimeout(ctx, 8*ms)
	hedge.Do(dctx, a, "put", hedgetest.Sleeper(2*ms))
	cancel()
	// a: a failure and an unhedgeable call.
	hedge.Do(ctx, a, "put", func(context.Context, hedge.Attempt) (int, error) {
		return 0, hedge.Permanent(errors.New("no"))
	})
	hedge.Do(hedge.NotIdempotent(ctx), a, "put", hedgetest.Sleeper(20*ms))
	// a: a third class shares hedge.OtherOp (MaxOps 2).
	hedge.Do(ctx, a, "raw/path/123", hedgetest.Sleeper(1*ms))
	// a: Shadow mode counts a hedge it does not send.
	if err := a.SetMode(hedge.Shadow); err != nil {
		t.Fatal(err)
	}
	hedge.Do(ctx, a, "get", hedgetest.Sleeper(30*ms))

	// b: both replicas busy by the third copy; two calls at once
	// contend for the single in-flight hedge slot.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { hedge.Do(ctx, b, "scan", hedgetest.Sleeper(40*ms, 35*ms, 1*ms)) })
	}
	wg.Wait()

	// d: the spare-capacity rule reads a replica's load, once from its
	// fresh report, once from d's own view.
	d := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Replicas: 2, PayoffWinRate: -1})
	hedge.Do(ctx, d, "get", hedgetest.Reporting(d, 5*ms, 40*ms, 1*ms))
	hedge.Do(ctx, d, "get", hedgetest.Sleeper(40*ms, 1*ms))

	// c: a rollout of one half keeps a control group (the holdout); the
	// other calls are hedged, and their primaries, deaf to cancellation,
	// run on to success after the hedge won: rescued, and time saved.
	c := hedgetest.Rescuing(t)
	time.Sleep(time.Second) // let the Hedgers' timer goroutines and the deaf primaries exit
	return map[string]*hedge.Hedger{"a": a, "b": b, "c": c, "d": d}
}

// nativeBuckets decodes the positive buckets of a native histogram: count
// by bucket index.
func nativeBuckets(h *dto.Histogram) map[int]uint64 {
	out := map[int]uint64{}
	i, d := 0, 0
	var n int64
	for _, sp := range h.GetPositiveSpan() {
		i += int(sp.GetOffset())
		for range sp.GetLength() {
			n += h.GetPositiveDelta()[d]
			d++
			if n != 0 {
				out[i] = uint64(n)
			}
			i++
		}
	}
	return out
}

// classicBuckets returns the cumulative counts of a histogram's classic
// buckets by upper bound.
func classicBuckets(h *dto.Histogram) map[float64]uint64 {
	out := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		out[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	return out
}

// series indexes gathered metrics by name and sorted label pairs.
type series map[string]*dto.Metric

func key(name string, labels ...string) string {
	return name + "{" + strings.Join(labels, ",") + "}"
}

func gather(t *testing.T, reg *prometheus.Registry) series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			slices.Sort(ls)
			out[key(mf.GetName(), ls...)] = m
		}
	}
	return out
}

func TestCollectorMatchesStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hedgers := workload(t)
		c, err := hedgeprom.New("hedge", hedgers)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gather(t, reg)

		var total hedge.Stats // the workload must exercise every counter
		n := 0
		for name, h := range hedgers {
			for _, s := range h.Stats() {
				ls := []string{"hedger=" + name, "op=" + s.Op}
				counter := func(metric string, want int64, extra ...string) {
					t.Helper()
					k := key(metric, slices.Sorted(slices.Values(append(slices.Clone(ls), extra...)))...)
					m, ok := got[k]
					if !ok {
						t.Errorf("%s missing", k)
						return
					}
					if v := m.GetCounter().GetValue(); v != float64(want) {
						t.Errorf("%s = %v, want %d", k, v, want)
					}
					n++
				}
				counter("hedge_requests_total", s.Requests)
				counter("hedge_hedges_sent_total", s.Hedges)
				counter("hedge_hedge_wins_total", s.HedgeWins)
				counter("hedge_primary_wins_total", s.PrimaryWins)
				counter("hedge_failures_total", s.Failures)
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedBudget], "reason=budget")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedInFlight], "reason=in_flight")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedBusy], "reason=busy")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedPayoff], "reason=payoff")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedFanOut], "reason=fan_out")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedHead], "reason=head")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedDeadline], "reason=deadline")
				counter("hedge_hedges_refused_total", s.Refused[hedge.RefusedReplicas], "reason=replicas")
				counter("hedge_load_views_total", s.LoadByReport, "view=report")
				counter("hedge_load_views_total", s.LoadByOwnView, "view=own_view")
				counter("hedge_shadow_hedges_total", s.ShadowHedges)
				counter("hedge_failovers_total", s.Failovers)
				counter("hedge_unhedgeable_requests_total", s.Unhedgeable)
				counter("hedge_primaries_censored_total", s.PrimaryCensored)
				counter("hedge_rescued_requests_total", s.Rescued)
				if k := key("hedge_saved_at_least_seconds_total", ls...); got[k].GetCounter().GetValue() != s.SavedAtLeast.Seconds() {
					t.Errorf("%s = %v, want %v", k, got[k].GetCounter().GetValue(), s.SavedAtLeast.Seconds())
				} else {
					n++
				}

				k := key("hedge_wasted_work_seconds_total", ls...)
				if v := got[k].GetCounter().GetValue(); v != s.WastedWork.Seconds() {
					t.Errorf("%s = %v, want %v", k, v, s.WastedWork.Seconds())
				}
				k = key("hedge_delay_seconds", ls...)
				if v := got[k].GetGauge().GetValue(); v != 0.010 {
					t.Errorf("%s = %v, want 0.01", k, v)
				}
				paths := map[string]hedge.Distribution{"caller": s.Latency, "primary": s.Primary, "hedge": s.HedgePath, "holdout": s.Holdout}
				for path, d := range paths {
					k := key("hedge_latency_distribution_seconds", "hedger="+name, "op="+s.Op, "path="+path)
					h := got[k].GetHistogram()
					if h == nil {
						t.Errorf("%s missing", k)
						continue
					}
					if h.GetSampleCount() != uint64(d.Count) || h.GetSampleSum() != d.Sum.Seconds() {
						t.Errorf("%s: count %d sum %v, want %d and %v", k, h.GetSampleCount(), h.GetSampleSum(), d.Count, d.Sum.Seconds())
					}
					if h.GetSchema() != hedgeprom.NativeSchema || h.GetZeroThreshold() != hedgeprom.NativeZeroThreshold {
						t.Errorf("%s: schema %d, zero threshold %v", k, h.GetSchema(), h.GetZeroThreshold())
					}
					native := h.GetZeroCount()
					for _, c := range nativeBuckets(h) {
						native += c
					}
					if native != uint64(d.Count) {
						t.Errorf("%s: native buckets hold %d values, want %d", k, native, d.Count)
					}
					bounds := hedgeprom.DefaultBuckets()
					if len(h.GetBucket()) != len(bounds) {
						t.Errorf("%s: %d classic buckets, want %d", k, len(h.GetBucket()), len(bounds))
					}
					// Cumulative counts: never decreasing, never above the
					// count. (TestHistogramMatchesClientGolang checks
					// each bucket.)
					var prev uint64
					for i, b := range h.GetBucket() {
						if b.GetUpperBound() != bounds[i] || b.GetCumulativeCount() < prev || b.GetCumulativeCount() > uint64(d.Count) {
							t.Errorf("%s: bucket %d le=%v holds %d (after %d) of %d values", k, i, b.GetUpperBound(), b.GetCumulativeCount(), prev, d.Count)
						}
						prev = b.GetCumulativeCount()
					}
				}
				summaries := map[string]hedge.Distribution{}
				for path, d := range paths {
					summaries[key("hedge_latency_seconds", "hedger="+name, "op="+s.Op, "path="+path)] = d
				}
				summaries[key("hedge_timer_lag_seconds", ls...)] = s.TimerLag
				for k, d := range summaries {
					sum := got[k].GetSummary()
					if sum == nil {
						t.Errorf("%s missing", k)
						continue
					}
					if sum.GetSampleCount() != uint64(d.Count) {
						t.Errorf("%s count = %d, want %d", k, sum.GetSampleCount(), d.Count)
					}
					if want := d.Sum.Seconds(); sum.GetSampleSum() != want {
						t.Errorf("%s sum = %v, want %v", k, sum.GetSampleSum(), want)
					}
					want := map[float64]time.Duration{0.5: d.P50, 0.9: d.P90, 0.99: d.P99, 0.999: d.P999}
					if len(sum.GetQuantile()) != len(want) {
						t.Errorf("%s has %d quantiles, want %d", k, len(sum.GetQuantile()), len(want))
					}
					for _, q := range sum.GetQuantile() {
						v := q.GetValue()
						if d.Count == 0 && !math.IsNaN(v) || d.Count > 0 && v != want[q.GetQuantile()].Seconds() {
							t.Errorf("%s quantile %v = %v, want %v (n=%d)", k, q.GetQuantile(), v, want[q.GetQuantile()], d.Count)
						}
					}
				}
				total.Requests += s.Requests
				total.HedgeWins += s.HedgeWins
				total.Refused[hedge.RefusedBudget] += s.Refused[hedge.RefusedBudget]
				total.Refused[hedge.RefusedInFlight] += s.Refused[hedge.RefusedInFlight]
				total.Refused[hedge.RefusedDeadline] += s.Refused[hedge.RefusedDeadline]
				total.Refused[hedge.RefusedReplicas] += s.Refused[hedge.RefusedReplicas]
				total.ShadowHedges += s.ShadowHedges
				total.LoadByReport += s.LoadByReport
				total.LoadByOwnView += s.LoadByOwnView
				total.Unhedgeable += s.Unhedgeable
				total.PrimaryCensored += s.PrimaryCensored
				total.Failures += s.Failures
				total.WastedWork += s.WastedWork
				total.Rescued += s.Rescued
				total.SavedAtLeast += s.SavedAtLeast
				total.Holdout.Count += s.Holdout.Count
				total.TimerLag.Count += s.TimerLag.Count
			}
		}
		if total.Requests != 12+hedgers["c"].OpStats("get").Requests || total.Rescued == 0 || total.SavedAtLeast == 0 || total.Holdout.Count == 0 || total.TimerLag.Count == 0 || total.HedgeWins == 0 || total.Refused[hedge.RefusedBudget] == 0 || total.Refused[hedge.RefusedInFlight] == 0 ||
			total.Refused[hedge.RefusedDeadline] == 0 || total.Refused[hedge.RefusedReplicas] == 0 || total.ShadowHedges == 0 || total.Unhedgeable == 0 ||
			total.LoadByReport == 0 || total.LoadByOwnView == 0 ||
			total.PrimaryCensored == 0 || total.Failures == 0 || total.WastedWork == 0 {
			t.Errorf("workload missed a counter: %+v (load by report %d, by own view %d)", total, total.LoadByReport, total.LoadByOwnView)
		}
		if _, ok := got[key("hedge_requests_total", "hedger=a", "op="+hedge.OtherOp)]; !ok {
			t.Errorf("op beyond MaxOps not exported as %q", hedge.OtherOp)
		}
		// Budget: a's ratio budget is exported, b has none.
		if v, want := got[key("hedge_budget_tokens", "hedger=a")].GetGauge().GetValue(), hedgers["a"].Budget().Tokens(); v != want {
			t.Errorf("budget tokens = %v, want %v", v, want)
		}
		if _, ok := got[key("hedge_budget_tokens", "hedger=b")]; ok {
			t.Error("unlimited budget exported")
		}
		ops := 0
		for _, h := range hedgers {
			ops += len(h.Stats())
		}
		if n != 21*ops {
			t.Errorf("checked %d counter series, want 21 per op, %d", n, 21*ops)
		}
		if got := testutil.CollectAndCount(c, "hedge_requests_total"); got != ops {
			t.Errorf("CollectAndCount(requests) = %d, want %d", got, ops)
		}
	})
}

func TestDelayNeverOmitted(t *testing.T) {
	h := mustNew(t, hedge.Config{}) // live p95: Never until warmed up
	hedge.Do(context.Background(), h, "get", func(context.Context, hedge.Attempt) (int, error) { return 1, nil })
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"x": h})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "hedge_delay_seconds"); n != 0 {
		t.Errorf("%d delay series while the delay is Never, want 0", n)
	}
	if n := testutil.CollectAndCount(c, "hedge_requests_total"); n != 1 {
		t.Errorf("%d request series, want 1", n)
	}
}

func TestLint(t *testing.T) {
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	hedge.Do(context.Background(), h, "get", func(context.Context, hedge.Attempt) (int, error) { return 1, nil })
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"x": h})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestHTTPExposition(t *testing.T) {
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	ctx := context.Background()
	for range 3 {
		hedge.Do(ctx, h, "get", func(context.Context, hedge.Attempt) (int, error) { return 1, nil })
	}
	hedge.Do(ctx, h, "get", func(context.Context, hedge.Attempt) (int, error) { return 0, hedge.Permanent(errors.New("no")) })
	hedge.Do(hedge.NotIdempotent(ctx), h, "put", func(context.Context, hedge.Attempt) (int, error) { return 1, nil })

	c, err := hedgeprom.New("myapp_hedge", map[string]*hedge.Hedger{"items": h})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, line := range []string{
		"# TYPE myapp_hedge_requests_total counter",
		`myapp_hedge_requests_total{hedger="items",op="get"} 4`,
		`myapp_hedge_requests_total{hedger="items",op="put"} 1`,
		`myapp_hedge_primary_wins_total{hedger="items",op="get"} 3`,
		`myapp_hedge_failures_total{hedger="items",op="get"} 1`,
		`myapp_hedge_hedges_sent_total{hedger="items",op="get"} 0`,
		`myapp_hedge_hedges_refused_total{hedger="items",op="get",reason="budget"} 0`,
		`myapp_hedge_unhedgeable_requests_total{hedger="items",op="put"} 1`,
		`myapp_hedge_delay_seconds{hedger="items",op="get"} 3600`,
		`myapp_hedge_budget_tokens{hedger="items"} 10`,
		"# TYPE myapp_hedge_latency_seconds summary",
		`myapp_hedge_latency_seconds_count{hedger="items",op="get",path="caller"} 4`,
		`myapp_hedge_latency_seconds_count{hedger="items",op="get",path="hedge"} 0`,
		`myapp_hedge_latency_seconds{hedger="items",op="get",path="hedge",quantile="0.5"} NaN`,
		`myapp_hedge_latency_seconds_count{hedger="items",op="get",path="holdout"} 0`,
		`myapp_hedge_rescued_requests_total{hedger="items",op="get"} 0`,
		`myapp_hedge_saved_at_least_seconds_total{hedger="items",op="get"} 0`,
		// The text format carries the classic buckets of the histograms.
		"# TYPE myapp_hedge_latency_distribution_seconds histogram",
		`myapp_hedge_latency_distribution_seconds_bucket{hedger="items",op="get",path="caller",le="10"} 4`,
		`myapp_hedge_latency_distribution_seconds_bucket{hedger="items",op="get",path="caller",le="+Inf"} 4`,
		`myapp_hedge_latency_distribution_seconds_count{hedger="items",op="get",path="caller"} 4`,
		`myapp_hedge_latency_distribution_seconds_bucket{hedger="items",op="get",path="holdout",le="0.0005"} 0`,
		`myapp_hedge_latency_distribution_seconds_count{hedger="items",op="put",path="primary"} 1`,
	} {
		if !slices.Contains(strings.Split(text, "\n"), line) {
			t.Errorf("exposition lacks line %q", line)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

func TestNewValidates(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	for _, tc := range []struct {
		ns      string
		hedgers map[string]*hedge.Hedger
		want    string
	}{
		{"", map[string]*hedge.Hedger{"a": h}, "namespace"},
		{"1x", map[string]*hedge.Hedger{"a": h}, "namespace"},
		{"my-app", map[string]*hedge.Hedger{"a": h}, "namespace"},
		{"hedge", nil, "no hedgers"},
		{"hedge", map[string]*hedge.Hedger{"": h}, "empty name"},
		{"hedge", map[string]*hedge.Hedger{"a": nil}, `"a" is nil`},
		{"hedge", map[string]*hedge.Hedger{"a": h, "b": h}, `"a" and "b" are the same`},
		{"hedge", map[string]*hedge.Hedger{"\xff": h}, "UTF-8"},
	} {
		_, err := hedgeprom.New(tc.ns, tc.hedgers)
		if !errors.Is(err, hedgeprom.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %v) = %v, want ErrInvalid mentioning %q", tc.ns, tc.hedgers, err, tc.want)
		}
	}
}
