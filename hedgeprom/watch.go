package hedgeprom

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge/hedgewatch"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/tied"
)

// Watcher is what the collector reads of an alarm: *hedgewatch.Watcher
// implements it. State is called at scrape time and must not block.
type Watcher interface {
	State() hedgewatch.State
}

// Option adds to what a Collector exports.
type Option func(*options)

type options struct {
	watchers     map[string]Watcher
	buckets      []float64 // classic bucket bounds, seconds
	bucketsSet   bool      // WithBuckets was given
	tiedClients  []hedgeset.Item[tied.Client]
	tiedServers  []hedgeset.Item[tied.Server]
	maxShards    int  // WithMaxShards
	maxShardsSet bool // WithMaxShards was given
}

// WithWatcher exports w's state under the "hedger" label hedger, which
// must name a Hedger given to New (the one w watches):
//
//	hedge_watch_alarmed{hedger}        gauge  1 while the alarm is raised, else 0
//	hedge_watch_shadowed{hedger}       gauge  1 while the watcher holds the Hedger in Shadow (AutoShadow), else 0
//	hedge_watch_hedge_rate{hedger}     gauge  hedges decided per request in the last judged interval
//	hedge_watch_baseline_rate{hedger}  gauge  the baseline that rate is compared with
//
// Give it more than once for several watchers, each under its own name.
func WithWatcher(hedger string, w Watcher) Option {
	return func(o *options) {
		if o.watchers == nil {
			o.watchers = map[string]Watcher{}
		}
		o.watchers[hedger] = w
	}
}

// watchDescs are the descriptors of the watcher gauges.
type watchDescs struct {
	alarmed, shadowed, rate, baseline *prometheus.Desc
}

func newWatchDescs(namespace string) watchDescs {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "watch", name), help, []string{hedgeset.LabelHedger}, nil)
	}
	return watchDescs{
		alarmed: desc("alarmed",
			"1 while hedgewatch's alarm is raised for the Hedger (hedge rate far above its baseline, or hedges slower than primaries), else 0."),
		shadowed: desc("shadowed",
			"1 while hedgewatch holds the Hedger in Shadow because of the alarm (AutoShadow): no hedge is sent, hedges are only counted. Else 0."),
		rate: desc("hedge_rate",
			"Hedges decided (sent, or counted in Shadow) per request in the last interval hedgewatch judged."),
		baseline: desc("baseline_rate",
			"Mean hedge rate of the recent healthy intervals that hedgewatch compares each interval with."),
	}
}

// validateWatchers reports watchers under names that are not Hedgers of
// the set, and nil watchers.
func validateWatchers(ws map[string]Watcher, hedgers map[string]bool) []error {
	var errs []error
	for name, w := range ws {
		if w == nil {
			errs = append(errs, fmt.Errorf("WithWatcher(%q, nil): pass the *hedgewatch.Watcher of that Hedger", name))
		}
		if !hedgers[name] {
			errs = append(errs, fmt.Errorf("WithWatcher(%q, ...): no Hedger is named %q; use the name the Hedger has in the map given to New", name, name))
		}
	}
	return errs
}

func (d watchDescs) collect(ch chan<- prometheus.Metric, name string, w Watcher) {
	s := w.State()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(d.alarmed, prometheus.GaugeValue, b(s.Alarmed), name)
	ch <- prometheus.MustNewConstMetric(d.shadowed, prometheus.GaugeValue, b(s.Shadowed), name)
	ch <- prometheus.MustNewConstMetric(d.rate, prometheus.GaugeValue, s.Rate, name)
	ch <- prometheus.MustNewConstMetric(d.baseline, prometheus.GaugeValue, s.BaselineRate, name)
}
