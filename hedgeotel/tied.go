package hedgeotel

import (
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/tied"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Option adds to what Register exports.
type Option func(*options)

type options struct {
	tiedClients  []hedgeset.Item[tied.Client]
	tiedServers  []hedgeset.Item[tied.Server]
	maxShards    int  // WithMaxShards
	maxShardsSet bool // WithMaxShards was given
}

// WithTiedClient exports c's Stats under the "client" attribute name,
// which must be non-empty and given once:
//
//	hedge.tied.client.calls{client}            counter  {request}  tied calls
//	hedge.tied.client.second_copies{client}    counter  {copy}     second copies sent
//	hedge.tied.client.copies.dropped{client}   counter  {copy}     copies dropped for their sibling
//	hedge.tied.client.copies.no_spare{client}  counter  {copy}     spare copies refused: no free worker
//	hedge.tied.client.copies.spares_skipped{client} counter {copy} spare copies not sent: reports said useless
//	hedge.tied.client.second_wins{client}      counter  {request}  calls won by the second copy
//	hedge.tied.client.failures{client}         counter  {request}  tied calls that returned an error
//	hedge.tied.client.copies.not_sent{client}  counter  {copy}     copies that never reached a server
//
// Give it more than once for several clients, each under its own name.
func WithTiedClient(name string, c *tied.Client) Option {
	return func(o *options) {
		o.tiedClients = append(o.tiedClients, hedgeset.Item[tied.Client]{Name: name, V: c})
	}
}

// WithTiedServer exports s's Stats under the "server" attribute name,
// which must be non-empty and given once: the requests running and
// queued now (gauges), and the counters of requests started, refused,
// abandoned and dropped, and of the claims sent (by outcome: won, lost,
// failed) and received; see the package documentation for the list.
//
// Give it more than once for several servers, each under its own name.
// Register may then be given no Hedger: a server process has none.
func WithTiedServer(name string, s *tied.Server) Option {
	return func(o *options) {
		o.tiedServers = append(o.tiedServers, hedgeset.Item[tied.Server]{Name: name, V: s})
	}
}

// seriesInstrument is the instrument of one hedgeset series: i for
// counts, f for seconds.
type seriesInstrument struct {
	i metric.Int64Observable
	f metric.Float64Observable
}

// newSeries creates the instruments of series under prefix on meter,
// appending creation errors to errs and the instruments to all.
func newSeries[S any](meter metric.Meter, prefix string, series []hedgeset.Series[S], errs *[]error, all *[]metric.Observable) []seriesInstrument {
	out := make([]seriesInstrument, len(series))
	for n, s := range series {
		name := "hedge." + prefix + "." + s.Name
		unit, desc := metric.WithUnit(s.Unit), metric.WithDescription(s.Help)
		var err error
		switch {
		case s.Kind == hedgeset.Counter && s.Seconds:
			out[n].f, err = meter.Float64ObservableCounter(name, unit, desc)
		case s.Kind == hedgeset.Counter:
			out[n].i, err = meter.Int64ObservableCounter(name, unit, desc)
		case s.Seconds:
			out[n].f, err = meter.Float64ObservableGauge(name, unit, desc)
		default:
			out[n].i, err = meter.Int64ObservableGauge(name, unit, desc)
		}
		*errs = append(*errs, err)
		if out[n].f != nil {
			*all = append(*all, out[n].f)
		} else if out[n].i != nil {
			*all = append(*all, out[n].i)
		}
	}
	return out
}

// observeSeries observes the values of series in s with the attributes
// given.
func observeSeries[S any](o metric.Observer, ins []seriesInstrument, series []hedgeset.Series[S], s S, attrs ...attribute.KeyValue) {
	for n, sr := range series {
		for _, v := range sr.Values(s) {
			as := attrs
			if sr.Label != "" {
				as = append(as[:len(as):len(as)], attribute.String(sr.Label, v.Label))
			}
			if sr.Seconds {
				o.ObserveFloat64(ins[n].f, seconds(v.N), metric.WithAttributes(as...))
			} else {
				o.ObserveInt64(ins[n].i, v.N, metric.WithAttributes(as...))
			}
		}
	}
}
