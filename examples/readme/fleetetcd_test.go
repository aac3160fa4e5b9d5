package readme

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

// etcdPod is docs/fleet.md's pod on etcd.
func etcdPod(ctx context.Context, endpoints []string, pod string, h *hedge.Hedger) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints, // every member's client URL
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	store := fleetetcd.Store{Client: cli}
	ann := store.Announcer("checkout", pod)
	defer ann.Close() // the pod's key goes at once
	w, err := fleet.NewWatcher(fleet.Options{
		Service:   "checkout",
		Instance:  pod,
		Source:    store.Source("checkout"),
		Announcer: ann,
		Hedgers:   map[string]*hedge.Hedger{"inventory": h},
	})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// TestFleetEtcdSnippet runs docs/fleet.md's pod against a real etcd
// member: a pushed policy reaches it, and it lists itself as running it.
func TestFleetEtcdSnippet(t *testing.T) {
	c := etcdtest.Start(t, 1)
	h, err := hedge.New(hedge.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- etcdPod(ctx, c.Endpoints(), "pod-1", h) }()

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store := fleetetcd.Store{Client: cli}
	if _, err := store.Push(ctx, "checkout", []byte("service: checkout\nversion: 1\nhedgers:\n  \"*\":\n    mode: shadow\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := store.List(ctx, "checkout")
		if err == nil && len(pods) == 1 && pods[0].Version == 1 && pods[0].State == fleet.StateApplied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod is listed as %+v (%v), want it on version 1", pods, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the pod returned %v", err)
	}
	if pods, err := store.List(context.Background(), "checkout"); err != nil || len(pods) != 0 {
		t.Fatalf("after the pod stopped it is listed as %+v (%v), want gone", pods, err)
	}
}
