package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/bench"
)

// Mistakes in the flags of hedge bench fanout --shards are refused
// before any server starts: the output directory is not even created.
func TestBenchShardsValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards 0: use 1 to"},
		{[]string{"--shards", "300"}, "--shards 300: use 1 to"},
		{[]string{"--shards", "4", "--replicas", "0"}, "--replicas 0: use 1 to 8"},
		{[]string{"--shards", "200", "--replicas", "2"}, "400 servers: at most 300"},
		{[]string{"--shards", "4", "--width", "-1"}, "--width -1"},
		{[]string{"--shards", "4", "--backend", "redis"}, `--backend "redis": use http, grpc`},
		{[]string{"--shards", "4", "--configs", "default"}, "name at least two configurations"},
		{[]string{"--shards", "4", "--configs", "none-two-choice,hope"}, `unknown configuration "hope"`},
		{[]string{"--shards", "4", "--stall-share", "0.7"}, "stall share"},
		{[]string{"--shards", "4", "--configs", "none-two-choice,hedge-fixed", "--delay", "0"}, "--configs hedge-fixed: the fixed-delay configurations need a delay above 0"},
		{[]string{"--shards", "4", "--repeats", "0"}, "repeats 0"},
		{[]string{"--shards=4", "--rate", "-5"}, "rate -5"},
		{[]string{"--shards", "4", "extra"}, "unexpected arguments"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"bench", "fanout", "--out", out}, tc.args...)
		code, stdout, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if stdout != "" || strings.Contains(stderr, "starting") {
			t.Errorf("%v: work started: stdout %q, stderr %q", tc.args, stdout, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the output directory was created (%v)", tc.args, err)
		}
	}
}

// TestBenchShardsRun runs hedge bench fanout --shards on a tiny grid of
// real HTTP and gRPC servers and checks behaviour, never a latency: each
// configuration ran on each backend, every request answered, server 0
// stalled as its schedule says (fixed by the seed; the run waits for
// every stall), the reports were written, and the servers' process is
// gone.
func TestBenchShardsRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	code, stdout, stderr := runCLI("bench", "fanout", "--shards", "3", "--replicas", "2", "--quick", "--repeats", "2",
		"--rate", "100", "--duration", "1s", "--warmup", "200ms", "--stall-share", "0.1", "--stall-length", "20ms",
		"--timeout", "1m", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"6 http servers (3 shards x 2 replicas)", "6 grpc servers", "[http 4/4]", "[grpc 4/4]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("no %q in the progress output: %q", want, stderr)
		}
	}
	rep := readBenchReport(t, dir)
	if len(rep.Backends) != 2 || rep.Backends[0].Backend != "http" || rep.Backends[1].Backend != "grpc" {
		t.Fatalf("results.json holds %d backends", len(rep.Backends))
	}
	for _, br := range rep.Backends {
		if br.Replicas != 6 || br.Baseline != "none-two-choice" || !br.Scenario.StallOne || br.Scenario.FanOut != 3 {
			t.Errorf("%s: %d servers, baseline %q, stall one %v, fan-out %d", br.Backend, br.Replicas, br.Baseline, br.Scenario.StallOne, br.Scenario.FanOut)
		}
		if len(br.Configs) != 2 || len(br.Runs) != 4 {
			t.Fatalf("%s: %d configurations, %d runs; want 2 and 4", br.Backend, len(br.Configs), len(br.Runs))
		}
		for _, r := range br.Runs {
			if r.Requests < 50 || r.Errors > 0 || r.Stalls == 0 || r.StallErrors > 0 {
				t.Errorf("%s %s: %d requests, %d errors (%s), %d stalls, %d stall errors", br.Backend, r.Config, r.Requests, r.Errors, r.FirstError, r.Stalls, r.StallErrors)
			}
			if r.SelfCPUPerRequestUs <= 0 {
				t.Errorf("%s %s: CPU per request %v", br.Backend, r.Config, r.SelfCPUPerRequestUs)
			}
		}
		for _, c := range br.Configs {
			if c.Config == bench.DefaultStrategy && c.P99RatioCI.N != 2 {
				t.Errorf("%s default: the p99 ratio has %d pairs, want 2", br.Backend, c.P99RatioCI.N)
			}
		}
		if len(br.Pids) != 1 {
			t.Fatalf("%s: %d pids recorded, want the servers' process", br.Backend, len(br.Pids))
		}
		if err := syscall.Kill(br.Pids[0], 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s: the servers' process %d still exists after the run (kill 0: %v)", br.Backend, br.Pids[0], err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| http | default |", "| grpc | none-two-choice (baseline) |", "CPU µs/request"} {
		if !strings.Contains(string(sum), want) || !strings.Contains(stdout, want) {
			t.Errorf("summary.md or stdout lacks %q:\n%s", want, sum)
		}
	}
	for _, f := range []string{bench.ReportMarkdown, bench.CCDFFile("http"), bench.CCDFFile("grpc")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
