package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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
	case <-time.After(10 * time.Second):
		t.Fatal("lab did not stop")
	}
	http.DefaultClient.CloseIdleConnections()
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
