package hedgeotel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tailcut/hedge/hedgewatch"
	"github.com/tailcut/hedge/internal/hedgeset"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Watcher is what RegisterWatchers reads of an alarm: *hedgewatch.Watcher
// implements it. State is called at collection time and must not block.
type Watcher interface {
	State() hedgewatch.State
}

// RegisterWatchers creates four observable gauges on meter and one
// callback that reads each watcher's State at collection time. watchers
// are keyed by the "hedger" attribute of the Hedger each watches, the name
// given to Register, so that the alarm lines up with that Hedger's points:
//
//	hedge.watch.alarmed{hedger}        gauge  {alarm}    1 while the alarm is raised, else 0
//	hedge.watch.shadowed{hedger}       gauge  {alarm}    1 while the watcher holds the Hedger in Shadow, else 0
//	hedge.watch.hedge_rate{hedger}     gauge  1          hedges decided per request, last judged interval
//	hedge.watch.baseline_rate{hedger}  gauge  1          the baseline that rate is compared with
//
// Every invalid argument is reported at once, in one error matching
// ErrInvalid.
func RegisterWatchers(meter metric.Meter, watchers map[string]Watcher) (metric.Registration, error) {
	var errs []error
	if meter == nil {
		errs = append(errs, errors.New("meter is nil: pass one from a MeterProvider, for instance otel.Meter(\"github.com/tailcut/hedge\")"))
	}
	if len(watchers) == 0 {
		errs = append(errs, errors.New("no watchers: pass at least one *hedgewatch.Watcher, keyed by the name of the Hedger it watches"))
	}
	type named struct {
		name string
		w    Watcher
	}
	var list []named
	for name, w := range watchers {
		switch {
		case name == "":
			errs = append(errs, errors.New("a watcher has an empty name: key it by the name of the Hedger it watches"))
		case w == nil:
			errs = append(errs, fmt.Errorf("watcher %q is nil: make it with hedgewatch.New", name))
		default:
			list = append(list, named{name, w})
		}
	}
	if len(errs) > 0 {
		// The watchers' mistakes in a fixed order, whatever the map's.
		first := 0
		if meter == nil {
			first = 1
		}
		slices.SortFunc(errs[first:], func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	slices.SortFunc(list, func(a, b named) int { return cmp.Compare(a.name, b.name) })

	var ierrs []error
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		ierrs = append(ierrs, err)
		return g
	}
	alarmed := gauge("hedge.watch.alarmed", "{alarm}",
		"1 while hedgewatch's alarm is raised for the Hedger (hedge rate far above its baseline, or hedges slower than primaries), else 0.")
	shadowed := gauge("hedge.watch.shadowed", "{alarm}",
		"1 while hedgewatch holds the Hedger in Shadow because of the alarm (AutoShadow): no hedge is sent, hedges are only counted. Else 0.")
	rate := gauge("hedge.watch.hedge_rate", "1",
		"Hedges decided (sent, or counted in Shadow) per request in the last interval hedgewatch judged.")
	baseline := gauge("hedge.watch.baseline_rate", "1",
		"Mean hedge rate of the recent healthy intervals that hedgewatch compares each interval with.")
	if err := errors.Join(ierrs...); err != nil {
		return nil, fmt.Errorf("hedgeotel: creating instruments: %w", err)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, n := range list {
			s := n.w.State()
			attrs := metric.WithAttributes(attribute.String(hedgeset.LabelHedger, n.name))
			o.ObserveFloat64(alarmed, b(s.Alarmed), attrs)
			o.ObserveFloat64(shadowed, b(s.Shadowed), attrs)
			o.ObserveFloat64(rate, s.Rate, attrs)
			o.ObserveFloat64(baseline, s.BaselineRate, attrs)
		}
		return nil
	}, alarmed, shadowed, rate, baseline)
	if err != nil {
		return nil, fmt.Errorf("hedgeotel: registering callback: %w", err)
	}
	return reg, nil
}
