package fleetbench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A ConfigMapDir update is kubelet's: the file is a link through
// "..data", which points at the version's hidden directory; an update
// swaps "..data" and removes the old directory, and the path reads the
// new content.
func TestConfigMapDir(t *testing.T) {
	dir := t.TempDir()
	c := &ConfigMapDir{Dir: dir}
	path := filepath.Join(dir, policyFile)
	var prev string
	for _, content := range []string{"version: 1\n", "version: 2\n"} {
		if err := c.Write(map[string][]byte{policyFile: []byte(content)}); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Fatalf("%s reads %q, %v; want %q", path, got, err, content)
		}
		link, err := os.Readlink(path)
		if err != nil || link != filepath.Join(dataLink, policyFile) {
			t.Errorf("%s links to %q (%v), want through %s", path, link, err, dataLink)
		}
		data, err := os.Readlink(filepath.Join(dir, dataLink))
		if err != nil || data == prev {
			t.Errorf("%s links to %q (%v), the same as before", dataLink, data, err)
		}
		if prev != "" {
			if _, err := os.Stat(filepath.Join(dir, prev)); !os.IsNotExist(err) {
				t.Errorf("the old version's directory %s is still there (%v)", prev, err)
			}
		}
		prev = data
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 100}, {0.99, 198}, {1, 200}, {0.001, 1}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(1..200, %v) = %d, want %d (nearest rank)", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
}
