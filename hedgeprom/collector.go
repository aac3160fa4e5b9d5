package hedgeprom

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/quantile"
	"github.com/tailcut/hedge/tied"
)

// Collector is a prometheus.Collector for a fixed set of Hedgers. Make one
// with New and register it. It is safe for concurrent scrapes.
type Collector struct {
	hedgers []hedgeset.Named // sorted by name

	requests, hedges, hedgeWins, primaryWins, failures *prometheus.Desc
	refused, shadow, unhedgeable, censored, wasted     *prometheus.Desc
	loadViews                                          *prometheus.Desc
	delay, tokens, latency, timerLag                   *prometheus.Desc
	rescued, saved, histogram, failovers               *prometheus.Desc
	mode, rollout, notNeeded                           *prometheus.Desc

	replicaLatency *prometheus.Desc
	replicaRecent  *prometheus.Desc
	replica        []*prometheus.Desc // by hedgeset.ReplicaSeries
	fan            []*prometheus.Desc // by hedgeset.FanSeries
	fanLatency     *prometheus.Desc
	shard          []*prometheus.Desc // by hedgeset.ShardSeries
	maxShards      int

	buckets []float64 // classic bucket bounds of histogram, seconds

	tiedClients []hedgeset.Item[tied.Client] // sorted by name
	tiedServers []hedgeset.Item[tied.Server] // sorted by name
	tiedClient  []*prometheus.Desc           // by hedgeset.TiedClientSeries
	tiedServer  []*prometheus.Desc           // by hedgeset.TiedServerSeries

	watchers []namedWatcher // sorted by name
	watch    watchDescs
}

type namedWatcher struct {
	name string
	w    Watcher
}

// Views of a replica's load, the values of the "view" label of
// load_views_total.
const (
	ViewReport  = hedgeset.ViewReport  // Stats.LoadByReport
	ViewOwnView = hedgeset.ViewOwnView // Stats.LoadByOwnView
)

// Latency paths, the values of the "path" label.
const (
	PathCaller  = hedgeset.PathCaller  // Stats.Latency
	PathPrimary = hedgeset.PathPrimary // Stats.Primary
	PathHedge   = hedgeset.PathHedge   // Stats.HedgePath
	PathHoldout = hedgeset.PathHoldout // Stats.Holdout
)

var namespaceRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// ErrInvalid is matched by every error New returns.
var ErrInvalid = errors.New("hedgeprom: invalid collector")

// New returns a Collector for hedgers, keyed by the value of their "hedger"
// label. namespace prefixes every metric name ("hedge" gives
// hedge_requests_total); it must be a valid metric name. Each Hedger may
// appear once: the same Hedger under two names would count every call twice
// in any sum over hedgers. Options add series or shape them: WithWatcher
// exports an alarm's state, WithBuckets sets the classic buckets of the
// latency histograms, WithTiedClient and WithTiedServer export tied
// traffic. hedgers may be empty when a tied client or server is given.
// Every mistake is reported at once, in one error matching ErrInvalid.
func New(namespace string, hedgers map[string]*hedge.Hedger, opts ...Option) (*Collector, error) {
	var errs []error
	if !namespaceRE.MatchString(namespace) {
		errs = append(errs, fmt.Errorf("namespace %q is not a valid metric name prefix: use letters, digits and underscores, not starting with a digit (for instance \"hedge\")", namespace))
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	set, more := hedgeset.SortSet(hedgers, o.tiedClients, o.tiedServers)
	errs = append(errs, more...)
	list, clients, servers := set.Hedgers, set.TiedClients, set.TiedServers
	if !o.bucketsSet {
		o.buckets = DefaultBuckets()
	}
	if err := validateBuckets(o.buckets); err != nil {
		errs = append(errs, err)
	}
	if !o.maxShardsSet {
		o.maxShards = hedgeset.DefaultMaxShards
	}
	if o.maxShards < 0 {
		errs = append(errs, fmt.Errorf("WithMaxShards(%d): give 0 or more shards to export one by one (0: all summed under shard=\"other\")", o.maxShards))
	}
	names := map[string]bool{}
	for _, n := range list {
		names[n.Name] = true
	}
	if more := validateWatchers(o.watchers, names); len(more) > 0 {
		slices.SortFunc(more, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		errs = append(errs, more...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	c := &Collector{hedgers: list, watch: newWatchDescs(namespace), buckets: o.buckets, tiedClients: clients, tiedServers: servers, maxShards: o.maxShards}
	for name, w := range o.watchers {
		c.watchers = append(c.watchers, namedWatcher{name, w})
	}
	slices.SortFunc(c.watchers, func(a, b namedWatcher) int { return strings.Compare(a.name, b.name) })

	op := []string{hedgeset.LabelHedger, hedgeset.LabelOp}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	c.requests = desc("requests_total",
		"Calls of hedge.Do, whatever their outcome.", op...)
	c.hedges = desc("hedges_sent_total",
		"Hedge copies sent: copies beyond the primary. Divide by requests_total for the hedge rate, the extra load on the backend.", op...)
	c.hedgeWins = desc("hedge_wins_total",
		"Calls won by a hedge copy. Divide by hedges_sent_total for the share of hedges that paid off; a hedge that lost still did its work.", op...)
	c.primaryWins = desc("primary_wins_total",
		"Calls won by the primary copy, whether or not a hedge was sent.", op...)
	c.failures = desc("failures_total",
		"Calls that returned an error to the caller after every copy failed, a non-retryable error, or the caller's context ending. Leaves of a fan-out that were not needed are not failures: see not_needed_total.", op...)
	c.notNeeded = desc("not_needed_total", hedgeset.NotNeededHelp, op...)
	c.refused = desc("hedges_refused_total",
		"Hedges due but not sent, by reason: "+hedgeset.ReasonsHelp+". Copies not due because MaxAttempts was reached are not counted.",
		hedgeset.LabelHedger, hedgeset.LabelOp, hedgeset.LabelReason)
	c.failovers = desc("failovers_total", hedgeset.FailoversHelp, op...)
	c.loadViews = desc("load_views_total", hedgeset.LoadViewsHelp, hedgeset.LabelHedger, hedgeset.LabelOp, hedgeset.LabelView)
	c.shadow = desc("shadow_hedges_total",
		"Hedges Shadow mode would have sent, after the budget and caps; none was sent. The hedge rate to expect when switching to On.", op...)
	c.unhedgeable = desc("unhedgeable_requests_total",
		"Calls marked NotIdempotent without an idempotency key, sent once whatever their latency.", op...)
	c.censored = desc("primaries_censored_total",
		"Primary copies cancelled because a hedge won. Each is in the primary latency summary at its running time when cancelled, a lower bound of what it would have taken.", op...)
	c.wasted = desc("wasted_work_seconds_total",
		"Running time of copies that did not win, from start to return, in calls that sent more than one copy: backend time spent for nothing. It does not say how much load that work displaced.", op...)
	c.delay = desc("delay_seconds",
		"Hedge delay in force now: a copy still running after this long may be hedged. Absent while the delay is hedge.Never (a live estimate warming up): no hedge is sent then.", op...)
	c.tokens = desc("budget_tokens",
		"Tokens in the Hedger's budget now. A ratio budget spends one per hedge and refuses below 1; a throttle (gRPC retryThrottling) refuses at or below half its maximum. Hedgers sharing a budget report the same value. Absent for an unlimited budget.",
		hedgeset.LabelHedger)
	c.latency = desc("latency_seconds",
		"Latency quantiles since the Hedger was made, from its bounded histograms (within quantile.RelativeError, about 0.8%), not a recent window; use rate of _sum over _count for recent means. path=caller: what callers waited, from the call to Do's return, with the winner's answer or the final error. "+hedgeset.PrimaryHelp+" (see primaries_censored_total). path=hedge: hedge copies from send to success, won or not. path=holdout: what callers saw in the rollout's control group, calls left unhedged at random while a rollout below 1 is in force: against path=caller, the honest latency without and with hedging (empty at rollout 1). Quantiles cannot be averaged across series.",
		hedgeset.LabelHedger, hedgeset.LabelOp, hedgeset.LabelPath)
	c.histogram = desc("latency_distribution_seconds",
		"The latencies of latency_seconds, bucketed: a native histogram (schema 6, 64 buckets per power of two) and classic buckets, both filled from the Hedger's log-linear buckets counted at their midpoints, so a value may sit up to quantile.RelativeError (about 0.8%) outside the bucket it is counted in. Since the Hedger was made: use rate() or increase() for a recent window; unlike the summary, it aggregates across ops, hedgers and instances. Paths as for latency_seconds.",
		hedgeset.LabelHedger, hedgeset.LabelOp, hedgeset.LabelPath)
	c.timerLag = desc("timer_lag_seconds",
		"How late the hedge timers fired after they came due, whether a copy then went or was refused, since the Hedger was made (hedge.Stats.TimerLag). The Go runtime's timers fire up to about a millisecond late on a busy process: a lag near the delay means hedges leave far later than asked, which Config.PreciseTimers cures at some CPU. hedge advise takes the median and p99 (--send-lag, --send-lag-p99).", op...)
	c.rescued = desc("rescued_requests_total",
		"Calls won by a hedge while their primary was still running: the calls hedging rescued from a slow primary (a copy that replaced a failed primary is not counted). How much each gained is not known: see saved_at_least_seconds_total and path=holdout.", op...)
	c.saved = desc("saved_at_least_seconds_total",
		"A lower bound of the time hedges saved: for each rescued call whose primary later returned a success, how much later it did. A primary that stops when cancelled adds nothing, so this is far below the real saving unless primaries run on; compare path=holdout with path=caller for the real effect.", op...)
	c.mode = desc(hedgeset.ModeName, hedgeset.ModeHelp, hedgeset.LabelHedger, hedgeset.LabelMode)
	c.rollout = desc(hedgeset.RolloutName, hedgeset.RolloutHelp, hedgeset.LabelHedger)
	replica := []string{hedgeset.LabelHedger, hedgeset.LabelReplica}
	c.replicaLatency = desc(hedgeset.ReplicaPrefix+"_"+hedgeset.ReplicaLatency+"_seconds", hedgeset.ReplicaLatencyHelp, replica...)
	c.replicaRecent = desc(hedgeset.ReplicaPrefix+"_"+strings.ReplaceAll(hedgeset.ReplicaRecent, ".", "_")+"_seconds",
		hedgeset.ReplicaRecentHelp+" Quantiles 0.5, 0.9, 0.99 and 0.999.", hedgeset.LabelHedger, hedgeset.LabelReplica, hedgeset.LabelQuantile)
	c.replica = seriesDescs(namespace, hedgeset.ReplicaPrefix, hedgeset.ReplicaSeries, replica...)
	c.fan = seriesDescs(namespace, hedgeset.FanPrefix, hedgeset.FanSeries, op...)
	c.fanLatency = desc(hedgeset.FanPrefix+"_"+hedgeset.FanLatency+"_seconds", hedgeset.FanLatencyHelp, op...)
	c.shard = seriesDescs(namespace, hedgeset.ShardPrefix, hedgeset.ShardSeries, hedgeset.LabelHedger, hedgeset.LabelOp, hedgeset.LabelShard)
	if len(clients) > 0 {
		c.tiedClient = seriesDescs(namespace, hedgeset.TiedClientPrefix, hedgeset.TiedClientSeries, hedgeset.LabelClient)
	}
	if len(servers) > 0 {
		c.tiedServer = seriesDescs(namespace, hedgeset.TiedServerPrefix, hedgeset.TiedServerSeries, hedgeset.LabelServer)
	}
	return c, nil
}

// Describe sends the descriptors of every metric the Collector may export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.requests, c.hedges, c.hedgeWins, c.primaryWins, c.failures, c.notNeeded,
		c.refused, c.shadow, c.unhedgeable, c.censored, c.wasted, c.loadViews,
		c.delay, c.tokens, c.latency, c.timerLag,
		c.rescued, c.saved, c.histogram, c.failovers, c.replicaLatency, c.fanLatency,
		c.mode, c.rollout, c.replicaRecent,
	} {
		ch <- d
	}
	for _, ds := range [...][]*prometheus.Desc{c.replica, c.fan, c.shard, c.tiedClient, c.tiedServer} {
		for _, d := range ds {
			ch <- d
		}
	}
	if len(c.watchers) > 0 {
		for _, d := range []*prometheus.Desc{c.watch.alarmed, c.watch.shadowed, c.watch.rate, c.watch.baseline} {
			ch <- d
		}
	}
}

// Collect reads each Hedger's Stats and ReplicaStats, each watcher's
// State, and each tied client's and server's Stats, and sends them as
// metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.watchers {
		c.watch.collect(ch, w.name, w.w)
	}
	for _, t := range c.tiedClients {
		collectSeries(ch, c.tiedClient, hedgeset.TiedClientSeries, t.V.Stats(), t.Name)
	}
	for _, t := range c.tiedServers {
		collectSeries(ch, c.tiedServer, hedgeset.TiedServerSeries, t.V.Stats(), t.Name)
	}
	for _, n := range c.hedgers {
		if t := n.H.Budget().Tokens(); !math.IsInf(t, 1) {
			ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.GaugeValue, t, n.Name)
		}
		for _, m := range hedgeset.ModeValues(hedgeset.ModeInForce(n.H)) {
			ch <- prometheus.MustNewConstMetric(c.mode, prometheus.GaugeValue, float64(m.N), n.Name, m.Label)
		}
		ch <- prometheus.MustNewConstMetric(c.rollout, prometheus.GaugeValue, n.H.Rollout(), n.Name)
		for _, s := range n.H.Stats() {
			counter := func(d *prometheus.Desc, v float64, extra ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{n.Name, s.Op}, extra...)...)
			}
			counter(c.requests, float64(s.Requests))
			counter(c.hedges, float64(s.Hedges))
			counter(c.hedgeWins, float64(s.HedgeWins))
			counter(c.primaryWins, float64(s.PrimaryWins))
			counter(c.failures, float64(s.Failures))
			counter(c.notNeeded, float64(s.NotNeeded))
			for _, r := range hedgeset.Refusals(s) {
				counter(c.refused, float64(r.N), r.Label)
			}
			for _, v := range hedgeset.LoadViews(s) {
				counter(c.loadViews, float64(v.N), v.Label)
			}
			counter(c.shadow, float64(s.ShadowHedges))
			counter(c.failovers, float64(s.Failovers))
			counter(c.unhedgeable, float64(s.Unhedgeable))
			counter(c.censored, float64(s.PrimaryCensored))
			counter(c.wasted, s.WastedWork.Seconds())
			counter(c.rescued, float64(s.Rescued))
			counter(c.saved, s.SavedAtLeast.Seconds())
			if s.Delay != hedge.Never {
				ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, s.Delay.Seconds(), n.Name, s.Op)
			}
			for _, p := range hedgeset.Paths(s) {
				c.summary(ch, c.latency, p.D, n.Name, s.Op, p.Label)
			}
			c.summary(ch, c.latency, s.Holdout, n.Name, s.Op, PathHoldout)
			c.summary(ch, c.timerLag, s.TimerLag, n.Name, s.Op)
			if s.Fan.Requests > 0 {
				collectSeries(ch, c.fan, hedgeset.FanSeries, s.Fan, n.Name, s.Op)
				c.summary(ch, c.fanLatency, s.Fan.Latency, n.Name, s.Op)
			}
			for _, row := range hedgeset.ShardRows(s.Shards, c.maxShards) {
				collectSeries(ch, c.shard, hedgeset.ShardSeries, row.S, n.Name, s.Op, row.Label)
			}
		}
		for _, r := range n.H.ReplicaStats() {
			rep := r.Name
			collectSeries(ch, c.replica, hedgeset.ReplicaSeries, r, n.Name, rep)
			c.summary(ch, c.replicaLatency, r.Latency, n.Name, rep)
			if d := r.Recent; d.Count > 0 {
				for _, q := range [...]struct {
					label string
					v     time.Duration
				}{{"0.5", d.P50}, {"0.9", d.P90}, {"0.99", d.P99}, {"0.999", d.P999}} {
					ch <- prometheus.MustNewConstMetric(c.replicaRecent, prometheus.GaugeValue, q.v.Seconds(), n.Name, rep, q.label)
				}
			}
		}
		for _, hs := range n.H.Histograms() {
			for _, p := range [...]struct {
				label string
				c     quantile.Counts
			}{{PathCaller, hs.Latency}, {PathPrimary, hs.Primary}, {PathHedge, hs.HedgePath}, {PathHoldout, hs.Holdout}} {
				ch <- latencyHistogram(c.histogram, p.c, c.buckets, n.Name, hs.Op, p.label)
			}
		}
	}
}

// summary sends d as a summary of desc with the label values given.
// Quantiles are NaN while Count is 0, as client_golang's own summaries
// report them.
func (c *Collector) summary(ch chan<- prometheus.Metric, desc *prometheus.Desc, d hedge.Distribution, labels ...string) {
	q := func(v time.Duration) float64 {
		if d.Count == 0 {
			return math.NaN()
		}
		return v.Seconds()
	}
	ch <- prometheus.MustNewConstSummary(desc, uint64(d.Count), d.Sum.Seconds(),
		map[float64]float64{0.5: q(d.P50), 0.9: q(d.P90), 0.99: q(d.P99), 0.999: q(d.P999)},
		labels...)
}
