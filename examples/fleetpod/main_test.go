package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's walkthrough, on one pod: the policy pushed at 10%, then
// 100%, then switched off, each step seen in the pod's metrics and in
// the list of pods that `hedge policy status` prints.
func TestWalkthrough(t *testing.T) {
	c := etcdtest.Start(t, 1)
	if c == nil {
		return
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--etcd", c.Endpoints()[0], "--addr", "127.0.0.1:0", "--instance", "checkout-3"}, testWriter{t}, ready)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("the pod stopped before it served: %v", err)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store := fleetetcd.Store{Client: cli}
	push := func(doc []byte) {
		t.Helper()
		if _, err := store.Push(ctx, "checkout", doc); err != nil {
			t.Fatal(err)
		}
	}
	// waitVersion waits until the pod's metrics and its key in etcd both
	// say it runs version v.
	waitVersion := func(v string) {
		t.Helper()
		want := `hedge_fleet_policy_version{service="checkout"} ` + v
		for {
			pods, err := store.List(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			listed := len(pods) == 1 && pods[0].Instance == "checkout-3" && pods[0].State == fleet.StateApplied &&
				v == itoa(pods[0].Version)
			if listed && metric(t, addr, want) {
				return
			}
			time.Sleep(20 * time.Millisecond) // polling a condition; the test's timeout bounds it
		}
	}
	for i, file := range []string{"policy-10.yaml", "policy-100.yaml"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		push(doc)
		waitVersion(itoa(int64(i + 1)))
	}
	// What `hedge policy off --for 30m` writes: the document again, with
	// the kill switch, as the next version.
	p, _, _, err := store.Get(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	p.Version++
	p.Kill = &fleet.Kill{Until: time.Now().Add(30 * time.Minute).UTC(), Reason: "incident"}
	doc, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	push(doc)
	waitVersion("3")
}

// The walkthrough's documents are valid, for the service the pods follow,
// in the order they are pushed.
func TestWalkthroughDocuments(t *testing.T) {
	for i, file := range []string{"policy-10.yaml", "policy-100.yaml"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := fleet.Parse(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if p.Service != "checkout" || p.Version != int64(i+1) {
			t.Errorf("%s: service %q version %d, want checkout and %d", file, p.Service, p.Version, i+1)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// metric reports whether the pod's /metrics has the line want.
func metric(t *testing.T, addr, want string) bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
