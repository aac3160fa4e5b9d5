package lab

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// form reads query parameters, collecting one ParamError per bad
// parameter instead of stopping at the first.
type form struct {
	q    url.Values
	errs []ParamError
	seen map[string]bool
}

func newForm(q url.Values) *form { return &form{q: q, seen: map[string]bool{}} }

func (f *form) bad(name, format string, a ...any) {
	f.errs = append(f.errs, ParamError{Param: name, Reason: fmt.Sprintf(format, a...)})
}

// get returns the parameter's only value, or "" and false if absent.
func (f *form) get(name string) (string, bool) {
	f.seen[name] = true
	vs, ok := f.q[name]
	if !ok {
		return "", false
	}
	if len(vs) > 1 {
		f.bad(name, "given %d times: give it once", len(vs))
		return "", false
	}
	return strings.TrimSpace(vs[0]), true
}

// float reads a number in [lo, hi].
func (f *form) float(name string, def, lo, hi float64) float64 {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		f.bad(name, "%q is not a number: use %g to %g", s, lo, hi)
		return def
	}
	if x < lo || x > hi {
		f.bad(name, "%g is out of range: use %g to %g", x, lo, hi)
		return def
	}
	return x
}

// integer reads an integer in [lo, hi].
func (f *form) integer(name string, def, lo, hi int) int {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	x, err := strconv.Atoi(s)
	if err != nil {
		f.bad(name, "%q is not a whole number: use %d to %d", s, lo, hi)
		return def
	}
	if x < lo || x > hi {
		f.bad(name, "%d is out of range: use %d to %d", x, lo, hi)
		return def
	}
	return x
}

// uint reads a non-negative integer.
func (f *form) uint(name string, def uint64) uint64 {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		f.bad(name, "%q is not a whole number >= 0", s)
		return def
	}
	return x
}

// choice reads one of the allowed words.
func (f *form) choice(name, def string, allowed []string) string {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, s) {
		f.bad(name, "%q is not known: use one of %s", s, strings.Join(allowed, ", "))
		return def
	}
	return s
}

// boolean reads true/false, 1/0, on/off or yes/no.
func (f *form) boolean(name string, def bool) bool {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	switch strings.ToLower(s) {
	case "1", "true", "on", "yes":
		return true
	case "0", "false", "off", "no":
		return false
	}
	f.bad(name, "%q is not a boolean: use true or false", s)
	return def
}

// millis reads a duration given in milliseconds ("130") or as a Go
// duration ("130ms"), in [0, hi].
func (f *form) millis(name string, def, hi time.Duration) time.Duration {
	s, ok := f.get(name)
	if !ok {
		return def
	}
	var d time.Duration
	if x, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) < 1e9 {
		d = time.Duration(math.Round(x * float64(time.Millisecond)))
	} else if d, err = time.ParseDuration(s); err != nil {
		f.bad(name, "%q is not a duration: give milliseconds (130) or a duration (130ms)", s)
		return def
	}
	if d < 0 || d > hi {
		f.bad(name, "%v is out of range: use 0 to %v", d, hi)
		return def
	}
	return d
}

// unknown reports every parameter that was never read, so that a typo
// is not silently ignored.
func (f *form) unknown(known ...string) {
	var names []string
	for k := range f.q {
		if !f.seen[k] && !slices.Contains(known, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		f.bad(k, "unknown parameter")
	}
}
