package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailcut/hedge/internal/fleetbench"
)

// TestBenchFleetWorker is a worker process of TestBenchFleetFile: the
// test binary, started again with fleetbench.WorkerEnv set.
func TestBenchFleetWorker(t *testing.T) {
	if os.Getenv(fleetbench.WorkerEnv) == "" {
		t.Skip("a worker process of TestBenchFleetFile, run by it")
	}
	if err := fleetbench.RunWorkerFromEnv(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The tiny form through the command line, with the file source (the
// etcd form runs in package fleetbench's tests): the table on stdout,
// progress on stderr, fleet.md and fleet.json in --out.
func TestBenchFleetFile(t *testing.T) {
	prev := fleetWorkerCommand
	fleetWorkerCommand = func(string) *exec.Cmd {
		return exec.Command(os.Args[0], "-test.run=^TestBenchFleetWorker$")
	}
	t.Cleanup(func() { fleetWorkerCommand = prev })
	out := t.TempDir()
	code, stdout, stderr := runCLI("bench", "fleet", "--sources", "file", "--watchers", "3", "--procs", "1",
		"--rate", "50", "--hold", "100ms", "--bound", "2m", "--quick", "--out", out)
	if code != exitOK {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"| file | push | 1 | 3/3 |", "| file | kill switch (off) | 1 | 3/3 |", "| file | invalid documents | 6 |", "0 of 6"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "file: starting 3 watchers in 1 worker processes") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	md, err := os.ReadFile(filepath.Join(out, "fleet.md"))
	if err != nil || !strings.Contains(stdout, string(md)) {
		t.Errorf("fleet.md (%v) is not the table printed:\n%s", err, md)
	}
	js, err := os.ReadFile(filepath.Join(out, "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res fleetbench.Result
	if err := json.Unmarshal(js, &res); err != nil || len(res.Rows) != 3 || res.Options.Pushes != 1 {
		t.Errorf("fleet.json: %v, %+v", err, res)
	}
}

func TestBenchFleetValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sources", "zookeeper"}, `source "zookeeper": use etcd or file`},
		{[]string{"--watchers", "2", "--procs", "3"}, "procs = 3"},
		{[]string{"--pushes", "0"}, "pushes = 0"},
		{[]string{"--bound", "0s"}, "bound must be positive"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		code, _, stderr := runCLI(append([]string{"bench", "fleet"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit code %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
