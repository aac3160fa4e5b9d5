package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// Bad input is refused with exit code 2 and a message that says what to
// do, before any simulation starts (each case would take seconds or fail
// later if it started).
func TestValidationErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Commands:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"sim", "--world", "mars"}, "noise, stalls, bigjobs, mixed, lognormal"},
		{[]string{"sim", "--strategy", "hope"}, "hedge-p95-per-load"},
		{[]string{"sim", "--routing", "magic"}, "two-choice, random"},
		{[]string{"sim", "--load", "1.2"}, "outside (0, 1)"},
		{[]string{"sim", "--load", "0"}, "outside (0, 1)"},
		{[]string{"sim", "--world", "stalls", "--load", "0.99"}, "capacity"},
		{[]string{"sim", "--world", "mixed", "--load", "0.985"}, "capacity"},
		{[]string{"sim", "--requests", "0"}, "requests = 0"},
		{[]string{"sim", "--requests", "-5"}, "requests = -5"},
		{[]string{"sim", "--runs", "0"}, "--runs 0"},
		{[]string{"sim", "--requests", "1000", "--warmup", "1000"}, "warmup = 1000"},
		{[]string{"sim", "--warmup", "-7"}, "warmup = -7"},
		{[]string{"sim", "--strategy", "hedge-fixed"}, "needs --delay"},
		{[]string{"sim", "--max-attempts", "9"}, "max attempts"},
		{[]string{"sim", "--clients", "-1"}, "clients = -1"},
		{[]string{"sim", "--clients", "10", "--client-skew", "-1"}, "client skew -1"},
		{[]string{"sim", "--fanout", "4", "--fanout-need", "5"}, "fanout need = 5"},
		{[]string{"sim", "--bogus-flag"}, "flag provided but not defined"},
		{[]string{"sim", "stray"}, "unexpected arguments"},
		{[]string{"study", "--out", filepath.Join(file, "sub")}, "output directory"},
		{[]string{"study", "--workers", "-1"}, "--workers"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit code %d, want %d (stderr %q)", tc.args, code, exitUsage, stderr)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr %q does not contain %q", tc.args, stderr, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runCLI("help")
	if code != 0 || !strings.Contains(out, "study") || !strings.Contains(out, "sim") {
		t.Fatalf("help: code %d, output %q", code, out)
	}
	if code, _, errOut := runCLI("help", "sim"); code != 0 || !strings.Contains(errOut, "cancel-delay") {
		t.Fatalf("help sim: code %d, output %q", code, errOut)
	}
}

func TestSimRuns(t *testing.T) {
	code, out, errOut := runCLI("sim", "--world", "stalls", "--strategy", "hedge-p95-per-load", "--load", "0.5",
		"--requests", "5000", "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"p99", "p999", "extra_work", "hedged_fraction", "delay", "stall_mean"} {
		if _, ok := r[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	code, out, errOut = runCLI("sim", "--world", "bigjobs", "--strategy", "default", "--load", "0.5", "--requests", "5000",
		"--runs", "1", "--clients", "10", "--client-skew", "1", "--fanout", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r = nil
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if r["clients"] != 10.0 || r["client_skew"] != 1.0 {
		t.Errorf("clients %v, client skew %v; want 10 and 1", r["clients"], r["client_skew"])
	}
	code, out, errOut = runCLI("sim", "--strategy", "tied", "--cancel-delay", "0.1", "--requests", "3000", "--runs", "1")
	if code != 0 || !strings.Contains(out, "p99.9") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}
