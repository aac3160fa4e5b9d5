package hedgeprom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailcut/hedge/fleet"
)

// FleetWatcher is what [NewFleet] reads of a pod's fleet policy:
// *fleet.Watcher implements it. Both methods are called at scrape time
// and must not block.
type FleetWatcher interface {
	Status() fleet.PodStatus
	Stats() fleet.Stats
}

// FleetCollector is a prometheus.Collector for the policy document a pod
// runs: make one with [NewFleet] and register it beside the [Collector].
type FleetCollector struct {
	w                                   FleetWatcher
	version, revision, appliedAt, state *prometheus.Desc
	applied, refused, storeErrors       *prometheus.Desc
	fallbacks                           *prometheus.Desc
}

// NewFleet returns a collector of the policy that w applies, with the
// "service" label of the pod's service (the pod itself is Prometheus's
// instance label):
//
//	hedge_fleet_policy_version{service}                   gauge    the applied document's version; 0 on the Config in code
//	hedge_fleet_policy_revision{service}                  gauge    the store's revision of it, where the store has one
//	hedge_fleet_policy_applied_timestamp_seconds{service} gauge    when it was applied, Unix time; 0 before any
//	hedge_fleet_policy_state{service,state}               gauge    1 for the pod's state (code, applied, stale, fallback), 0 for the others
//	hedge_fleet_policy_applied_total{service}             counter  documents applied
//	hedge_fleet_policy_refused_total{service,reason}      counter  documents refused, by reason (invalid, too_large, service, stale, not_live)
//	hedge_fleet_store_errors_total{service}               counter  errors the store's source reported
//	hedge_fleet_fallbacks_total{service}                  counter  falls back after LostAfter without the store
//
// Every state and reason is exported, zero or not, so that a query such
// as `hedge_fleet_policy_version != scalar(max(hedge_fleet_policy_version))`
// lists the pods behind. The error matches [ErrInvalid].
func NewFleet(namespace string, w FleetWatcher) (*FleetCollector, error) {
	var errs []error
	if !namespaceRE.MatchString(namespace) {
		errs = append(errs, fmt.Errorf("namespace %q is not a valid metric name prefix: use letters, digits and underscores, e.g. \"hedge\"", namespace))
	}
	if w == nil {
		errs = append(errs, errors.New("the fleet watcher is nil: pass the *fleet.Watcher of the pod"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "fleet", name), help, append([]string{"service"}, labels...), nil)
	}
	return &FleetCollector{
		w:         w,
		version:   desc("policy_version", "Version of the fleet policy document the pod runs; 0 while it runs the Config in code."),
		revision:  desc("policy_revision", "The store's revision of the policy document the pod runs (etcd's mod revision); 0 where the store has none."),
		appliedAt: desc("policy_applied_timestamp_seconds", "When the pod applied the policy document it runs, in Unix seconds; 0 before any."),
		state: desc("policy_state", "1 for the pod's policy state, 0 for the others: code (no document), applied, stale (store lost, last good document kept), fallback (store lost for too long).",
			"state"),
		applied: desc("policy_applied_total", "Policy documents the pod applied, kill switches' ends included."),
		refused: desc("policy_refused_total", "Policy documents the pod refused, keeping the last good one, by reason: invalid, too_large, service (for another service), stale (not newer than the applied one), not_live (a setting a Hedger cannot change while it runs).",
			"reason"),
		storeErrors: desc("store_errors_total", "Errors the policy store's source reported: unreachable, a watch cut, a missing file."),
		fallbacks:   desc("fallbacks_total", "Times the pod fell back (off, or the Config in code) after being without its policy store for too long."),
	}, nil
}

// Describe sends the descriptors of every series.
func (c *FleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.version, c.revision, c.appliedAt, c.state, c.applied, c.refused, c.storeErrors, c.fallbacks} {
		ch <- d
	}
}

// Collect reads the watcher's status and counts.
func (c *FleetCollector) Collect(ch chan<- prometheus.Metric) {
	s, st := c.w.Status(), c.w.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{s.Service}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Service}, labels...)...)
	}
	gauge(c.version, float64(s.Version))
	gauge(c.revision, float64(s.Revision))
	at := 0.0
	if !s.Applied.IsZero() {
		at = float64(s.Applied.UnixNano()) / 1e9
	}
	gauge(c.appliedAt, at)
	for _, state := range fleet.States() {
		v := 0.0
		if state == s.State {
			v = 1
		}
		gauge(c.state, v, state)
	}
	counter(c.applied, st.Applied)
	for _, why := range fleet.Reasons() {
		counter(c.refused, st.Refused[why], string(why))
	}
	counter(c.storeErrors, st.StoreErrors)
	counter(c.fallbacks, st.Fallbacks)
}
