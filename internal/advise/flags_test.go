package advise

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFlagParsers checks the list and unit parsers the CLI and the lab
// share: good items are read, each bad one is named in an error of its
// own, and empty items are skipped.
func TestFlagParsers(t *testing.T) {
	pcts, errs := ParsePercentiles(" 90, p99,,x, 99.9")
	if !slices.Equal(pcts, []float64{90, 99, 99.9}) || len(errs) != 1 || !strings.Contains(errs[0].Error(), `"x" is not a number`) {
		t.Errorf("ParsePercentiles = %v, %v", pcts, errs)
	}
	if pcts, errs := ParsePercentiles(""); pcts == nil || len(pcts) != 0 || errs != nil {
		t.Errorf("ParsePercentiles(\"\") = %#v, %v; want an empty, non-nil list (none asked for)", pcts, errs)
	}
	delays, errs := ParseDelays("20ms,0s,-1ms,5x,1s")
	if !slices.Equal(delays, []time.Duration{20 * time.Millisecond, time.Second}) || len(errs) != 3 {
		t.Errorf("ParseDelays = %v, %v; want 20ms and 1s, and three errors", delays, errs)
	}
	for in, want := range map[string]time.Duration{"ms": time.Millisecond, "us": time.Microsecond, "1s": time.Second} {
		if u, err := ParseUnit(in); u != want || err != nil {
			t.Errorf("ParseUnit(%q) = %v, %v; want %v", in, u, err, want)
		}
	}
	for _, in := range []string{"", "furlong", "-ms"} {
		if _, err := ParseUnit(in); err == nil || !strings.Contains(err.Error(), "ns, us, ms, s, m or h") {
			t.Errorf("ParseUnit(%q): %v; want an error naming the units", in, err)
		}
	}
}
