package fleetetcd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

// TestWatcherThroughEtcd runs a pod's fleet.Watcher on the etcd source
// and announcer: a push is applied and announced, another service's
// document is refused, a lost store leaves the last good policy and says
// so, and a stopped pod leaves the list.
func TestWatcherThroughEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	m := c.Members[0]
	cli := newClient(t, c.Endpoints()...)
	store := fleetetcd.Store{Client: cli}
	lister := fleetetcd.Store{Client: newClient(t, c.Endpoints()...)}
	h, err := hedge.New(hedge.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := store.Source("checkout")
	src.Probe = probe
	ann := store.Announcer("checkout", "pod-a")
	events := make(chan fleet.Event, 100)
	w, err := fleet.NewWatcher(fleet.Options{
		Service:   "checkout",
		Instance:  "pod-a",
		Source:    src,
		Hedgers:   map[string]*hedge.Hedger{"api": h},
		Announcer: ann,
		OnEvent:   func(e fleet.Event) { events <- e },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	next := func(what string, ok func(fleet.Event) bool) fleet.Event {
		t.Helper()
		deadline := time.After(bound)
		for {
			select {
			case e := <-events:
				if ok(e) {
					return e
				}
			case <-deadline:
				t.Fatalf("no event of %s within %v; status %+v", what, bound, w.Status())
			}
		}
	}

	push(t, cli, "checkout", doc("checkout", 1))
	next("version 1 applied", func(e fleet.Event) bool { return e.Kind == fleet.EventApplied && e.Version == 1 })
	waitPods(t, lister, func(pods []fleet.PodStatus) bool {
		return len(pods) == 1 && pods[0].Instance == "pod-a" && pods[0].Version == 1 && pods[0].State == fleet.StateApplied
	})

	if _, err := cli.Put(ctx, store.PolicyKey("checkout"), string(doc("search", 2))); err != nil {
		t.Fatal(err)
	}
	e := next("another service's document refused", func(e fleet.Event) bool { return e.Kind == fleet.EventRefused })
	if e.Reason != fleet.ReasonService || w.Status().Version != 1 {
		t.Fatalf("another service's document: %+v, status %+v; want refused for its service, version 1 in force", e, w.Status())
	}

	m.Kill()
	next("the store lost", func(e fleet.Event) bool { return e.Kind == fleet.EventStoreLost })
	if st := w.Status(); st.Version != 1 || st.State != fleet.StateStale {
		t.Fatalf("with the store lost: %+v, want version 1, stale", st)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	next("the store back", func(e fleet.Event) bool { return e.Kind == fleet.EventStoreBack })
	push(t, cli, "checkout", doc("checkout", 3))
	next("version 3 applied", func(e fleet.Event) bool { return e.Kind == fleet.EventApplied && e.Version == 3 })
	waitPods(t, lister, func(pods []fleet.PodStatus) bool { return len(pods) == 1 && pods[0].Version == 3 })

	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	done <- nil
	if err := ann.Close(); err != nil {
		t.Fatal(err)
	}
	waitPods(t, lister, func(pods []fleet.PodStatus) bool { return len(pods) == 0 })
}

func waitPods(t *testing.T, s fleetetcd.Store, ok func([]fleet.PodStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		pods, err := s.List(context.Background(), "checkout")
		if err == nil && ok(pods) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pods listed are %+v (%v) after %v", pods, err, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
