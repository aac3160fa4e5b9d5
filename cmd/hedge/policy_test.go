package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/internal/etcdtest"
)

func runHedge(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyValidate(t *testing.T) {
	good := writeFile(t, "good.yaml", "service: checkout\nversion: 7\nhedgers:\n  \"*\":\n    mode: on\n    rollout: 0.1\n")
	bad := writeFile(t, "bad.yaml", "service: checkout\nversion: 7\nhedgers:\n  \"*\":\n    mode: sometimes\n    rollout: 2\n")
	code, out, _ := runHedge("policy", "validate", good)
	if code != exitOK || !strings.Contains(out, "valid: service checkout, version 7") {
		t.Errorf("validate of a good file: exit %d, %q", code, out)
	}
	code, out, _ = runHedge("policy", "validate", good, bad)
	if code != exitFailure {
		t.Errorf("validate with a bad file: exit %d, want 1", code)
	}
	// Every mistake, each with what to do.
	for _, want := range []string{"2 mistake(s)", `"sometimes": use on, shadow or off`, "is 2: use a share of pods in [0, 1]"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate of a bad file: output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runHedge("policy", "validate", filepath.Join(t.TempDir(), "missing.yaml")); code != exitFailure || !strings.Contains(out, "no such file") {
		t.Errorf("validate of a missing file: exit %d, %q", code, out)
	}
	if code, _, errOut := runHedge("policy", "validate"); code != exitUsage || !strings.Contains(errOut, "name the policy files") {
		t.Errorf("validate without a file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runHedge("policy", "push", "--service", "checkout", bad); code != exitFailure || !strings.Contains(errOut, "nothing was written") || !strings.Contains(errOut, "use on, shadow or off") {
		t.Errorf("push of a bad file: exit %d, %q; want it refused before any connection", code, errOut)
	}
	if code, _, errOut := runHedge("policy", "off", "--service", "checkout"); code != exitUsage || !strings.Contains(errOut, "--for is required") {
		t.Errorf("off without --for: exit %d, %q", code, errOut)
	}
}

func TestPolicyEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	// The member's own goroutines (its reaper, its output) end at
	// cleanup, after this check.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ep := strings.Join(c.Endpoints(), ",")
	doc := func(v int, extra string) string {
		return "service: checkout\nversion: " + strconv.Itoa(v) + "\nhedgers:\n  \"*\":\n    mode: on\n" + extra
	}
	v1 := writeFile(t, "v1.yaml", doc(1, ""))

	code, out, errOut := runHedge("policy", "push", "--endpoints", ep, "--service", "checkout", v1)
	if code != exitOK || !strings.Contains(out, "version 1") {
		t.Fatalf("push of version 1: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runHedge("policy", "push", "--endpoints", ep, "--service", "checkout", v1)
	if code != exitFailure || !strings.Contains(errOut, "lost, nothing was written") || !strings.Contains(errOut, "as version 2") {
		t.Errorf("push of version 1 again: exit %d, %q; want it lost, with the version to push", code, errOut)
	}
	code, _, errOut = runHedge("policy", "push", "--endpoints", ep, "--service", "search", v1)
	if code != exitFailure || !strings.Contains(errOut, "--service checkout") {
		t.Errorf("push for another service: exit %d, %q", code, errOut)
	}

	// Two operators push their edit of version 1 at once: one wins, the
	// other is told it lost.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	errs := make([]string, 2)
	for i := range codes {
		f := writeFile(t, "v2.yaml", doc(2, "# operator "+strconv.Itoa(i)+"\n"))
		wg.Go(func() {
			codes[i], _, errs[i] = runHedge("policy", "push", "--endpoints", ep, "--service", "checkout", f)
		})
	}
	wg.Wait()
	if codes[0]+codes[1] != exitFailure || !strings.Contains(errs[0]+errs[1], "lost, nothing was written") {
		t.Fatalf("two pushes of version 2 at once: exits %v, %q; want one to win and one to lose", codes, errs)
	}

	// Two pods announce what they run: one the latest, one behind and
	// cut off.
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store := fleetetcd.Store{Client: cli}
	ctx := context.Background()
	for _, ps := range []fleet.PodStatus{
		{Service: "checkout", Instance: "pod-a", Version: 2, State: "applied", Applied: time.Now(), Source: "etcd hedge/policy/checkout"},
		{Service: "checkout", Instance: "pod-b", Version: 1, State: "stale", Error: "store unreachable", Source: "etcd hedge/policy/checkout"},
	} {
		a := store.Announcer("checkout", ps.Instance)
		defer a.Close()
		if err := a.Announce(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runHedge("policy", "status", "--endpoints", ep, "--service", "checkout")
	if code != exitOK {
		t.Fatalf("status: exit %d, %q", code, errOut)
	}
	for _, want := range []string{"checkout: version 2", "pod-a", "pod-b", "1 of 2 pods run version 2", "not on the latest: pod-b (version 1)", "cut off from the store: pod-b (stale)", "store unreachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// The incident: everything off for 30 minutes, as version 3.
	code, out, errOut = runHedge("policy", "off", "--endpoints", ep, "--service", "checkout", "--for", "30m", "--reason", "incident")
	if code != exitOK || !strings.Contains(out, "every Hedger off until") || !strings.Contains(out, "version 3") {
		t.Fatalf("off: exit %d, %q %q", code, out, errOut)
	}
	p, _, _, err := store.Get(ctx, "checkout")
	if err != nil || p.Version != 3 || !p.Killed(time.Now()) || p.Killed(time.Now().Add(31*time.Minute)) || p.Kill.Reason != "incident" || p.Rules("x").Mode != "on" {
		t.Fatalf("the stored document after off: %+v, %v; want version 3 killed for 30 minutes, its rules kept", p, err)
	}
	code, out, _ = runHedge("policy", "status", "--endpoints", ep, "--service", "checkout")
	if code != exitOK || !strings.Contains(out, "version 3") || !strings.Contains(out, "kill switch until") || !strings.Contains(out, "incident") {
		t.Errorf("status after off: exit %d:\n%s", code, out)
	}
	code, out, _ = runHedge("policy", "get", "--endpoints", ep, "--service", "checkout")
	if pp, err := fleet.Parse([]byte(out)); code != exitOK || err != nil || pp.Version != 3 {
		t.Errorf("get: exit %d, %q parses as %+v, %v", code, out, pp, err)
	}
	code, out, _ = runHedge("policy", "off", "--endpoints", ep, "--service", "checkout", "--for", "0")
	if p, _, _, err := store.Get(ctx, "checkout"); code != exitOK || err != nil || p.Version != 4 || p.Kill != nil {
		t.Errorf("off --for 0: exit %d, %q; stored %+v, %v; want version 4 without the switch", code, out, p, err)
	}
}

// TestPolicyUnreachable: a store that does not answer is reported with
// what to check.
func TestPolicyUnreachable(t *testing.T) {
	c := etcdtest.Start(t, 1)
	// The member's own goroutines (its reaper, its output) end at
	// cleanup, after this check.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ep := c.Endpoints()[0]
	c.Members[0].Kill()
	code, _, errOut := runHedge("policy", "status", "--endpoints", ep, "--service", "checkout", "--timeout", "1s")
	if code != exitFailure || !strings.Contains(errOut, "check --endpoints") {
		t.Errorf("status with etcd down: exit %d, %q", code, errOut)
	}
}
