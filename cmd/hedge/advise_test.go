package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAdviseHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"advise", "--help"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	help := errb.String()
	for _, want := range []string{"--in latencies.txt", "--field latency_ms --unit ms", "access.jsonl", "--metric http_request_duration_seconds", "api/v1/query", "--probe https://", "only GET or HEAD"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestAdviseFile(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("# exponential latencies, every 50th twenty times slower\n")
	for i := range 5000 {
		x := -math.Log(1 - (float64(i)+0.5)/5000)
		if i%50 == 7 {
			x *= 20
		}
		fmt.Fprintf(&b, "%v\n", time.Duration(x*float64(time.Millisecond)))
	}
	in := filepath.Join(dir, "lat.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run([]string{"advise", "--in", in, "--load", "0.3", "--sim-requests", "5000", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"Independent copies", "Queueing, fresh sizes", "Queueing, stalling servers", "Recommendation", "hedge.Config{", "hedgingPolicy"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, f := range []string{"report.txt", "advise.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}

	// --sizes picks the queueing estimates.
	stdout.Reset()
	if code := run([]string{"advise", "--in", in, "--load", "0.3", "--sim-requests", "5000", "--sizes", "shared,stalls", "--out", ""}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if o := stdout.String(); strings.Contains(o, "Queueing, fresh sizes") || !strings.Contains(o, "Queueing, shared sizes") || !strings.Contains(o, "Queueing, stalling servers") {
		t.Errorf("--sizes shared,stalls: want the shared and stalled estimates only:\n%s", o)
	}
}

func TestAdviseMistakes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("3ms\nfast\n"), 0o644)
	small := filepath.Join(dir, "small.txt")
	os.WriteFile(small, []byte("3ms\n4ms\n"), 0o644)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"advise"}, exitUsage, "give the latencies with --in"},
		{[]string{"advise", "--in", bad, "--probe", "http://x/"}, exitUsage, "not both"},
		{[]string{"advise", "--probe", "http://x/", "--probe-method", "POST"}, exitUsage, "only GET or HEAD"},
		{[]string{"advise", "--in", bad, "--sizes", "odd"}, exitUsage, "--sizes"},
		{[]string{"advise", "--in", bad, "--sizes", "fresh,odd"}, exitUsage, `--sizes "odd": use fresh, shared, stalls`},
		{[]string{"advise", "--in", bad, "--out", ""}, exitFailure, "line 2: \"fast\" is not a latency"},
		{[]string{"advise", "--in", small, "--out", ""}, exitFailure, "2 latencies: give at least 1000"},
	} {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}
