package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge/fleet"
)

// configMap lays out a directory as kubelet mounts a ConfigMap volume:
// the key's file is a link through ..data, which links to a timestamped
// directory holding the data.
type configMap struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMap(t *testing.T, key, content string) *configMap {
	c := &configMap{t: t, dir: t.TempDir()}
	c.update(key, content)
	if err := os.Symlink(filepath.Join("..data", key), filepath.Join(c.dir, key)); err != nil {
		t.Fatal(err)
	}
	return c
}

// update swaps the volume to new data as kubelet does: a new timestamped
// directory, a new link renamed over ..data (atomic), the old directory
// removed.
func (c *configMap) update(key, content string) {
	c.n++
	ts := filepath.Join(c.dir, "..2026_12_07_15_0"+string(rune('0'+c.n)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, key), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
			c.t.Fatal(err)
		}
	}
}

// recorder keeps a source's reports.
type recorder struct {
	mu sync.Mutex
	r  []fleet.Report
}

func (r *recorder) report(x fleet.Report) {
	r.mu.Lock()
	r.r = append(r.r, x)
	r.mu.Unlock()
}

func (r *recorder) docs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.r {
		if x.Err != nil {
			out = append(out, "error")
		} else {
			out = append(out, string(x.Doc))
		}
	}
	return out
}

// TestFileConfigMapSwap checks that the file source sees kubelet's
// atomic swap of a ConfigMap volume, within a poll, and reports each
// content once: a swap to the same data is not a change.
func TestFileConfigMapSwap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cm := newConfigMap(t, "policy.yaml", "one")
		src := fleet.NewFile(filepath.Join(cm.dir, "policy.yaml"))
		var rec recorder
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- src.Watch(ctx, rec.report) }()
		synctest.Wait()
		cm.update("policy.yaml", "two")
		settleFor(0)
		cm.update("policy.yaml", "two")
		settleFor(0)
		cm.update("policy.yaml", "three")
		settleFor(0)
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("Watch = %v, want context.Canceled", err)
		}
		if got := rec.docs(); len(got) != 3 || got[0] != "one" || got[1] != "two" || got[2] != "three" {
			t.Fatalf("reports %q, want one, two, three", got)
		}
	})
}

// TestFileWriteInPlace checks a file rewritten in place (same inode), and
// a file that goes and comes back: an error, then the document again.
func TestFileWriteInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		var rec recorder
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- fleet.NewFile(path).Watch(ctx, rec.report) }()
		synctest.Wait()
		if err := os.WriteFile(path, []byte("bb"), 0o644); err != nil {
			t.Fatal(err)
		}
		settleFor(0)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		settleFor(0)
		if err := os.WriteFile(path, []byte("bb"), 0o644); err != nil {
			t.Fatal(err)
		}
		settleFor(0)
		cancel()
		<-done
		if got := rec.docs(); len(got) != 4 || got[0] != "a" || got[1] != "bb" || got[2] != "error" || got[3] != "bb" {
			t.Fatalf("reports %q, want a, bb, error, bb", got)
		}
	})
}
