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
	"github.com/tailcut/hedge/internal/pgtest"
)

// hedge bench --backend postgres runs a primary and two standbys end to
// end: every request answered, the last standby's stalls replayed, the
// report naming the setup, and no server process left behind. "all"
// does not run it. Nothing here is timed: the stall schedule is fixed by
// the seed and the run waits for every stall of it.
func TestBenchPostgres(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	pgtest.Need(t)
	if contains(benchBackends, "postgres") {
		t.Error(`"all" runs postgres; it is meant to be run by name only`)
	}
	dir := t.TempDir()
	code, stdout, stderr := runCLI("bench", "--backend", "postgres", "--repeats", "1",
		"--requests", "600", "--rate", "400", "--warmup", "300ms", "--pg-pool", "4",
		"--stall-share", "0.1", "--stall-length", "20ms", "--timeout", "1m",
		"--configs", "none-random,"+bench.DefaultStrategy, "--reruns", "-1", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	rep := readBenchReport(t, dir)
	if len(rep.Backends) != 1 || rep.Backends[0].Backend != "postgres" || len(rep.Backends[0].Runs) != 2 {
		t.Fatalf("results.json: %d backends, want postgres with 2 runs", len(rep.Backends))
	}
	br := rep.Backends[0]
	for _, r := range br.Runs {
		if r.Requests < 500 || r.Errors > 0 {
			t.Errorf("%s: %d requests answered, %d errors (%s)", r.Config, r.Requests, r.Errors, r.FirstError)
		}
		if r.Stalls == 0 || r.StallErrors == 0 {
			t.Errorf("%s: %d stalls, %d refused; want the last standby's stalls and the other servers' refused", r.Config, r.Stalls, r.StallErrors)
		}
		if r.Dials < 0 || r.PoolWaits < 0 {
			t.Errorf("%s: dials %d, pool waits %d: want them counted", r.Config, r.Dials, r.PoolWaits)
		}
	}
	if br.Scenario.Rate != 400 {
		t.Errorf("rate %v, want 400", br.Scenario.Rate)
	}
	if len(br.Pids) < 3 {
		t.Errorf("%d pids recorded, want the three postmasters and their children", len(br.Pids))
	}
	for _, pid := range br.Pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("postgres pid %d still exists after the run (kill 0: %v)", pid, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, bench.ReportMarkdown))
	if err != nil || !strings.Contains(string(md), "hedgepgx.Client") || !strings.Contains(string(md), "only the last standby stalls") {
		t.Errorf("report.md does not describe the setup (%v):\n%s", err, md)
	}
}

// The postgres flags are checked before anything starts.
func TestBenchPostgresValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--backend", "postgres", "--pg-stall", "half"}, `--pg-stall "half": use one or all`},
		{[]string{"bench", "--backend", "postgres", "--pg-pool", "-2"}, "--pg-pool -2"},
		{[]string{"bench", "--backend", "mysql"}, "or postgres"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := runCLI(append(tc.args, "--out", out)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if strings.Contains(stderr, "hedge bench: starting") || stdout != "" {
			t.Errorf("%v: work began before the refusal", tc.args)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the output directory was touched", tc.args)
		}
	}
}
