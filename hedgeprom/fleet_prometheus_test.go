package hedgeprom_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/promtest"
)

// fleetPod is one pod of TestFleetPrometheus: a Watcher of its own policy
// file, its collector served on /metrics, and a channel told of each
// version it applies.
type fleetPod struct {
	path    string
	addr    string
	w       *fleet.Watcher
	applied chan int64
}

func startFleetPod(t *testing.T, ctx context.Context, name string) *fleetPod {
	t.Helper()
	h, err := hedge.New(hedge.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &fleetPod{path: filepath.Join(t.TempDir(), "policy.yaml"), applied: make(chan int64, 16)}
	p.w, err = fleet.NewWatcher(fleet.Options{Service: "checkout", Instance: name, Source: fleet.NewFile(p.path),
		Hedgers: map[string]*hedge.Hedger{"api": h}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(e fleet.Event) {
			if e.Kind == fleet.EventApplied {
				p.applied <- e.Version
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hedgeprom.NewFleet("hedge", p.w)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	p.addr = serveMetrics(t, reg)
	done := make(chan error, 1)
	go func() { done <- p.w.Run(ctx) }()
	t.Cleanup(func() { <-done })
	return p
}

// push writes version v of the policy to the pod's file, as a ConfigMap
// update would, and waits until the pod applied it.
func (p *fleetPod) push(t *testing.T, ctx context.Context, v int64) time.Time {
	t.Helper()
	doc := fmt.Sprintf("service: checkout\nversion: %d\nhedgers: {\"*\": {mode: shadow}}\n", v)
	if err := os.WriteFile(p.path+".tmp", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p.path+".tmp", p.path); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case got := <-p.applied:
			if got == v {
				return p.w.Status().Applied
			}
		case <-ctx.Done():
			t.Fatalf("version %d not applied: %v (status %+v)", v, ctx.Err(), p.w.Status())
		}
	}
}

// TestFleetPrometheus has a real Prometheus scrape two pods through a
// push that reaches one of them only, and checks that the query in
// docs/fleet.md lists the pod behind.
func TestFleetPrometheus(t *testing.T) {
	promtest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	a, b := startFleetPod(t, runCtx, "pod-a"), startFleetPod(t, runCtx, "pod-b")
	t.Cleanup(stop) // before the pods' cleanups wait for Run
	prom := promtest.Start(t, promtest.Options{Targets: []string{a.addr, b.addr}, ScrapeInterval: 100 * time.Millisecond})

	a.push(t, ctx, 1)
	at := b.push(t, ctx, 1)
	if _, err := prom.WaitScrapedAfter(ctx, `hedge_fleet_policy_version`, at); err != nil {
		t.Fatal(err)
	}
	got, err := prom.Query(ctx, `hedge_fleet_policy_version < scalar(max(hedge_fleet_policy_version))`, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("pods behind after version 1 reached both: %v", got)
	}

	at = a.push(t, ctx, 2)
	if _, err := prom.WaitScrapedAfter(ctx, `hedge_fleet_policy_version{instance="`+a.addr+`"}`, at); err != nil {
		t.Fatal(err)
	}
	got, err = prom.Query(ctx, `hedge_fleet_policy_version < scalar(max(hedge_fleet_policy_version))`, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels["instance"] != b.addr || got[0].Value != 1 {
		t.Fatalf("pods behind after version 2 reached pod-a only: %v; want pod-b (%s) on version 1", got, b.addr)
	}
	got, err = prom.Query(ctx, `sum by (state) (hedge_fleet_policy_state)`, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		want := 0.0
		if s.Labels["state"] == fleet.StateApplied {
			want = 2
		}
		if s.Value != want {
			t.Errorf("pods in state %s: %v, want %v", s.Labels["state"], s.Value, want)
		}
	}
}
