package fleetfeature_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetfeature"
)

// doc is a policy document, as a flag's object value, that sets every
// Hedger's mode.
func doc(version float64, mode string) map[string]any {
	return map[string]any{
		"service": "checkout",
		"version": version,
		"hedgers": map[string]any{"*": map[string]any{"mode": mode}},
	}
}

// TestWatcherFollowsTheFlag runs a fleet.Watcher on a Source and a real
// Hedger: each step of the flag system reaches the Hedger, its Stats and
// the pod's status.
func TestWatcherFollowsTheFlag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{})
		if err != nil {
			t.Fatal(err)
		}
		p := newFaultyProvider(flags(doc(7, "shadow")))
		api := isolated.NewAPI()
		if err := api.SetProviderAndWait(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		events := make(chan fleet.Event, 16)
		src := &fleetfeature.Source{Client: api.NewClient(), Flag: flag, Service: "checkout", Instance: "pod-a"}
		w, err := fleet.NewWatcher(fleet.Options{
			Service: "checkout", Instance: "pod-a", Source: src,
			Hedgers: map[string]*hedge.Hedger{"db": h},
			OnEvent: func(e fleet.Event) { events <- e },
			Logger:  slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
			if err := api.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}()

		expect := func(kind fleet.EventKind, version int64) fleet.Event {
			t.Helper()
			e := <-events
			if e.Kind != kind || e.Version != version {
				t.Fatalf("event %v version %d (%v), want %v version %d", e.Kind, e.Version, e.Err, kind, version)
			}
			return e
		}
		update := func(fs map[string]memprovider.InMemoryFlag) {
			p.setFlags(fs)
			p.emit(openfeature.ProviderConfigChange, "")
		}

		expect(fleet.EventApplied, 7)
		if got := h.Live().Mode; got != hedge.Shadow {
			t.Errorf("v7: Hedger mode %v, want shadow", got)
		}
		if s := w.Status(); s.Version != 7 || s.Revision != 0 || s.State != fleet.StateApplied || s.Source != src.String() {
			t.Errorf("v7: status %+v", s)
		}

		update(flags(doc(8, "off")))
		expect(fleet.EventApplied, 8)
		if got := h.Live().Mode; got != hedge.Off {
			t.Errorf("v8: Hedger mode %v, want off", got)
		}

		// A value that is not a document: refused, v8 stays.
		update(flags(true))
		if e := expect(fleet.EventRefused, 0); e.Reason != fleet.ReasonInvalid {
			t.Errorf("a boolean flag: refused for %q, want %q", e.Reason, fleet.ReasonInvalid)
		}
		// The document's own version orders documents: an equal one,
		// changed, is refused.
		update(flags("service: checkout\nversion: 8\nhedgers: {'*': {mode: on}}\n"))
		if e := expect(fleet.EventRefused, 8); e.Reason != fleet.ReasonStale {
			t.Errorf("version 8 again: refused for %q, want %q", e.Reason, fleet.ReasonStale)
		}
		if got := h.Live().Mode; got != hedge.Off || w.Status().Version != 8 {
			t.Errorf("after refusals: mode %v, version %d; want off, 8", got, w.Status().Version)
		}

		// The provider fails: the store is lost, v8 stays.
		p.emit(openfeature.ProviderError, "sync stream closed")
		if e := expect(fleet.EventStoreLost, 0); !errors.Is(e.Err, fleetfeature.ErrProvider) {
			t.Errorf("store lost with %v, want ErrProvider", e.Err)
		}
		if s := w.Status(); s.State != fleet.StateStale || s.Version != 8 {
			t.Errorf("provider in error: status %+v, want stale at version 8", s)
		}
		// Ready again: the store is back, and the flag still holds the
		// refused version 8, which is refused again.
		p.emit(openfeature.ProviderReady, "")
		expect(fleet.EventStoreBack, 0)
		expect(fleet.EventRefused, 8)

		update(flags(doc(9, "on")))
		expect(fleet.EventApplied, 9)

		update(map[string]memprovider.InMemoryFlag{})
		expect(fleet.EventDeleted, 0)
		if s := w.Status(); s.State != fleet.StateCode || s.Version != 0 {
			t.Errorf("flag removed: status %+v, want the Config in code", s)
		}

		st := w.Stats()
		if st.Applied != 3 || st.Refused[fleet.ReasonInvalid] != 1 || st.Refused[fleet.ReasonStale] != 2 || st.StoreErrors != 1 {
			t.Errorf("stats %+v", st)
		}

	})
}
