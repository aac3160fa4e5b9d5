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
	for _, want := range []string{"hedge advise latencies.txt", "--field latency_ms --unit ms", "access.jsonl", "--metric http_request_duration_seconds", "api/v1/query", "--probe https://", "only GET or HEAD"} {
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
	args := []string{"advise", "--in", in, "--load", "0.3", "--sim-requests", "5000"}
	var stdout, stderr bytes.Buffer
	code := run(append(args, "--out", out), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// The terminal gets the headline and a summary; report.txt the
	// details as well, and the summary says where they are.
	short := stdout.String()
	if n := strings.Count(short, "\n"); n > 30 {
		t.Errorf("the terminal output has %d lines, want at most 30:\n%s", n, short)
	}
	for _, want := range []string{"The library's default (the zero hedge.Config", "\nRecommended: ", "Sample: 5000 latencies", "  the library's default  ", filepath.Join(out, "report.txt")} {
		if !strings.Contains(short, want) {
			t.Errorf("the terminal output lacks %q:\n%s", want, short)
		}
	}
	if strings.Contains(short, "assumes:") || strings.Contains(short, "hedge.Config{") {
		t.Errorf("the terminal output holds the details:\n%s", short)
	}
	report, err := os.ReadFile(filepath.Join(out, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Independent copies", "Queueing, fresh sizes", "Queueing, stalling servers", "Recommendation", "hedge.Config{", "hedgingPolicy"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.txt lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "advise.svg")); err != nil {
		t.Error(err)
	}

	// --verbose prints the full report, as report.txt has it.
	stdout.Reset()
	if code := run(append(args, "--verbose", "--out", ""), &stdout, &stderr); code != exitOK {
		t.Fatalf("--verbose: exit %d: %s", code, stderr.String())
	}
	if stdout.String() != string(report) {
		t.Errorf("--verbose printed:\n%s\nwant report.txt's text:\n%s", stdout.String(), report)
	}

	// --sizes picks the queueing estimates.
	stdout.Reset()
	if code := run([]string{"advise", "--in", in, "--load", "0.3", "--sim-requests", "5000", "--sizes", "shared,stalls", "--out", "", "--verbose"}, &stdout, &stderr); code != exitOK {
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
		{[]string{"advise"}, exitUsage, "give the latencies as a FILE argument or with --in"},
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

// writeTimed writes n JSON lines with a send time every 4 ms and a slow
// tail, naming one of hosts replicas on each line when hosts > 0, to a
// file in dir, and returns its path.
func writeTimed(t *testing.T, dir string, n, hosts int) string {
	t.Helper()
	var b strings.Builder
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for k := range n {
		x := time.Duration(1+k%7) * time.Millisecond
		if k%50 == 3 {
			x *= 20
		}
		host := ""
		if hosts > 0 {
			host = fmt.Sprintf(",\"host\":\"r%d\"", k%hosts)
		}
		fmt.Fprintf(&b, "{\"ts\":%q,\"latency\":%q%s}\n", t0.Add(time.Duration(k)*4*time.Millisecond).Format(time.RFC3339Nano), x, host)
	}
	p := filepath.Join(dir, "timed.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The file may be given as an argument, as most tools take their input,
// with the flags before or after it; --in still works; --replicas and
// --concurrency say what --servers said as one number, and --servers is
// refused where it could mean either; --objective and --plain-hedging
// reach the report.
func TestAdviseArgumentsAndFlags(t *testing.T) {
	dir := t.TempDir()
	in := writeTimed(t, dir, 3000, 0)
	for _, tt := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"advise", in, "--time-field", "ts", "--sizes", "fresh", "--sim-requests", "3000", "--replicas", "3", "--concurrency", "4"}, exitOK,
			[]string{"12 FCFS servers", "spread at random over 3 replicas", "judged by the p99 (--objective)"}},
		{[]string{"advise", "--time-field", "ts", "--sizes", "", "--objective", "p99.9", "--plain-hedging", in}, exitOK,
			[]string{"judged by the p99.9 (--objective)"}},
		{[]string{"advise", "--in", in, "--time-field", "ts", "--sizes", "", "--percentiles", "95"}, exitOK, []string{"Sample: 3000 latencies"}},
		{[]string{"advise", in, "--time-field", "ts", "--servers", "12"}, exitUsage, []string{"--servers", "--replicas", "--concurrency"}},
		{[]string{"advise", in, "--servers", "12", "--replicas", "3"}, exitUsage, []string{"--replicas"}},
		{[]string{"advise", in, "--in", in}, exitUsage, []string{"give the file as an argument or with --in, not both"}},
		{[]string{"advise", in, in}, exitUsage, []string{"one file"}},
		{[]string{"advise", in, "--objective", "p50"}, exitUsage, []string{"--objective", "p99 or p99.9"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append(tt.args, "--out", "", "--verbose"), &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d: %.300s", tt.args[1:], code, tt.code, stderr.String())
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q: %.300s", tt.args[1:], w, stderr.String())
			}
		}
	}
}
