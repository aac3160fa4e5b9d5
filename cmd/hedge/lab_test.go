package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/lab"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hedge lab serves the page and the API, prints its URL and shuts down
// cleanly when its context ends (Ctrl-C).
func TestLabServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- serveLab(ctx, []string{"--addr", "127.0.0.1:0"}, &out, &errOut, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("lab exited with %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "http://"+addr+"/") {
		t.Errorf("stdout %q does not give the URL", out.String())
	}
	for path, want := range map[string]string{"/": "hedge lab", "/api/drill?delay=130": "TAIL CUT", "/api/study": "hedge-p95-quiet"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK || !strings.Contains(errOut.String(), "stopped") {
			t.Errorf("shutdown: exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(time.Minute): // a hang guard: stopping takes milliseconds
		t.Fatal("lab did not stop")
	}
	http.DefaultClient.CloseIdleConnections()
}

// While the lab serves, the process's soft memory limit is the lab's
// memory budget plus headroom and its GC target labGCPercent (so a burst
// of large simulations cannot let the heap grow to twice what they hold),
// and both are restored afterwards. GOMEMLIMIT and GOGC in the
// environment are left alone.
func TestLabMemoryLimit(t *testing.T) {
	beforeLimit := debug.SetMemoryLimit(-1)
	beforeGC := debug.SetGCPercent(-1)
	debug.SetGCPercent(beforeGC) // SetGCPercent has no read-only form
	s, err := lab.New(lab.Options{MaxConcurrent: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantLimit := s.MemoryBudget() + labMemoryHeadroom
	for _, env := range []string{"", "set"} {
		limitEnv, gcEnv := "", ""
		if env == "set" {
			limitEnv, gcEnv = "1GiB", "100"
		}
		t.Setenv("GOMEMLIMIT", limitEnv)
		t.Setenv("GOGC", gcEnv)
		ctx, cancel := context.WithCancel(context.Background())
		var limit int64
		var gc int
		var errOut syncBuffer
		code := serveLab(ctx, []string{"--addr", "127.0.0.1:0", "--max-sims", "3"}, io.Discard, &errOut, func(string) {
			limit = debug.SetMemoryLimit(-1)
			gc = debug.SetGCPercent(-1)
			debug.SetGCPercent(gc)
			cancel()
		})
		cancel()
		if code != exitOK {
			t.Fatalf("environment %q: exit %d: %s", env, code, errOut.String())
		}
		switch {
		case env == "" && (limit != wantLimit || gc != labGCPercent):
			t.Errorf("while serving: memory limit %d MiB, GOGC %d; want %d MiB, %d", limit>>20, gc, wantLimit>>20, labGCPercent)
		case env == "set" && (limit != beforeLimit || gc != beforeGC):
			t.Errorf("GOMEMLIMIT and GOGC set: memory limit %d, GOGC %d while serving; want them left at %d, %d", limit, gc, beforeLimit, beforeGC)
		}
		afterGC := debug.SetGCPercent(-1)
		debug.SetGCPercent(afterGC)
		if after := debug.SetMemoryLimit(-1); after != beforeLimit || afterGC != beforeGC {
			t.Errorf("after serving: memory limit %d, GOGC %d; want them restored to %d, %d", after, afterGC, beforeLimit, beforeGC)
		}
	}
}

// A busy port is reported with a hint to use --addr.
func TestLabBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCLI("lab", "--addr", ln.Addr().String())
	if code != exitFailure || !strings.Contains(errOut, "already in use") || !strings.Contains(errOut, "--addr") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestLabUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(bad, []byte(`{"not": "a study"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--study", filepath.Join(t.TempDir(), "missing.json")}, "--study"},
		{[]string{"--study", bad}, "results.json written by hedge study"},
		{[]string{"--max-sims", "0"}, "--max-sims 0"},
		{[]string{"--addr", "nonsense"}, "--addr"},
	} {
		code, _, errOut := runCLI(append([]string{"lab"}, tc.args...)...)
		if code == exitOK || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}
