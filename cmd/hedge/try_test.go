package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/reflection"

	"github.com/tailcut/hedge/internal/redistest"
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
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--arms", "none,plain-p20"}, "plain-pNN"},
		{[]string{r1, r2, "--url", "/x/{key}", "--values", vals, "--objective", "p95"}, `--objective "p95": judge by p50, p90, p99, p99.9`},
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

// An error is prefixed by the command once: the package's messages do not
// name it again.
func TestTryErrorPrefix(t *testing.T) {
	urls, _ := tryServers(t)
	vals := filepath.Join(t.TempDir(), "values.txt")
	os.WriteFile(vals, []byte("a\n"), 0o644)
	base := []string{"try", "--replica", urls[0], "--replica", urls[1], "--url", "/x/{key}", "--values", vals}
	for _, extra := range [][]string{
		{"--arms", "none"},
		{"--arms", "none,bogus"},
		{"--rate", "-1"},
		{"--rate", "500"},
		{"--duration", "2h"},
	} {
		code, _, stderr := runCLI(append(slices.Clone(base), extra...)...)
		if code != exitUsage || !strings.HasPrefix(stderr, "hedge try: ") {
			t.Errorf("%q: exit %d, stderr %q; want %d and the prefix hedge try", extra, code, stderr, exitUsage)
		}
		if strings.Contains(stderr, "try: try:") || strings.Contains(stderr, ": try: ") {
			t.Errorf("%q: stderr names the package again: %q", extra, stderr)
		}
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

// The report names the headers; their values only with
// --show-header-values, and then never one shaped like a credential.
func TestTryHeaderValues(t *testing.T) {
	urls, _ := tryServers(t)
	dir := t.TempDir()
	vals := filepath.Join(dir, "values.txt")
	os.WriteFile(vals, []byte("a\n"), 0o644)
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cnkifQ.c2lnbmF0dXJl"
	for _, show := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprint(show))
		args := []string{"try", "--replica", urls[0], "--replica", urls[1], "--url", "/items/{key}", "--values", vals,
			"--header", "X-Jwt-Assertion: " + jwt, "--header", "X-Plain: visible",
			"--rate", "100", "--ramp", "0s", "--warmup", "0s", "--duration", "300ms", "--progress", "0", "--out", out}
		if show {
			args = append(args, "--show-header-values")
		}
		code, stdout, stderr := runCLI(args...)
		if code != exitOK {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		b, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		report := string(b)
		want, notWant := "`X-Jwt-Assertion`, `X-Plain`", "visible"
		if show {
			want, notWant = "`X-Jwt-Assertion: <redacted>`, `X-Plain: visible`", jwt[:12]
		}
		if !strings.Contains(report, want) || strings.Contains(report, notWant) || strings.Contains(report+stdout+stderr, jwt[:12]) {
			t.Errorf("--show-header-values %v: report.md wants %s, not %s:\n%s", show, want, notWant, report)
		}
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

// tryGRPCServers starts two loopback gRPC replicas of grpc.testing's
// TestService, with server reflection, that count the calls of the method.
func tryGRPCServers(t *testing.T) ([]string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	var addrs []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		grpc_testing.RegisterTestServiceServer(srv, &countingTestService{n: &n})
		reflection.Register(srv)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Stop(); <-done })
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, &n
}

type countingTestService struct {
	grpc_testing.UnimplementedTestServiceServer
	n *atomic.Int64
}

func (s *countingTestService) UnaryCall(ctx context.Context, req *grpc_testing.SimpleRequest) (*grpc_testing.SimpleResponse, error) {
	s.n.Add(1)
	return &grpc_testing.SimpleResponse{}, nil
}

// gRPC: a short run through the CLI, and the refusals, each exit 2 with
// a message that says what to do and no call sent.
func TestTryGRPC(t *testing.T) {
	addrs, sent := tryGRPCServers(t)
	dir := t.TempDir()
	reqs := filepath.Join(dir, "requests.jsonl")
	os.WriteFile(reqs, []byte("# comment\n{\"responseSize\": 4}\n{}\n"), 0o644)
	r1, r2 := "--replica="+addrs[0], "--replica="+addrs[1]
	const method = "grpc.testing.TestService/UnaryCall"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--grpc", r1, r2, "--method", method, "--requests", reqs}, "--idempotent"},
		{[]string{"--grpc", r1, r2, "--method", "grpc.testing.TestService/StreamingOutputCall", "--data", "{}", "--idempotent"}, "unary calls only"},
		{[]string{"--grpc", r1, r2, "--method", method, "--idempotent"}, "--requests FILE"},
		{[]string{"--grpc", r1, r2, "--method", method, "--data", "{}", "--requests", reqs, "--idempotent"}, "one or the other"},
		{[]string{"--grpc", r1, r2, "--data", "{}", "--idempotent"}, "--method package.Service/Method"},
		{[]string{"--grpc", r1, r2, "--method", method, "--data", "{}", "--idempotent", "--url", "/x/{key}"}, "--url is for HTTP"},
		{[]string{"--grpc", "--replica", "http://" + addrs[0], r2, "--method", method, "--data", "{}", "--idempotent"}, "host:port"},
		{[]string{"--grpc", r1, r2, "--method", method, "--data", `{"nope": 1}`, "--idempotent"}, "request 1"},
		{[]string{"--grpc", "--redis", r1, r2}, "give one"},
		{[]string{r1, r2, "--requests", reqs}, "add --grpc"},
		{[]string{"--grpc", r1, r2, "--method", method, "--data", "{}", "--idempotent", "--protoset", filepath.Join(dir, "missing.pb")}, "--protoset"},
	} {
		code, _, stderr := runCLI(append([]string{"try", "--progress", "0"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d calls sent by refused invocations", n)
	}
	const secret = "grpc-tok-81c3"
	t.Setenv("HEDGE_TRY_GRPC_TOKEN", secret)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI("try", "--grpc", r1, r2, "--method", method, "--requests", reqs, "--idempotent",
		"--header-env", "authorization=HEDGE_TRY_GRPC_TOKEN", "--rate", "100", "--ramp", "0s", "--warmup", "0s", "--duration", "500ms",
		"--progress", "0", "--out", out, "--arms", "none,fixed:5ms")
	if code != exitOK || !strings.Contains(stdout, "BASELINE") || sent.Load() == 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(b), "/grpc.testing.TestService/UnaryCall") || strings.Contains(string(b)+stdout+stderr, secret) {
		t.Errorf("report.md (%v):\n%s", err, b)
	}
}

// Redis: a short run through the CLI, and the refusals.
func TestTryRedis(t *testing.T) {
	servers := redistest.Start(t, 2)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	os.WriteFile(keys, []byte("a\nb\nc\n"), 0o644)
	r1, r2 := "--replica=redis://"+servers[0].Addr, "--replica="+servers[1].Addr
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", r1, r2}, "--keys FILE"},
		{[]string{"--redis", r1, r2, "--keys", keys, "--header", "X-A: 1"}, "a Redis run sends none"},
		{[]string{"--redis", "--replica", "redis://u:hunter2@" + servers[0].Addr, r2, "--keys", keys}, "--redis-password-env"},
		{[]string{"--redis", r1, r2, "--keys", keys, "--redis-password-env", "HEDGE_TRY_UNSET_VAR"}, "unset or empty"},
		{[]string{"--redis", r1, r2, "--keys", keys, "--mget", "5000"}, "--mget"},
		{[]string{r1, r2, "--keys", keys}, "add --redis"},
	} {
		code, _, stderr := runCLI(append([]string{"try", "--progress", "0"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, "hunter2") {
			t.Errorf("%q: stderr echoes a credential: %q", tc.args, stderr)
		}
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI("try", "--redis", r1, r2, "--keys", keys, "--mget", "2", "--rate", "100", "--ramp", "0s", "--warmup", "0s",
		"--duration", "500ms", "--progress", "0", "--out", out)
	if code != exitOK || !strings.Contains(stdout, "BASELINE") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "results.json")); err != nil || !strings.Contains(string(b), `"MGET": 3`) {
		t.Errorf("results.json (%v):\n%s", err, b)
	}
}
