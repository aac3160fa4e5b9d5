package bench

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/quantile"
)

// MetricsNamespace is the prefix of the names Metrics exports: hedgeprom's
// names with namespace "hedge", so that a dashboard made for hedgeprom
// (docs/grafana/hedge-dashboard.json) shows a running bench as well.
const MetricsNamespace = "hedge"

// Metrics is a prometheus.Collector over the configurations of a running
// comparison, for watching a bench in Prometheus while it runs ("hedge
// bench --metrics-addr"). Contenders wraps the contenders of one backend:
// each run's client is then read at scrape time. Its methods are safe for
// concurrent use.
//
// Every series is labelled hedger=<configuration> and op=<backend>
// ("http", "redis", "grpc"). The counters cover every run of the
// configuration on that backend so far, warm-up included: each run makes
// a fresh client, whose counts are added to those of the runs before it
// when it is closed, so a counter never goes down. A counter the client
// does not know (Unknown) is not exported. The series are those of
// hedgeprom that ClientStats can fill:
//
//	hedge_requests_total, hedge_hedges_sent_total, hedge_hedge_wins_total,
//	hedge_hedges_refused_total{reason="budget"}, hedge_wasted_work_seconds_total,
//	hedge_delay_seconds (the running client's, absent between runs or while Never),
//	hedge_latency_seconds{path="caller"} (a summary of the time each call of
//	Client.Do took, measured around it, in the bounded histogram of package
//	quantile, as hedgeprom's)
//
// and two of the bench's own: hedge_bench_runs_total (runs started) and
// hedge_bench_running (1 while a run of the configuration is under way).
//
// Why from ClientStats and not a hedgeprom.Collector over each run's
// Hedger: a Backend makes the Hedger inside NewClient and its Client does
// not hand it out, so the counters the Client reports are what there is.
// The primary and hedge-path latencies, primary wins, failures and the
// other refusal reasons are therefore not exported here.
//
// Timing each call adds two clock reads and a lock-free histogram record
// to every request of the bench; Metrics is only in use when asked for.
type Metrics struct {
	mu     sync.Mutex
	series map[seriesKey]*configSeries

	requests, hedges, wins, refused, wasted, delay, latency, runs, running *prometheus.Desc
}

type seriesKey struct{ config, backend string }

// configSeries is one configuration on one backend.
type configSeries struct {
	base    ClientStats    // of the closed clients; Unknown where one did not know
	closed  bool           // base holds at least one client
	current *meteredClient // the run under way, or nil
	runs    int64
	latency quantile.Histogram // every call of Do, ns
}

// NewMetrics returns an empty Metrics.
func NewMetrics() *Metrics {
	m := &Metrics{series: map[seriesKey]*configSeries{}}
	labels := []string{"hedger", "op"}
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(MetricsNamespace, "", name), help, append(labels, extra...), nil)
	}
	m.requests = desc("requests_total", "Calls of Do, over every run of the configuration on the backend (hedger: configuration, op: backend).")
	m.hedges = desc("hedges_sent_total", "Hedge copies sent: copies beyond the primary.")
	m.wins = desc("hedge_wins_total", "Calls won by a hedge copy.")
	m.refused = desc("hedges_refused_total", "Hedges due but not sent, by reason; the bench's clients report the budget's refusals only.", "reason")
	m.wasted = desc("wasted_work_seconds_total", "Running time of copies that did not win, in calls that sent more than one copy.")
	m.delay = desc("delay_seconds", "Hedge delay in force in the run under way. Absent between runs and while the delay is hedge.Never.")
	m.latency = desc("latency_seconds", "Latency quantiles of every call of the client's Do (path=caller), since the bench started, within quantile.RelativeError.", "path")
	m.runs = desc("bench_runs_total", "Runs of the configuration started on the backend.")
	m.running = desc("bench_running", "1 while a run of the configuration is under way on the backend, else 0.")
	return m
}

// Contenders returns cs with each client they make reported by m, under
// the backend's name.
func (m *Metrics) Contenders(backend string, cs []Contender) []Contender {
	out := make([]Contender, len(cs))
	for i, c := range cs {
		key := seriesKey{c.Name, backend}
		m.mu.Lock()
		if m.series[key] == nil {
			m.series[key] = &configSeries{}
		}
		s := m.series[key]
		m.mu.Unlock()
		inner := c.New
		c.New = func(b Backend) (Client, error) {
			client, err := inner(b)
			if err != nil {
				return nil, err
			}
			mc := &meteredClient{Client: client, m: m, s: s}
			m.mu.Lock()
			s.current = mc
			s.runs++
			m.mu.Unlock()
			return mc, nil
		}
		out[i] = c
	}
	return out
}

// meteredClient times each call of Do, and folds the client's counters
// into its configuration's when closed.
type meteredClient struct {
	Client
	m      *Metrics
	s      *configSeries
	closed bool // guarded by m.mu
}

// Do calls the client's Do and records how long it took.
func (c *meteredClient) Do(ctx context.Context, i int) error {
	t0 := time.Now()
	err := c.Client.Do(ctx, i)
	c.s.latency.Record(int64(time.Since(t0)))
	return err
}

// Close adds the client's counters to the configuration's and closes it.
func (c *meteredClient) Close() error {
	c.m.fold(c)
	return c.Client.Close()
}

// fold adds c's counters to its configuration's, once.
func (m *Metrics) fold(c *meteredClient) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	st := c.Client.Stats()
	if c.s.closed {
		c.s.base = addStats(c.s.base, st)
	} else {
		c.s.base, c.s.closed = st, true
	}
	if c.s.current == c {
		c.s.current = nil
	}
}

// addStats adds the counters of two ClientStats, Unknown if either is.
// Delay is b's: the later client's.
func addStats(a, b ClientStats) ClientStats {
	add := func(x, y int64) int64 {
		if x == Unknown || y == Unknown {
			return Unknown
		}
		return x + y
	}
	return ClientStats{
		Requests:      add(a.Requests, b.Requests),
		Hedges:        add(a.Hedges, b.Hedges),
		HedgeWins:     add(a.HedgeWins, b.HedgeWins),
		RefusedBudget: add(a.RefusedBudget, b.RefusedBudget),
		Wasted:        time.Duration(add(int64(a.Wasted), int64(b.Wasted))),
		Delay:         b.Delay,
		PoolWaits:     add(a.PoolWaits, b.PoolWaits),
		PoolWaitTime:  time.Duration(add(int64(a.PoolWaitTime), int64(b.PoolWaitTime))),
		PoolTimeouts:  add(a.PoolTimeouts, b.PoolTimeouts),
		Dials:         add(a.Dials, b.Dials),
	}
}

// Describe sends the descriptors of every series Metrics may export.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.requests, m.hedges, m.wins, m.refused, m.wasted, m.delay, m.latency, m.runs, m.running} {
		ch <- d
	}
}

// Collect reads every configuration's clients now.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, s := range m.series {
		lv := []string{key.config, key.backend}
		ch <- prometheus.MustNewConstMetric(m.runs, prometheus.CounterValue, float64(s.runs), lv...)
		running := 0.0
		if s.current != nil {
			running = 1
		}
		ch <- prometheus.MustNewConstMetric(m.running, prometheus.GaugeValue, running, lv...)
		st, known := s.base, s.closed
		if s.current != nil {
			cur := s.current.Client.Stats()
			if known {
				st = addStats(st, cur)
			} else {
				st, known = cur, true
			}
		}
		if !known {
			continue // no client made yet
		}
		counter := func(d *prometheus.Desc, v int64, extra ...string) {
			if v != Unknown {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(lv, extra...)...)
			}
		}
		counter(m.requests, st.Requests)
		counter(m.hedges, st.Hedges)
		counter(m.wins, st.HedgeWins)
		counter(m.refused, st.RefusedBudget, hedge.RefusedBudget.String())
		if st.Wasted != Unknown {
			ch <- prometheus.MustNewConstMetric(m.wasted, prometheus.CounterValue, st.Wasted.Seconds(), lv...)
		}
		if s.current != nil && st.Delay != Unknown && st.Delay != hedge.Never {
			ch <- prometheus.MustNewConstMetric(m.delay, prometheus.GaugeValue, st.Delay.Seconds(), lv...)
		}
		snap := s.latency.Snapshot()
		q := func(p float64) float64 {
			if snap.Count == 0 {
				return math.NaN()
			}
			return time.Duration(snap.Quantile(p)).Seconds()
		}
		ch <- prometheus.MustNewConstSummary(m.latency, uint64(snap.Count), time.Duration(snap.Sum).Seconds(),
			map[float64]float64{0.5: q(0.5), 0.9: q(0.9), 0.99: q(0.99), 0.999: q(0.999)},
			append(lv, hedgeprom.PathCaller)...)
	}
}
