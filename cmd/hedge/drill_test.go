package main

import (
	"strings"
	"testing"
)

// hedge drill prints the trace and the outcomes the lab documents.
func TestDrillCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"hedge after 130 ms", "Outcome: TAIL CUT", "640 ms to 226 ms for 15% extra",
			"win     backup answers first: latency 225 ms", "684 ms of backend time", "6 at 225 ms, 12 at 226 ms, 17 at 233 ms"}},
		{[]string{"--delay", "50ms"}, []string{"Outcome: EXCESS LOAD", "-> 146 ms", "20 of 20", "+100%"}},
		{[]string{"--delay", "500ms"}, []string{"Outcome: TAIL CUT", "-> 595 ms", "requests 6, 12"}},
		{[]string{"--delay", "0s"}, []string{"Outcome: EXCESS LOAD", "20 of 20"}},
		{[]string{"--delay", "50ms", "--budget", "10"}, []string{"Outcome: NO TAIL GAIN", "requests 1, 2", "-> 640 ms", "no backup, the budget of 2 hedges is spent"}},
		{[]string{"--no-cancel"}, []string{"Outcome: TAIL CUT", "1990 ms of backend time", "losing primary completes after 900 ms"}},
		{[]string{"--op", "write"}, []string{"Outcome: DUPLICATE WRITES", "3 requests wrote twice", "commit  backup commits the write again: DUPLICATE WRITE"}},
		{[]string{"--op", "write-key"}, []string{"Outcome: TAIL CUT", "3 second commits deduplicated"}},
		{[]string{"--no-hedge"}, []string{"Outcome: BASELINE", "no hedging"}},
	} {
		code, out, errOut := runCLI(append([]string{"drill"}, tc.args...)...)
		if code != exitOK {
			t.Errorf("%v: exit %d: %s", tc.args, code, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}

func TestDrillCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--op", "delete"}, "read, write, write-key"},
		{[]string{"--delay", "-1s"}, "delay -1s: use 0 to 10s"},
		{[]string{"--delay", "11s"}, "use 0 to 10s"},
		{[]string{"--delay", "fast"}, "invalid value"},
		{[]string{"--budget", "300"}, "budget 300%: use 0 to 100"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		code, _, errOut := runCLI(append([]string{"drill"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}
