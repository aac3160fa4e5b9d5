package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestBenchSmoke runs "hedge bench" on each backend with a tiny
// configuration and checks behaviour, never a latency: the backends
// started and answered, stalls happened, the report, the JSON and the plot
// were written and parse, and nothing is left behind (redis-server pids,
// goroutines). What it checks does not depend on the scheduling: the
// requests and the stall schedule are fixed by the seed, the run waits
// for every stall of the schedule, and the request timeout (a minute) only
// bounds a broken backend.
func TestBenchSmoke(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, backend := range benchBackends {
		t.Run(backend, func(t *testing.T) {
			if backend == "redis" {
				redistest.NeedBinary(t, redistestBinary)
			}
			dir := t.TempDir()
			code, stdout, stderr := runCLI("bench", "--backend", backend, "--repeats", "1",
				"--requests", "300", "--rate", "300", "--warmup", "200ms",
				"--stall-share", "0.1", "--stall-length", "20ms", "--timeout", "1m",
				"--configs", "none-random,"+bench.DefaultStrategy, "--reruns", "-1", "--out", dir)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, "["+backend+" 2/2]") {
				t.Errorf("no progress output on stderr: %q", stderr)
			}
			rep := readBenchReport(t, dir)
			if len(rep.Backends) != 1 || rep.Backends[0].Backend != backend {
				t.Fatalf("results.json holds %d backends", len(rep.Backends))
			}
			br := rep.Backends[0]
			if len(br.Configs) != 2 || len(br.Runs) != 2 {
				t.Fatalf("%d configurations, %d runs; want 2 and 2", len(br.Configs), len(br.Runs))
			}
			for _, r := range br.Runs {
				if r.Requests < 250 || r.Errors > 0 {
					t.Errorf("%s: %d requests answered, %d errors (%s)", r.Config, r.Requests, r.Errors, r.FirstError)
				}
				if r.Stalls == 0 {
					t.Errorf("%s: no stall happened with a stall share of 10%%", r.Config)
				}
			}
			for _, c := range br.Configs {
				if len(c.CCDF) == 0 {
					t.Errorf("%s: empty CCDF", c.Config)
				}
			}
			md, err := os.ReadFile(filepath.Join(dir, bench.ReportMarkdown))
			if err != nil || !strings.Contains(string(md), "| "+bench.DefaultStrategy+" |") {
				t.Errorf("report.md: %v", err)
			}
			svg, err := os.ReadFile(filepath.Join(dir, bench.CCDFFile(backend)))
			if err != nil || !strings.Contains(string(svg), "<polyline") {
				t.Errorf("CCDF plot: %v", err)
			}
			if backend == "redis" {
				if len(br.Pids) != 3 {
					t.Errorf("%d redis pids recorded, want 3", len(br.Pids))
				}
				for _, pid := range br.Pids {
					if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
						t.Errorf("redis-server pid %d still exists after the run (kill 0: %v)", pid, err)
					}
				}
			}
		})
	}
}

// Usage mistakes are refused before any backend starts: nothing is
// announced, and the output directory is not even created.
func TestBenchValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--backend", "mongo"}, "use http, redis, grpc or all"},
		{[]string{"bench", "--configs", "hope"}, "use one of " + bench.DefaultStrategy},
		{[]string{"bench", "--stall-share", "0.9"}, "stall share"},
		{[]string{"bench", "--replicas", "1"}, "--replicas 1"},
		{[]string{"bench", "--delay", "0", "--configs", "hedge-fixed"}, "delay"},
		{[]string{"bench", "--precise-timers", "maybe"}, "on, off or auto"},
		{[]string{"bench", "--backend", "redis", "--redis-client", "lettuce"}, `--redis-client "lettuce": use go-redis or rueidis`},
		{[]string{"bench", "--backend", "redis", "--redis-client", "rueidis", "--redis-pool", "4"}, "--redis-pool 4 applies to go-redis only"},
		{[]string{"bench", "--out", filepath.Join(file, "x")}, "output directory"},
	} {
		args := tc.args
		out := filepath.Join(t.TempDir(), "out")
		if !slices.Contains(args, "--out") {
			args = append(slices.Clip(args), "--out", out)
		}
		code, stdout, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", args, code, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, "hedge bench: backends") || strings.Contains(stderr, "hedge bench: starting") || stdout != "" {
			t.Errorf("%v: work began before the refusal: stdout %q, stderr %q", args, stdout, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the output directory was touched (%v): validation must come before any work", args, err)
		}
	}
}

// A missing redis-server is reported with the package to install, and
// nothing hangs.
func TestBenchMissingRedis(t *testing.T) {
	code, _, stderr := runCLI("bench", "--backend", "redis", "--redis-server", filepath.Join(t.TempDir(), "no-redis-server"),
		"--out", t.TempDir())
	if code != exitFailure || !strings.Contains(stderr, "apt-get install -y redis-server") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// hedge-live, the former name of default, still selects it: the run and
// its report use the name default, stderr says so in one line, and naming
// both runs it once. The usage text documents the alias.
func TestBenchConfigAlias(t *testing.T) {
	f := benchFlags{
		backend: "http", configs: "none-random,hedge-live,default,hedge-live", precise: "off",
		replicas: 3, delay: time.Millisecond, s: bench.Scenario{StallShare: 0.02}.Defaults(),
	}
	var stderr strings.Builder
	_, contenders, err := f.validate(&stderr)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := contenderNames(contenders("http")), []string{"none-random", bench.DefaultStrategy}; !slices.Equal(got, want) {
		t.Errorf("contenders %v, want %v", got, want)
	}
	if want := "hedge bench: --configs hedge-live is now named default; running it as default\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}

	code, _, help := runCLI("bench", "--help")
	if code != exitOK || !strings.Contains(help, "hedge-live, its former name, is accepted as an alias of default") {
		t.Errorf("--help (exit %d) does not document the alias:\n%s", code, help)
	}
	if !strings.Contains(help, `(default "none-random,none-two-choice,hedge-fixed,default,`) {
		t.Errorf("--help: the default --configs do not run default:\n%s", help)
	}
}

// --redis-client rueidis reads through hedgerueidis: the run completes
// without errors, and the report names the client it measured.
func TestBenchRedisClient(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	redistest.NeedBinary(t, redistestBinary)
	dir := t.TempDir()
	code, stdout, stderr := runCLI("bench", "--backend", "redis", "--redis-client", "rueidis", "--repeats", "1",
		"--requests", "300", "--rate", "300", "--warmup", "200ms",
		"--stall-share", "0.1", "--stall-length", "20ms", "--timeout", "1m",
		"--configs", "none-random,"+bench.DefaultStrategy, "--reruns", "-1", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	rep := readBenchReport(t, dir)
	if len(rep.Backends) != 1 || len(rep.Backends[0].Runs) != 2 {
		t.Fatalf("results.json: %d backends, want 1 with 2 runs", len(rep.Backends))
	}
	for _, r := range rep.Backends[0].Runs {
		if r.Requests < 250 || r.Errors > 0 {
			t.Errorf("%s: %d requests answered, %d errors (%s)", r.Config, r.Requests, r.Errors, r.FirstError)
		}
		if r.Dials < 0 || r.PoolWaits != 0 || r.PoolTimeouts != 0 {
			t.Errorf("%s: %d dials, %d pool waits, %d pool timeouts; want dials counted and no pool wait", r.Config, r.Dials, r.PoolWaits, r.PoolTimeouts)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, bench.ReportMarkdown))
	if err != nil || !strings.Contains(string(md), "--redis-client rueidis") || !strings.Contains(string(md), "hedgerueidis.Client") {
		t.Errorf("report.md does not name the client (%v):\n%s", err, md)
	}
}

// readBenchReport reads and decodes the results.json hedge bench wrote
// into dir.
func readBenchReport(t *testing.T, dir string) bench.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, bench.ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	return rep
}

// hedge bench fanout runs hedge bench once per width and sums the widths
// up; its own mistakes are refused before anything starts.
func TestBenchFanOut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, bad := range [][]string{{"--fanout", "4"}, {"--width", "0"}, {"--width", "4,x"}, {"--width"}} {
		dir := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runCLI(append([]string{"bench", "fanout", "--out", dir}, bad...)...)
		if code != exitUsage || !strings.Contains(stderr, "--width") {
			t.Errorf("%q: exit %d, stderr %q; want a usage error that names --width", bad, code, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: the output directory was created", bad)
		}
	}
	dir := t.TempDir()
	code, stdout, stderr := runCLI("bench", "fanout", "--width", "2,3", "--backend", "http", "--repeats", "1",
		"--requests", "150", "--rate", "150", "--warmup", "200ms", "--stall-share", "0.1", "--stall-length", "20ms",
		"--timeout", "1m", "--reruns", "-1", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []int{2, 3} {
		rep := readBenchReport(t, filepath.Join(dir, fmt.Sprintf("width-%d", w)))
		if len(rep.Backends) != 1 || rep.Backends[0].Scenario.FanOut != w {
			t.Fatalf("width %d: %d backends, fan-out %v", w, len(rep.Backends), rep.Backends)
		}
		var names []string
		for _, c := range rep.Backends[0].Configs {
			names = append(names, c.Config)
		}
		if got := strings.Join(names, ","); got != benchFanOutConfigs {
			t.Errorf("width %d: configurations %s, want %s", w, got, benchFanOutConfigs)
		}
		for _, r := range rep.Backends[0].Runs {
			if r.Requests < 120 || r.Errors > 0 {
				t.Errorf("width %d, %s: %d requests answered, %d errors (%s)", w, r.Config, r.Requests, r.Errors, r.FirstError)
			}
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | http | none-two-choice (baseline) |", "| 3 | http | default-fan |"} {
		if !strings.Contains(string(sum), want) || !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
