package hedgeotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tailcut/hedge/fleet"
)

// FleetWatcher is what [RegisterFleet] reads of a pod's fleet policy:
// *fleet.Watcher implements it. Both methods are called at collection
// time and must not block.
type FleetWatcher interface {
	Status() fleet.PodStatus
	Stats() fleet.Stats
}

// RegisterFleet creates instruments on meter for the policy document that
// w applies, and one callback that reads w at collection time. Each point
// has the "service" attribute of the pod's service (the pod itself is the
// resource's service.instance.id):
//
//	hedge.fleet.policy.version{service}          gauge    1          the applied document's version; 0 on the Config in code
//	hedge.fleet.policy.revision{service}         gauge    1          the store's revision of it, where the store has one
//	hedge.fleet.policy.applied_time{service}     gauge    s          when it was applied, Unix time; 0 before any
//	hedge.fleet.policy.state{service,state}      gauge    1          1 for the pod's state (code, applied, stale, fallback), 0 for the others
//	hedge.fleet.policy.applied{service}          counter  {document} documents applied
//	hedge.fleet.policy.refused{service,reason}   counter  {document} documents refused, by reason (invalid, too_large, service, stale, not_live)
//	hedge.fleet.store.errors{service}            counter  {error}    errors the store's source reported
//	hedge.fleet.fallbacks{service}               counter  {fallback} falls back after LostAfter without the store
//
// Every state and reason is observed, zero or not. The error matches
// [ErrInvalid].
func RegisterFleet(meter metric.Meter, w FleetWatcher) (metric.Registration, error) {
	var errs []error
	if meter == nil {
		errs = append(errs, errors.New("meter is nil: pass one from a MeterProvider, for instance otel.Meter(\"github.com/tailcut/hedge\")"))
	}
	if w == nil {
		errs = append(errs, errors.New("the fleet watcher is nil: pass the *fleet.Watcher of the pod"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	var ierrs []error
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		ierrs = append(ierrs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		ierrs = append(ierrs, err)
		return c
	}
	version := gauge("hedge.fleet.policy.version", "1", "Version of the fleet policy document the pod runs; 0 while it runs the Config in code.")
	revision := gauge("hedge.fleet.policy.revision", "1", "The store's revision of the policy document the pod runs (etcd's mod revision); 0 where the store has none.")
	appliedAt := gauge("hedge.fleet.policy.applied_time", "s", "When the pod applied the policy document it runs, in Unix seconds; 0 before any.")
	state := gauge("hedge.fleet.policy.state", "1", "1 for the pod's policy state, 0 for the others: code (no document), applied, stale (store lost, last good document kept), fallback (store lost for too long).")
	applied := counter("hedge.fleet.policy.applied", "{document}", "Policy documents the pod applied, kill switches' ends included.")
	refused := counter("hedge.fleet.policy.refused", "{document}", "Policy documents the pod refused, keeping the last good one, by reason: invalid, too_large, service (for another service), stale (not newer than the applied one), not_live (a setting a Hedger cannot change while it runs).")
	storeErrors := counter("hedge.fleet.store.errors", "{error}", "Errors the policy store's source reported: unreachable, a watch cut, a missing file.")
	fallbacks := counter("hedge.fleet.fallbacks", "{fallback}", "Times the pod fell back (off, or the Config in code) after being without its policy store for too long.")
	if err := errors.Join(ierrs...); err != nil {
		return nil, fmt.Errorf("hedgeotel: creating instruments: %w", err)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s, st := w.Status(), w.Stats()
		svc := attribute.String("service", s.Service)
		attrs := metric.WithAttributes(svc)
		o.ObserveFloat64(version, float64(s.Version), attrs)
		o.ObserveFloat64(revision, float64(s.Revision), attrs)
		at := 0.0
		if !s.Applied.IsZero() {
			at = float64(s.Applied.UnixNano()) / 1e9
		}
		o.ObserveFloat64(appliedAt, at, attrs)
		for _, name := range fleet.States() {
			v := 0.0
			if name == s.State {
				v = 1
			}
			o.ObserveFloat64(state, v, metric.WithAttributes(svc, attribute.String("state", name)))
		}
		o.ObserveInt64(applied, st.Applied, attrs)
		for _, why := range fleet.Reasons() {
			o.ObserveInt64(refused, st.Refused[why], metric.WithAttributes(svc, attribute.String("reason", string(why))))
		}
		o.ObserveInt64(storeErrors, st.StoreErrors, attrs)
		o.ObserveInt64(fallbacks, st.Fallbacks, attrs)
		return nil
	}, version, revision, appliedAt, state, applied, refused, storeErrors, fallbacks)
	if err != nil {
		return nil, fmt.Errorf("hedgeotel: registering callback: %w", err)
	}
	return reg, nil
}
