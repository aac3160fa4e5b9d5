package hedgectl_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/hedgectl"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
)

// TestFleetStatus checks that GET / shows the policy document the pod
// runs and the live settings it gave each Hedger, and that the
// endpoint's own kill switch still shows beside them.
func TestFleetStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		items := mustNew(t, hedge.Config{})
		path := filepath.Join(t.TempDir(), "policy.yaml")
		doc := "service: checkout\nversion: 12\nhedgers:\n  \"*\": {mode: shadow, maxAttempts: 3}\n  items:\n    ops: {get: {mode: on, percentile: 99}}\n"
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		w := settest.Watch(t, fleet.Options{Service: "checkout", Instance: "pod-3", Source: fleet.NewFile(path),
			Hedgers: map[string]*hedge.Hedger{"items": items}})
		synctest.Wait()

		ctl, err := hedgectl.New(map[string]*hedge.Hedger{"items": items}, hedgectl.Options{Fleet: w})
		if err != nil {
			t.Fatal(err)
		}
		_, s := serve(t, ctl, http.MethodPost, "/mode", `{"mode":"off"}`, "127.0.0.1:40000")
		if f := s.Fleet; f == nil || f.Version != 12 || f.State != fleet.StateApplied || f.Instance != "pod-3" || f.Source != "file "+path {
			t.Fatalf("fleet status %+v, want version 12 applied on pod-3", f)
		}
		hs := s.Hedgers[0]
		if hs.Mode != "off" || hs.Live == nil || hs.Live.Mode != "shadow" || hs.Live.MaxAttempts != 3 ||
			hs.Live.Ops["get"].Mode != "on" || hs.Live.Ops["get"].Percentile != 99 || hs.Live.Ops["get"].MaxAttempts != 3 {
			t.Fatalf("Hedger state %+v, live %+v; want mode off, live shadow with 3 attempts and get on at p99", hs, hs.Live)
		}

		// Without Options.Fleet, neither shows.
		plain, err := hedgectl.New(map[string]*hedge.Hedger{"other": mustNew(t, hedge.Config{})}, hedgectl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, s := serve(t, plain, http.MethodGet, "/", "", "127.0.0.1:40000"); s.Fleet != nil || s.Hedgers[0].Live != nil {
			t.Fatalf("state without a fleet: %+v", s)
		}
	})
}
