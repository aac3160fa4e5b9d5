package etcdtest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestVersionsMatch keeps the server this package builds, the client of
// the main module and Version the same release.
func TestVersionsMatch(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for mod, path := range map[string]string{
		filepath.Join(dir, "etcdserver", "go.mod"): "go.etcd.io/etcd/server/v3",
		filepath.Join(dir, "..", "..", "go.mod"):   "go.etcd.io/etcd/client/v3",
	} {
		b, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(regexp.QuoteMeta(path) + ` (v\S+)`).FindSubmatch(b)
		if m == nil || string(m[1]) != Version {
			t.Errorf("%s requires %s %q, want Version %s", mod, path, m, Version)
		}
	}
}

// TestCluster starts three members, finds the leader, kills it, sees a
// new one elected, restarts the old one, and pauses and resumes a member.
func TestCluster(t *testing.T) {
	c := Start(t, 3)
	lead, err := c.Leader(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pid := lead.Pid()
	lead.Kill()
	if lead.Running() {
		t.Fatalf("member %s (pid %d) runs after Kill", lead.Name, pid)
	}
	next, err := c.Leader(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next == lead {
		t.Fatalf("the killed member %s is still the leader", lead.Name)
	}
	if err := lead.Restart(); err != nil {
		t.Fatal(err)
	}
	if lead.Pid() == 0 || lead.Pid() == pid {
		t.Fatalf("after Restart the member's pid is %d (was %d)", lead.Pid(), pid)
	}
	m := c.Members[0]
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if !m.Paused() {
		t.Fatal("Paused is false after Pause")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	// Stop ends a paused member too.
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if m.Running() {
		t.Fatal("a paused member runs after Stop")
	}
}
