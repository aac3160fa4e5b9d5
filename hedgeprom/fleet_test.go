package hedgeprom_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
)

// TestFleetCollector runs a pod's Watcher over a policy file through an
// applied document, a refused one and a lost store, and checks every
// fleet series against what the pod did.
func TestFleetCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "policy.yaml")
		write := func(doc string) {
			if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
			time.Sleep(fleet.DefaultPoll + time.Millisecond)
			synctest.Wait()
		}
		write("service: checkout\nversion: 3\nhedgers: {\"*\": {mode: shadow}}\n")
		w := settest.Watch(t, fleet.Options{Service: "checkout", Instance: "pod-1", Source: fleet.NewFile(path),
			Hedgers: map[string]*hedge.Hedger{"api": h}})
		synctest.Wait()
		applied := w.Status().Applied
		write("service: checkout\nversion: 4\nhedgers: {\"*\": {mode: maybe}}\n")
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(fleet.DefaultPoll)
		synctest.Wait()

		c, err := hedgeprom.NewFleet("hedge", w)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`
# HELP hedge_fleet_policy_version Version of the fleet policy document the pod runs; 0 while it runs the Config in code.
# TYPE hedge_fleet_policy_version gauge
hedge_fleet_policy_version{service="checkout"} 3
# HELP hedge_fleet_policy_applied_timestamp_seconds When the pod applied the policy document it runs, in Unix seconds; 0 before any.
# TYPE hedge_fleet_policy_applied_timestamp_seconds gauge
hedge_fleet_policy_applied_timestamp_seconds{service="checkout"} %v
# HELP hedge_fleet_policy_applied_total Policy documents the pod applied, kill switches' ends included.
# TYPE hedge_fleet_policy_applied_total counter
hedge_fleet_policy_applied_total{service="checkout"} 1
# HELP hedge_fleet_store_errors_total Errors the policy store's source reported: unreachable, a watch cut, a missing file.
# TYPE hedge_fleet_store_errors_total counter
hedge_fleet_store_errors_total{service="checkout"} 1
# HELP hedge_fleet_fallbacks_total Times the pod fell back (off, or the Config in code) after being without its policy store for too long.
# TYPE hedge_fleet_fallbacks_total counter
hedge_fleet_fallbacks_total{service="checkout"} 0
`, float64(applied.UnixNano())/1e9)
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"hedge_fleet_policy_version", "hedge_fleet_policy_applied_timestamp_seconds", "hedge_fleet_policy_applied_total",
			"hedge_fleet_store_errors_total", "hedge_fleet_fallbacks_total"); err != nil {
			t.Error(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, l := range m.GetLabel() {
					if l.GetName() != "service" {
						key += "/" + l.GetValue()
					}
				}
				got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		for key, v := range map[string]float64{
			"hedge_fleet_policy_state/stale": 1, "hedge_fleet_policy_state/applied": 0, "hedge_fleet_policy_state/code": 0, "hedge_fleet_policy_state/fallback": 0,
			"hedge_fleet_policy_refused_total/invalid": 1, "hedge_fleet_policy_refused_total/stale": 0, "hedge_fleet_policy_refused_total/too_large": 0,
			"hedge_fleet_policy_refused_total/service": 0, "hedge_fleet_policy_refused_total/not_live": 0, "hedge_fleet_policy_revision": 0,
		} {
			if g, ok := got[key]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", key, g, ok, v)
			}
		}
		if _, err := hedgeprom.NewFleet("no-dashes", nil); err == nil || !strings.Contains(err.Error(), "namespace") || !strings.Contains(err.Error(), "nil") {
			t.Errorf("NewFleet with a bad namespace and no watcher: %v", err)
		}
	})
}
