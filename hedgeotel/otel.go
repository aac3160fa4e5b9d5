package hedgeotel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/tied"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Views of a replica's load, the values of the "view" attribute of
// hedge.load.views.
const (
	ViewReport  = hedgeset.ViewReport  // Stats.LoadByReport
	ViewOwnView = hedgeset.ViewOwnView // Stats.LoadByOwnView
)

// Latency paths, the values of the "path" attribute of hedge.latency.
const (
	PathCaller  = hedgeset.PathCaller  // Stats.Latency
	PathPrimary = hedgeset.PathPrimary // Stats.Primary
	PathHedge   = hedgeset.PathHedge   // Stats.HedgePath
	PathHoldout = hedgeset.PathHoldout // Stats.Holdout
)

// Quantiles, the values of the "quantile" attribute of hedge.latency.
const (
	QuantileP50  = "p50"  // Distribution.P50
	QuantileP90  = "p90"  // Distribution.P90
	QuantileP99  = "p99"  // Distribution.P99
	QuantileP999 = "p999" // Distribution.P999
)

// ErrInvalid is matched by every error Register returns for invalid
// arguments.
var ErrInvalid = errors.New("hedgeotel: invalid registration")

type instruments struct {
	requests, hedges, hedgeWins, primaryWins, failures metric.Int64ObservableCounter
	refused, shadow, unhedgeable, censored, rescued    metric.Int64ObservableCounter
	loadViews, notNeeded                               metric.Int64ObservableCounter
	failovers                                          metric.Int64ObservableCounter
	wasted, saved                                      metric.Float64ObservableCounter
	delay, tokens, latency, timerLag, replicaLatency   metric.Float64ObservableGauge
	fanLatency, replicaRecent, rollout                 metric.Float64ObservableGauge
	mode                                               metric.Int64ObservableGauge

	fan       []seriesInstrument // by hedgeset.FanSeries
	shard     []seriesInstrument // by hedgeset.ShardSeries
	maxShards int

	replica                []seriesInstrument // by hedgeset.ReplicaSeries
	tiedClient, tiedServer []seriesInstrument // by hedgeset.TiedClientSeries, TiedServerSeries
}

// seconds converts nanoseconds to seconds as time.Duration.Seconds does.
func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

// Register creates the instruments listed in the package documentation on
// meter and registers one callback that reads each Hedger's Stats and
// ReplicaStats, and its budget's tokens, at collection time. hedgers are
// keyed by the value of their "hedger" attribute; each Hedger may appear
// once, since the same Hedger under two names would count every call
// twice in any sum over hedgers. Options add tied traffic
// (WithTiedClient, WithTiedServer), read by the same callback; hedgers
// may be empty when they give some.
//
// Every invalid argument is reported at once, in one error matching
// ErrInvalid. Call Unregister on the returned Registration to stop
// observing the Hedgers.
func Register(meter metric.Meter, hedgers map[string]*hedge.Hedger, opts ...Option) (metric.Registration, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !o.maxShardsSet {
		o.maxShards = hedgeset.DefaultMaxShards
	}
	list, clients, servers, err := validate(meter, hedgers, &o)
	if err != nil {
		return nil, err
	}
	ins := instruments{maxShards: o.maxShards}
	var errs []error
	i64 := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	ins.requests = i64("hedge.requests", "{request}",
		"Calls of hedge.Do, whatever their outcome.")
	ins.hedges = i64("hedge.hedges.sent", "{hedge}",
		"Hedge copies sent: copies beyond the primary. Divide by hedge.requests for the hedge rate, the extra load on the backend.")
	ins.hedgeWins = i64("hedge.hedge.wins", "{request}",
		"Calls won by a hedge copy. Divide by hedge.hedges.sent for the share of hedges that paid off.")
	ins.primaryWins = i64("hedge.primary.wins", "{request}",
		"Calls won by the primary copy, whether or not a hedge was sent.")
	ins.failures = i64("hedge.failures", "{request}",
		"Calls that returned an error to the caller. Leaves of a fan-out that were not needed are not failures: see hedge.not_needed.")
	ins.notNeeded = i64("hedge.not_needed", "{request}", hedgeset.NotNeededHelp)
	ins.refused = i64("hedge.hedges.refused", "{hedge}",
		"Hedges due but not sent, by reason: "+hedgeset.ReasonsHelp+". Copies not due because MaxAttempts was reached are not counted.")
	ins.failovers = i64("hedge.failovers", "{copy}", hedgeset.FailoversHelp)
	ins.loadViews = i64("hedge.load.views", "{decision}", hedgeset.LoadViewsHelp)
	ins.shadow = i64("hedge.shadow.hedges", "{hedge}",
		"Hedges Shadow mode would have sent; none was sent.")
	ins.unhedgeable = i64("hedge.unhedgeable.requests", "{request}",
		"Calls marked NotIdempotent without an idempotency key, sent once whatever their latency.")
	ins.censored = i64("hedge.primaries.censored", "{request}",
		"Primary copies cancelled because a hedge won; recorded in the primary latency at their running time then, a lower bound.")
	wasted, err := meter.Float64ObservableCounter("hedge.wasted.work", metric.WithUnit("s"),
		metric.WithDescription("Running time of copies that did not win, in calls that sent more than one copy: backend time spent for nothing."))
	errs = append(errs, err)
	ins.wasted = wasted
	ins.rescued = i64("hedge.rescued.requests", "{request}",
		"Calls won by a hedge while their primary was still running (not those won by a copy that replaced a failed primary). How much each gained is not known: see hedge.saved.at.least and path=holdout.")
	saved, err := meter.Float64ObservableCounter("hedge.saved.at.least", metric.WithUnit("s"),
		metric.WithDescription("A lower bound of the time hedges saved: for each rescued call whose primary later returned a success, how much later it did. Far below the real saving when primaries stop as soon as they are cancelled; compare path=holdout with path=caller for the real effect."))
	errs = append(errs, err)
	ins.saved = saved
	ins.delay = gauge("hedge.delay", "s",
		"Hedge delay in force now. Absent while the delay is hedge.Never (a live estimate warming up): no hedge is sent then.")
	ins.tokens = gauge("hedge.budget.tokens", "{token}",
		"Tokens in the Hedger's budget now. Hedgers sharing a budget report the same value. Absent for an unlimited budget.")
	ins.latency = gauge("hedge.latency", "s",
		"Latency quantiles since the Hedger was made, from its bounded histograms (within quantile.RelativeError, about 0.8%), not a recent window. path=caller: what callers waited, from the call to Do's return; "+hedgeset.PrimaryHelp+"; path=hedge: hedge copies from send to success; path=holdout: the rollout's control group, calls left unhedged at random while a rollout below 1 is in force (against path=caller, the honest latency without and with hedging). Absent for a path with no samples. Quantiles cannot be averaged across series.")
	ins.timerLag = gauge("hedge.timer.lag", "s",
		"How late the hedge timers fired after they came due, whether a copy then went or was refused, since the Hedger was made (hedge.Stats.TimerLag). A lag near the delay means hedges leave far later than asked (Config.PreciseTimers cures it at some CPU); hedge advise --send-lag and --send-lag-p99 take the p50 and p99. Absent until a timer has come due.")
	ins.replicaLatency = gauge("hedge."+hedgeset.ReplicaPrefix+"."+hedgeset.ReplicaLatency, "s",
		hedgeset.ReplicaLatencyHelp+" Quantiles p50, p90, p99 and p999; absent for a replica with no success yet.")
	ins.fanLatency = gauge("hedge."+hedgeset.FanPrefix+"."+hedgeset.FanLatency, "s",
		hedgeset.FanLatencyHelp+" Quantiles p50, p90, p99 and p999; absent for an operation class with no fan-out yet.")
	ins.replicaRecent = gauge("hedge."+hedgeset.ReplicaPrefix+"."+hedgeset.ReplicaRecent, "s",
		hedgeset.ReplicaRecentHelp+" Quantiles p50, p90, p99 and p999.")
	ins.rollout = gauge("hedge."+hedgeset.RolloutName, "1", hedgeset.RolloutHelp)
	mode, err := meter.Int64ObservableGauge("hedge."+hedgeset.ModeName, metric.WithUnit("1"), metric.WithDescription(hedgeset.ModeHelp))
	errs = append(errs, err)
	ins.mode = mode
	all := []metric.Observable{
		ins.replicaRecent, ins.rollout, ins.mode,
		ins.requests, ins.hedges, ins.hedgeWins, ins.primaryWins, ins.failures, ins.notNeeded,
		ins.refused, ins.shadow, ins.unhedgeable, ins.censored, ins.wasted, ins.loadViews,
		ins.delay, ins.tokens, ins.latency, ins.timerLag, ins.rescued, ins.saved,
		ins.failovers, ins.replicaLatency, ins.fanLatency,
	}
	ins.replica = newSeries(meter, hedgeset.ReplicaPrefix, hedgeset.ReplicaSeries, &errs, &all)
	ins.fan = newSeries(meter, hedgeset.FanPrefix, hedgeset.FanSeries, &errs, &all)
	ins.shard = newSeries(meter, hedgeset.ShardPrefix, hedgeset.ShardSeries, &errs, &all)
	if len(clients) > 0 {
		ins.tiedClient = newSeries(meter, hedgeset.TiedClientPrefix, hedgeset.TiedClientSeries, &errs, &all)
	}
	if len(servers) > 0 {
		ins.tiedServer = newSeries(meter, hedgeset.TiedServerPrefix, hedgeset.TiedServerSeries, &errs, &all)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("hedgeotel: creating instruments: %w", err)
	}
	reg, err := meter.RegisterCallback(ins.observe(list, clients, servers), all...)
	if err != nil {
		return nil, fmt.Errorf("hedgeotel: registering callback: %w", err)
	}
	return reg, nil
}

func validate(meter metric.Meter, hedgers map[string]*hedge.Hedger, o *options) ([]hedgeset.Named, []hedgeset.Item[tied.Client], []hedgeset.Item[tied.Server], error) {
	var errs []error
	if meter == nil {
		errs = append(errs, errors.New("meter is nil: pass one from a MeterProvider, for instance otel.Meter(\"github.com/tailcut/hedge\")"))
	}
	set, more := hedgeset.SortSet(hedgers, o.tiedClients, o.tiedServers)
	errs = append(errs, more...)
	if o.maxShards < 0 {
		errs = append(errs, fmt.Errorf("WithMaxShards(%d): give 0 or more shards to export one by one (0: all summed under shard=\"other\")", o.maxShards))
	}
	if len(errs) > 0 {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return set.Hedgers, set.TiedClients, set.TiedServers, nil
}

// quantiles are the quantiles of d, with their attribute values.
func quantiles(d hedge.Distribution) [4]struct {
	name string
	v    time.Duration
} {
	return [...]struct {
		name string
		v    time.Duration
	}{{QuantileP50, d.P50}, {QuantileP90, d.P90}, {QuantileP99, d.P99}, {QuantileP999, d.P999}}
}

// observe returns the callback reading every Hedger of list, and every
// tied client and server.
func (ins *instruments) observe(list []hedgeset.Named, clients []hedgeset.Item[tied.Client], servers []hedgeset.Item[tied.Server]) metric.Callback {
	return func(_ context.Context, o metric.Observer) error {
		for _, t := range clients {
			observeSeries(o, ins.tiedClient, hedgeset.TiedClientSeries, t.V.Stats(), attribute.String(hedgeset.LabelClient, t.Name))
		}
		for _, t := range servers {
			observeSeries(o, ins.tiedServer, hedgeset.TiedServerSeries, t.V.Stats(), attribute.String(hedgeset.LabelServer, t.Name))
		}
		for _, n := range list {
			hedger := attribute.String(hedgeset.LabelHedger, n.Name)
			if t := n.H.Budget().Tokens(); !math.IsInf(t, 1) {
				o.ObserveFloat64(ins.tokens, t, metric.WithAttributes(hedger))
			}
			for _, m := range hedgeset.ModeValues(hedgeset.ModeInForce(n.H)) {
				o.ObserveInt64(ins.mode, m.N, metric.WithAttributes(hedger, attribute.String(hedgeset.LabelMode, m.Label)))
			}
			o.ObserveFloat64(ins.rollout, n.H.Rollout(), metric.WithAttributes(hedger))
			for _, s := range n.H.Stats() {
				op := attribute.String(hedgeset.LabelOp, s.Op)
				attrs := metric.WithAttributes(hedger, op)
				o.ObserveInt64(ins.requests, s.Requests, attrs)
				o.ObserveInt64(ins.hedges, s.Hedges, attrs)
				o.ObserveInt64(ins.hedgeWins, s.HedgeWins, attrs)
				o.ObserveInt64(ins.primaryWins, s.PrimaryWins, attrs)
				o.ObserveInt64(ins.failures, s.Failures, attrs)
				o.ObserveInt64(ins.notNeeded, s.NotNeeded, attrs)
				for _, r := range hedgeset.Refusals(s) {
					o.ObserveInt64(ins.refused, r.N, metric.WithAttributes(hedger, op, attribute.String(hedgeset.LabelReason, r.Label)))
				}
				for _, v := range hedgeset.LoadViews(s) {
					o.ObserveInt64(ins.loadViews, v.N, metric.WithAttributes(hedger, op, attribute.String(hedgeset.LabelView, v.Label)))
				}
				o.ObserveInt64(ins.shadow, s.ShadowHedges, attrs)
				o.ObserveInt64(ins.failovers, s.Failovers, attrs)
				o.ObserveInt64(ins.unhedgeable, s.Unhedgeable, attrs)
				o.ObserveInt64(ins.censored, s.PrimaryCensored, attrs)
				o.ObserveFloat64(ins.wasted, s.WastedWork.Seconds(), attrs)
				o.ObserveInt64(ins.rescued, s.Rescued, attrs)
				o.ObserveFloat64(ins.saved, s.SavedAtLeast.Seconds(), attrs)
				if s.Delay != hedge.Never {
					o.ObserveFloat64(ins.delay, s.Delay.Seconds(), attrs)
				}
				paths := hedgeset.Paths(s)
				for _, p := range [...]hedgeset.Path{paths[0], paths[1], paths[2], {Label: PathHoldout, D: s.Holdout}} {
					if p.D.Count == 0 {
						continue
					}
					path := attribute.String(hedgeset.LabelPath, p.Label)
					for _, q := range quantiles(p.D) {
						o.ObserveFloat64(ins.latency, q.v.Seconds(), metric.WithAttributes(hedger, op, path, attribute.String(hedgeset.LabelQuantile, q.name)))
					}
				}
				if d := s.TimerLag; d.Count > 0 {
					for _, q := range quantiles(d) {
						o.ObserveFloat64(ins.timerLag, q.v.Seconds(), metric.WithAttributes(hedger, op, attribute.String(hedgeset.LabelQuantile, q.name)))
					}
				}
				for _, row := range hedgeset.ShardRows(s.Shards, ins.maxShards) {
					observeSeries(o, ins.shard, hedgeset.ShardSeries, row.S, hedger, op, attribute.String(hedgeset.LabelShard, row.Label))
				}
				if s.Fan.Requests > 0 {
					observeSeries(o, ins.fan, hedgeset.FanSeries, s.Fan, hedger, op)
					if d := s.Fan.Latency; d.Count > 0 {
						for _, q := range quantiles(d) {
							o.ObserveFloat64(ins.fanLatency, q.v.Seconds(), metric.WithAttributes(hedger, op, attribute.String(hedgeset.LabelQuantile, q.name)))
						}
					}
				}
			}
			for _, r := range n.H.ReplicaStats() {
				rep := attribute.String(hedgeset.LabelReplica, r.Name)
				observeSeries(o, ins.replica, hedgeset.ReplicaSeries, r, hedger, rep)
				if r.Latency.Count > 0 {
					for _, q := range quantiles(r.Latency) {
						o.ObserveFloat64(ins.replicaLatency, q.v.Seconds(), metric.WithAttributes(hedger, rep, attribute.String(hedgeset.LabelQuantile, q.name)))
					}
				}
				if r.Recent.Count > 0 {
					for _, q := range quantiles(r.Recent) {
						o.ObserveFloat64(ins.replicaRecent, q.v.Seconds(), metric.WithAttributes(hedger, rep, attribute.String(hedgeset.LabelQuantile, q.name)))
					}
				}
			}
		}
		return nil
	}
}
