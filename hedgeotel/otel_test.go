package hedgeotel_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgetest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
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

// workload drives Hedgers through every counter exported, on synctest's
// fake clock. Hedger "c" keeps its default live delay, still warming up
// (Never), and has no budget.
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
	c := mustNew(t, hedge.Config{NoBudget: true, PayoffWinRate: -1})
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

	// b: both replicas busy by the third copy; two calls at once contend
	// for the single in-flight hedge slot.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { hedge.Do(ctx, b, "scan", hedgetest.Sleeper(40*ms, 35*ms, 1*ms)) })
	}
	wg.Wait()

	// e: the spare-capacity rule reads a replica's load, once from its
	// fresh report, once from e's own view.
	e := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Replicas: 2, PayoffWinRate: -1})
	hedge.Do(ctx, e, "get", hedgetest.Reporting(e, 5*ms, 40*ms, 1*ms))
	hedge.Do(ctx, e, "get", hedgetest.Sleeper(40*ms, 1*ms))

	// c: warming up, never hedges.
	hedge.Do(ctx, c, "get", hedgetest.Sleeper(7*ms))

	// d: a rollout of one half keeps a control group (the holdout); the
	// other calls are hedged, and their primaries, deaf to cancellation,
	// run on to success after the hedge won: rescued, and time saved.
	d := hedgetest.Rescuing(t)

	time.Sleep(time.Second) // let the Hedgers' timer goroutines exit
	return map[string]*hedge.Hedger{"a": a, "b": b, "c": c, "d": d, "e": e}
}

// point is one collected data point.
type point struct {
	value float64
	unit  string
	kind  string // "counter" or "gauge"
}

// points indexes collected data points by instrument name and sorted
// attributes, as "name{k=v,...}".
type points map[string]point

func key(name string, attrs ...string) string {
	attrs = slices.Sorted(slices.Values(attrs))
	return name + "{" + strings.Join(attrs, ",") + "}"
}

func setKey(name string, s attribute.Set) string {
	var attrs []string
	for _, kv := range s.ToSlice() {
		attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
	}
	return key(name, attrs...)
}

func collect(t *testing.T, r *sdkmetric.ManualReader) points {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := points{}
	add := func(k string, p point) {
		if _, dup := out[k]; dup {
			t.Errorf("%s observed twice", k)
		}
		out[k] = p
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: monotonic %v, temporality %v", m.Name, d.IsMonotonic, d.Temporality)
				}
				for _, dp := range d.DataPoints {
					add(setKey(m.Name, dp.Attributes), point{float64(dp.Value), m.Unit, "counter"})
				}
			case metricdata.Sum[float64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: monotonic %v, temporality %v", m.Name, d.IsMonotonic, d.Temporality)
				}
				for _, dp := range d.DataPoints {
					add(setKey(m.Name, dp.Attributes), point{dp.Value, m.Unit, "counter"})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					add(setKey(m.Name, dp.Attributes), point{dp.Value, m.Unit, "gauge"})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(setKey(m.Name, dp.Attributes), point{float64(dp.Value), m.Unit, "gauge"})
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func TestRegisterMatchesStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hedgers := workload(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		reg, err := hedgeotel.Register(mp.Meter("github.com/tailcut/hedge"), hedgers)
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, reader)

		want := points{}
		var total hedge.Stats // the workload must exercise every counter
		for name, h := range hedgers {
			if tokens := h.Budget().Tokens(); !math.IsInf(tokens, 1) {
				want[key("hedge.budget.tokens", "hedger="+name)] = point{tokens, "{token}", "gauge"}
			}
			wantMode(want, name, h)
			for _, s := range h.Stats() {
				attrs := []string{"hedger=" + name, "op=" + s.Op}
				counter := func(metric, unit string, v int64, extra ...string) {
					want[key(metric, append(slices.Clone(attrs), extra...)...)] = point{float64(v), unit, "counter"}
				}
				counter("hedge.requests", "{request}", s.Requests)
				counter("hedge.hedges.sent", "{hedge}", s.Hedges)
				counter("hedge.hedge.wins", "{request}", s.HedgeWins)
				counter("hedge.primary.wins", "{request}", s.PrimaryWins)
				counter("hedge.failures", "{request}", s.Failures)
				counter("hedge.not_needed", "{request}", s.NotNeeded)
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedBudget], "reason=budget")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedInFlight], "reason=in_flight")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedBusy], "reason=busy")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedPayoff], "reason=payoff")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedFanOut], "reason=fan_out")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedHead], "reason=head")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedDeadline], "reason=deadline")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedReplicas], "reason=replicas")
				counter("hedge.hedges.refused", "{hedge}", s.Refused[hedge.RefusedRate], "reason=rate")
				counter("hedge.load.views", "{decision}", s.LoadByReport, "view=report")
				counter("hedge.load.views", "{decision}", s.LoadByOwnView, "view=own_view")
				counter("hedge.shadow.hedges", "{hedge}", s.ShadowHedges)
				counter("hedge.failovers", "{copy}", s.Failovers)
				counter("hedge.unhedgeable.requests", "{request}", s.Unhedgeable)
				counter("hedge.primaries.censored", "{request}", s.PrimaryCensored)
				want[key("hedge.wasted.work", attrs...)] = point{s.WastedWork.Seconds(), "s", "counter"}
				counter("hedge.rescued.requests", "{request}", s.Rescued)
				want[key("hedge.saved.at.least", attrs...)] = point{s.SavedAtLeast.Seconds(), "s", "counter"}
				if s.Delay != hedge.Never {
					want[key("hedge.delay", attrs...)] = point{s.Delay.Seconds(), "s", "gauge"}
				}
				for path, d := range map[string]hedge.Distribution{"caller": s.Latency, "primary": s.Primary, "hedge": s.HedgePath, "holdout": s.Holdout} {
					if d.Count == 0 {
						continue
					}
					for q, v := range map[string]time.Duration{"p50": d.P50, "p90": d.P90, "p99": d.P99, "p999": d.P999} {
						k := key("hedge.latency", append(slices.Clone(attrs), "path="+path, "quantile="+q)...)
						want[k] = point{v.Seconds(), "s", "gauge"}
					}
				}
				if d := s.TimerLag; d.Count > 0 {
					for q, v := range map[string]time.Duration{"p50": d.P50, "p90": d.P90, "p99": d.P99, "p999": d.P999} {
						want[key("hedge.timer.lag", append(slices.Clone(attrs), "quantile="+q)...)] = point{v.Seconds(), "s", "gauge"}
					}
				}

				total.Requests += s.Requests
				total.Failovers += s.Failovers
				total.Hedges += s.Hedges
				total.HedgeWins += s.HedgeWins
				total.PrimaryWins += s.PrimaryWins
				total.Failures += s.Failures
				total.Refused[hedge.RefusedBudget] += s.Refused[hedge.RefusedBudget]
				total.Refused[hedge.RefusedInFlight] += s.Refused[hedge.RefusedInFlight]
				total.Refused[hedge.RefusedDeadline] += s.Refused[hedge.RefusedDeadline]
				total.Refused[hedge.RefusedReplicas] += s.Refused[hedge.RefusedReplicas]
				total.ShadowHedges += s.ShadowHedges
				total.LoadByReport += s.LoadByReport
				total.LoadByOwnView += s.LoadByOwnView
				total.Unhedgeable += s.Unhedgeable
				total.PrimaryCensored += s.PrimaryCensored
				total.WastedWork += s.WastedWork
				total.HedgePath.Count += s.HedgePath.Count
				total.Holdout.Count += s.Holdout.Count
				total.TimerLag.Count += s.TimerLag.Count
				total.Rescued += s.Rescued
				total.SavedAtLeast += s.SavedAtLeast
			}
		}
		for name, h := range hedgers {
			wantReplicas(want, name, h)
		}
		for k, w := range want {
			g, ok := got[k]
			switch {
			case !ok:
				t.Errorf("%s missing", k)
			case g != w:
				t.Errorf("%s = %+v, want %+v", k, g, w)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s unexpected", k)
			}
		}

		// The workload exercises every counter, so no comparison above is
		// vacuous.
		for name, v := range map[string]int64{
			"Requests": total.Requests, "Hedges": total.Hedges, "HedgeWins": total.HedgeWins,
			"PrimaryWins": total.PrimaryWins, "Failures": total.Failures,
			"RefusedBudget": total.Refused[hedge.RefusedBudget], "RefusedInFlight": total.Refused[hedge.RefusedInFlight],
			"RefusedDeadline": total.Refused[hedge.RefusedDeadline], "RefusedReplicas": total.Refused[hedge.RefusedReplicas],
			"ShadowHedges": total.ShadowHedges, "Unhedgeable": total.Unhedgeable,
			"LoadByReport": total.LoadByReport, "LoadByOwnView": total.LoadByOwnView,
			"PrimaryCensored": total.PrimaryCensored, "WastedWork": int64(total.WastedWork),
			"HedgePath.Count": total.HedgePath.Count, "Holdout.Count": total.Holdout.Count, "TimerLag.Count": total.TimerLag.Count,
			"Rescued": total.Rescued, "SavedAtLeast": int64(total.SavedAtLeast),
		} {
			if v == 0 {
				t.Errorf("workload left %s at 0", name)
			}
		}
		// Spot checks of the omissions and of the fake clock's exact values.
		if _, ok := got[key("hedge.delay", "hedger=c", "op=get")]; ok {
			t.Error("hedge.delay exported for a Hedger warming up (Never)")
		}
		if _, ok := got[key("hedge.budget.tokens", "hedger=b")]; ok {
			t.Error("hedge.budget.tokens exported for an unlimited budget")
		}
		if p := got[key("hedge.delay", "hedger=a", "op=get")]; p.value != 0.010 {
			t.Errorf("hedge.delay{a,get} = %v, want 0.01", p.value)
		}
		if p := got[key("hedge.requests", "hedger=a", "op=get")]; p.value != 4 {
			t.Errorf("hedge.requests{a,get} = %v, want 4", p.value)
		}
		if _, ok := got[key("hedge.requests", "hedger=a", "op=raw/path/123")]; ok {
			t.Error("op beyond MaxOps exported under its own name")
		}

		// Counters read at collection time follow new calls.
		hedge.Do(context.Background(), hedgers["c"], "get", hedgetest.Sleeper(7*ms))
		time.Sleep(time.Second)
		if p := collect(t, reader)[key("hedge.requests", "hedger=c", "op=get")]; p.value != 2 {
			t.Errorf("hedge.requests{c,get} after one more call = %v, want 2", p.value)
		}

		if err := reg.Unregister(); err != nil {
			t.Fatal(err)
		}
		if n := len(collect(t, reader)); n != 0 {
			t.Errorf("%d points after Unregister, want 0", n)
		}
	})
}

func TestRegisterValidation(t *testing.T) {
	meter := sdkmetric.NewMeterProvider().Meter("test")
	h1 := mustNew(t, hedge.Config{})
	h2 := mustNew(t, hedge.Config{})
	for _, tc := range []struct {
		name    string
		nilMtr  bool
		hedgers map[string]*hedge.Hedger
		want    []string
	}{
		{"nil map", false, nil, []string{"no hedgers"}},
		{"empty map", false, map[string]*hedge.Hedger{}, []string{"no hedgers"}},
		{"nil meter", true, map[string]*hedge.Hedger{"a": h1}, []string{"meter is nil"}},
		{"empty name", false, map[string]*hedge.Hedger{"": h1}, []string{"empty name"}},
		{"invalid UTF-8", false, map[string]*hedge.Hedger{"\xff": h1}, []string{"not valid UTF-8"}},
		{"nil hedger", false, map[string]*hedge.Hedger{"a": nil}, []string{`hedger "a" is nil`}},
		{"same hedger twice", false, map[string]*hedge.Hedger{"b": h1, "a": h1}, []string{`hedgers "a" and "b" are the same`}},
		{"every mistake at once", true, map[string]*hedge.Hedger{"": h2, "x": nil, "y": h1, "z": h1},
			[]string{"meter is nil", "empty name", `hedger "x" is nil`, `hedgers "y" and "z" are the same`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meter
			if tc.nilMtr {
				m = nil
			}
			reg, err := hedgeotel.Register(m, tc.hedgers)
			if err == nil {
				reg.Unregister()
				t.Fatal("no error")
			}
			if reg != nil {
				t.Error("non-nil Registration with an error")
			}
			if !errors.Is(err, hedgeotel.ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tc.want) {
				t.Errorf("error reports %d mistakes, want %d: %v", got, len(tc.want), err)
			}
		})
	}
}

// wantReplicas adds to want the points of h's replicas, under the Hedger
// name.
func wantReplicas(want points, name string, h *hedge.Hedger) {
	for _, r := range h.ReplicaStats() {
		attrs := []string{"hedger=" + name, "replica=" + r.Name}
		probation := 0.0
		if r.Probation {
			probation = 1
		}
		want[key("hedge.replica.in_flight", attrs...)] = point{float64(r.InFlight), "{copy}", "gauge"}
		want[key("hedge.replica.copies", attrs...)] = point{float64(r.Copies), "{copy}", "counter"}
		want[key("hedge.replica.errors", attrs...)] = point{float64(r.Errors), "{copy}", "counter"}
		want[key("hedge.replica.hedges.sent", attrs...)] = point{float64(r.Hedges), "{hedge}", "counter"}
		want[key("hedge.replica.hedge.wins", attrs...)] = point{float64(r.HedgeWins), "{request}", "counter"}
		want[key("hedge.replica.probation", attrs...)] = point{probation, "1", "gauge"}
		if d := r.Latency; d.Count > 0 {
			for q, v := range map[string]time.Duration{"p50": d.P50, "p90": d.P90, "p99": d.P99, "p999": d.P999} {
				want[key("hedge.replica.latency", append(slices.Clone(attrs), "quantile="+q)...)] = point{v.Seconds(), "s", "gauge"}
			}
		}
		if d := r.Recent; d.Count > 0 {
			for q, v := range map[string]time.Duration{"p50": d.P50, "p90": d.P90, "p99": d.P99, "p999": d.P999} {
				want[key("hedge.replica.latency.recent", append(slices.Clone(attrs), "quantile="+q)...)] = point{v.Seconds(), "s", "gauge"}
			}
		}
	}
}

// wantMode adds the points of h's mode and rollout, named name.
func wantMode(want points, name string, h *hedge.Hedger) {
	for _, m := range []hedge.Mode{hedge.On, hedge.Shadow, hedge.Off} {
		v := 0.0
		if m == h.Mode() {
			v = 1
		}
		want[key("hedge.mode", "hedger="+name, "mode="+m.String())] = point{v, "1", "gauge"}
	}
	want[key("hedge.rollout", "hedger="+name)] = point{h.Rollout(), "1", "gauge"}
}
