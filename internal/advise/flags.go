package advise

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The parsers below read the lists and units that hedge advise's flags and
// the lab's Advise form take, with the same rules and messages in both
// places. Each returns one error per bad item, which names the item and
// says what was expected; the values read are those of the good items.

// SplitList splits a comma-separated list, trimming spaces and dropping
// empty items.
func SplitList(s string) []string {
	var out []string
	for x := range strings.SplitSeq(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// ParsePercentiles reads percentiles to try as delays, such as
// "90,p99,99.9". It checks that each is a number; Advise checks the range.
func ParsePercentiles(s string) ([]float64, []error) {
	out, errs := []float64{}, []error(nil)
	for _, x := range SplitList(s) {
		v, err := strconv.ParseFloat(strings.TrimPrefix(x, "p"), 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is not a number: give percentiles such as 90,99,99.9", x))
			continue
		}
		out = append(out, v)
	}
	return out, errs
}

// ParseDelays reads fixed delays to try, such as "20ms,50ms": each a
// positive duration.
func ParseDelays(s string) ([]time.Duration, []error) {
	var out []time.Duration
	var errs []error
	for _, x := range SplitList(s) {
		v, err := time.ParseDuration(x)
		if err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%q is not a positive duration: give delays such as 20ms,50ms", x))
			continue
		}
		out = append(out, v)
	}
	return out, errs
}

// ParseUnit reads the unit of latencies given as bare numbers: ns, us,
// ms, s, m or h (Fields.Unit).
func ParseUnit(s string) (time.Duration, error) {
	u, err := time.ParseDuration("1" + strings.TrimPrefix(s, "1"))
	if err != nil || u <= 0 {
		return 0, fmt.Errorf("%q is not a unit: use ns, us, ms, s, m or h", s)
	}
	return u, nil
}
