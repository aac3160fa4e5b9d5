package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// tryServers starts two loopback replicas that count their requests.
func tryServers(t *testing.T) ([]string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); w.Write([]byte("ok")) })
	a, b := httptest.NewServer(h), httptest.NewServer(h)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	return []string{a.URL, b.URL}, &n
}

// Mistakes are refused with exit code 2, a message that says what to do,
// and nothing sent.
func TestTryValidation(t *testing.T) {
	urls, sent := tryServers(t)
	dir := t.TempDir()
	post := filepath.Join(dir, "post.txt")
	os.WriteFile(post, []byte("POST /orders\n"), 0o644)
	foreign := filepath.Join(dir, "foreign.txt")
	os.WriteFile(foreign, []byte("GET http://203.0.113.9/x\n"), 0o644)
	vals := filepath.Join(dir, "values.txt")
	os.WriteFile(vals, []byte("a\nb\n"), 0o644)
	r1, r2 := "--replica="+urls[0], "--replica="+urls[1]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{r1, "--url", "/x/{key}", "--values", vals}, "at least two --replica"},
		{[]string{r1, r2}, "no targets"},
		{[]string{r1, r2, "--url", "/x/{key}"}, "--url needs --values"},
		{[]string{r1, r2, "--url", "/x", "--values", vals}, "no {key}"},
		{[]string{r1, r2, "--targets", post}, "--allow-writes and --idempotency-header"},
		{[]string{r1, r2, "--targets", post, "--allow-writes"}, "--allow-writes and --idempotency-header"},
		{[]string{r1, r2, "--targets", post, "--idempotency-header", "Idempotency-Key"}, "--allow-writes"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--method", "DELETE"}, "--allow-writes"},
		{[]string{r1, r2, "--targets", foreign}, "not one of the --replica URLs"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--rate", "500"}, "--max-rate"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--rate", "500", "--max-rate", "1000"}, "--allow-high-rate"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--arms", "none"}, "at least two arms"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--arms", "none,fixed:x"}, "fixed:DURATION"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--header-env", "Authorization=HEDGE_TRY_UNSET_VAR"}, "unset or empty"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--header", "Authorization Bearer hunter2"}, "'Name: value'"},
		{[]string{"--replica", "http://user:pw@127.0.0.1:1", r2, "--url", "/x/{key}", "--values", vals}, "--header-env"},
	} {
		code, _, stderr := runCLI(append([]string{"try"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, "hunter2") || strings.Contains(stderr, "pw@") {
			t.Errorf("%q: stderr echoes a credential: %q", tc.args, stderr)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent by refused invocations", n)
	}
}

// A short run writes the summary, the report and the latencies for hedge
// advise, and never the credential read from the environment.
func TestTryRun(t *testing.T) {
	urls, sent := tryServers(t)
	dir := t.TempDir()
	vals := filepath.Join(dir, "values.txt")
	os.WriteFile(vals, []byte("a\nb c\n"), 0o644)
	out := filepath.Join(dir, "out")
	const secret = "tok-5f2b9c"
	t.Setenv("HEDGE_TRY_TEST_TOKEN", secret)
	code, stdout, stderr := runCLI("try", "--replica", urls[0], "--replica", urls[1], "--url", "/items/{key}", "--values", vals,
		"--header-env", "Authorization=HEDGE_TRY_TEST_TOKEN", "--rate", "100", "--ramp", "0s", "--warmup", "0s", "--duration", "500ms",
		"--progress", "100ms", "--out", out, "--latencies")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "BASELINE") || !strings.Contains(stderr, "p99 (last 5s)") || sent.Load() == 0 {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	for _, name := range []string{"report.md", "results.json", "ccdf.svg", "timeline.svg", "replicas.svg", "latencies-none.txt", "requests-none.jsonl"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the credential", name)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Error("the output holds the credential")
	}
	// One duration a line, as hedge advise --in reads them.
	b, _ := os.ReadFile(filepath.Join(out, "latencies-none.txt"))
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := time.ParseDuration(line); err != nil {
			t.Errorf("latencies-none.txt: %v", err)
			break
		}
		n++
	}
	if n == 0 {
		t.Error("latencies-none.txt holds no latency")
	}
}

// SIGINT stops the run, writes what was measured, and exits 130.
func TestTryInterrupted(t *testing.T) {
	urls, _ := tryServers(t)
	dir := t.TempDir()
	vals := filepath.Join(dir, "values.txt")
	os.WriteFile(vals, []byte("a\n"), 0o644)
	out := filepath.Join(dir, "out")
	real := notifyContext
	t.Cleanup(func() { notifyContext = real })
	notifyContext = func(parent context.Context, sigs ...os.Signal) (context.Context, context.CancelFunc) {
		ctx, stop := real(parent, sigs...)
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Error(err)
		}
		<-ctx.Done()
		return ctx, stop
	}
	code, _, stderr := runCLI("try", "--replica", urls[0], "--replica", urls[1], "--url", "/i/{key}", "--values", vals, "--duration", "1m", "--out", out)
	if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit %d, stderr %q: want %d, interrupted", code, stderr, exitInterrupted)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("no report after the interruption: %v", err)
	}
}
