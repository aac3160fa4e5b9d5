package hedgeotel_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
)

// TestRegisterFleet runs a pod's Watcher over a policy file that falls
// back once its file is gone for LostAfter, and checks every fleet point
// against what the pod did.
func TestRegisterFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(path, []byte("service: checkout\nversion: 9\nhedgers: {\"*\": {mode: on}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := settest.Watch(t, fleet.Options{Service: "checkout", Instance: "pod-1", Source: fleet.NewFile(path), LostAfter: time.Minute,
			Hedgers: map[string]*hedge.Hedger{"api": h}})
		synctest.Wait()
		applied := w.Status().Applied
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(fleet.DefaultPoll + time.Minute + time.Millisecond)
		synctest.Wait()

		r := sdkmetric.NewManualReader()
		meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")
		reg, err := hedgeotel.RegisterFleet(meter, w)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Unregister()
		got := collect(t, r)
		svc := "service=checkout"
		want := map[string]point{
			key("hedge.fleet.policy.version", svc):                     {9, "1", "gauge"},
			key("hedge.fleet.policy.revision", svc):                    {0, "1", "gauge"},
			key("hedge.fleet.policy.applied_time", svc):                {float64(applied.UnixNano()) / 1e9, "s", "gauge"},
			key("hedge.fleet.policy.applied", svc):                     {1, "{document}", "counter"},
			key("hedge.fleet.store.errors", svc):                       {1, "{error}", "counter"},
			key("hedge.fleet.fallbacks", svc):                          {1, "{fallback}", "counter"},
			key("hedge.fleet.policy.state", svc, "state=fallback"):     {1, "1", "gauge"},
			key("hedge.fleet.policy.state", svc, "state=applied"):      {0, "1", "gauge"},
			key("hedge.fleet.policy.state", svc, "state=stale"):        {0, "1", "gauge"},
			key("hedge.fleet.policy.state", svc, "state=code"):         {0, "1", "gauge"},
			key("hedge.fleet.policy.refused", svc, "reason=invalid"):   {0, "{document}", "counter"},
			key("hedge.fleet.policy.refused", svc, "reason=too_large"): {0, "{document}", "counter"},
			key("hedge.fleet.policy.refused", svc, "reason=service"):   {0, "{document}", "counter"},
			key("hedge.fleet.policy.refused", svc, "reason=stale"):     {0, "{document}", "counter"},
			key("hedge.fleet.policy.refused", svc, "reason=not_live"):  {0, "{document}", "counter"},
		}
		for k, p := range want {
			if g, ok := got[k]; !ok || g != p {
				t.Errorf("%s = %+v (present %v), want %+v", k, g, ok, p)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d points, want %d: %v", len(got), len(want), got)
		}
		if _, err := hedgeotel.RegisterFleet(nil, nil); !errors.Is(err, hedgeotel.ErrInvalid) {
			t.Errorf("RegisterFleet(nil, nil) = %v, want ErrInvalid", err)
		}
	})
}
