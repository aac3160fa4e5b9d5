package hedgeprom

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/tied"
)

// WithTiedClient exports c's Stats under the "client" label name, which
// must be non-empty and given once:
//
//	hedge_tied_client_calls_total{client}            counter  tied calls
//	hedge_tied_client_second_copies_total{client}    counter  second copies sent
//	hedge_tied_client_copies_dropped_total{client}   counter  copies dropped for their sibling
//	hedge_tied_client_copies_no_spare_total{client}  counter  spare copies refused: no free worker
//	hedge_tied_client_copies_spares_skipped_total{client}  counter  spare copies not sent: reports said useless
//	hedge_tied_client_second_wins_total{client}      counter  calls won by the second copy
//	hedge_tied_client_failures_total{client}         counter  tied calls that returned an error
//	hedge_tied_client_copies_not_sent_total{client}  counter  copies that never reached a server
//
// Give it more than once for several clients, each under its own name.
func WithTiedClient(name string, c *tied.Client) Option {
	return func(o *options) {
		o.tiedClients = append(o.tiedClients, hedgeset.Item[tied.Client]{Name: name, V: c})
	}
}

// WithTiedServer exports s's Stats under the "server" label name, which
// must be non-empty and given once: the requests running and queued now
// (gauges), and the counters of requests started, refused, abandoned and
// dropped, and of the claims sent (by outcome: won, lost, failed) and
// received; see the package documentation for the list.
//
// Give it more than once for several servers, each under its own name.
// A Collector may export tied servers alone, with no Hedger: a server
// process has none.
func WithTiedServer(name string, s *tied.Server) Option {
	return func(o *options) {
		o.tiedServers = append(o.tiedServers, hedgeset.Item[tied.Server]{Name: name, V: s})
	}
}

// seriesName is the Prometheus name of a hedgeset series under prefix.
func seriesName[S any](namespace, prefix string, s hedgeset.Series[S]) string {
	name := strings.ReplaceAll(prefix+"."+s.Name, ".", "_")
	if s.Seconds {
		name += "_seconds"
	}
	if s.Kind == hedgeset.Counter {
		name += "_total"
	}
	return prometheus.BuildFQName(namespace, "", name)
}

// seriesDescs returns the descriptors of series, labelled by labels and
// each series' own label.
func seriesDescs[S any](namespace, prefix string, series []hedgeset.Series[S], labels ...string) []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(series))
	for i, s := range series {
		ls := labels
		if s.Label != "" {
			ls = append(ls[:len(ls):len(ls)], s.Label)
		}
		out[i] = prometheus.NewDesc(seriesName(namespace, prefix, s), s.Help, ls, nil)
	}
	return out
}

// collectSeries sends the values of series in s, described by descs,
// with the label values given.
func collectSeries[S any](ch chan<- prometheus.Metric, descs []*prometheus.Desc, series []hedgeset.Series[S], s S, labels ...string) {
	for i, sr := range series {
		typ := prometheus.CounterValue
		if sr.Kind == hedgeset.Gauge {
			typ = prometheus.GaugeValue
		}
		for _, v := range sr.Values(s) {
			x := float64(v.N)
			if sr.Seconds {
				x = seconds(v.N)
			}
			ls := labels
			if sr.Label != "" {
				ls = append(ls[:len(ls):len(ls)], v.Label)
			}
			ch <- prometheus.MustNewConstMetric(descs[i], typ, x, ls...)
		}
	}
}
