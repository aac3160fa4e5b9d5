package lab

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxQueryParams is the most parameters a query may hold. The explorer
// reads 20; a longer query is a mistake, and refusing it early keeps the
// error response short.
const maxQueryParams = 64

// maxEcho is the most bytes of a client's name or value quoted back in an
// error message.
const maxEcho = 40

// parseQuery parses a raw query string with url.ParseQuery. Unlike
// (*url.URL).Query, which drops the error, it reports a malformed query:
// one ParamError per malformed parameter (a ';', a bad %-escape), or one
// with an empty Param for a query that is too long to read.
func parseQuery(raw string) (url.Values, []ParamError) {
	if n := strings.Count(raw, "&") + 1; n > maxQueryParams {
		return nil, []ParamError{{Reason: fmt.Sprintf(
			"the query has %d parameters, more than the %d the lab accepts: give each parameter once", n, maxQueryParams)}}
	}
	q, err := url.ParseQuery(raw)
	if err == nil {
		return q, nil
	}
	// url.ParseQuery reports the first mistake only; name every one.
	var errs []ParamError
	for piece := range strings.SplitSeq(raw, "&") {
		if _, err := url.ParseQuery(piece); err != nil {
			name, _, _ := strings.Cut(piece, "=")
			if k, err := url.QueryUnescape(name); err == nil {
				name = k
			}
			errs = append(errs, ParamError{Param: clip(name), Reason: malformed(piece, err)})
		}
	}
	if len(errs) == 0 { // not expected: every error comes from one piece
		errs = append(errs, ParamError{Reason: "the query is malformed (" + err.Error() + "): encode it with encodeURIComponent or url.Values.Encode"})
	}
	return nil, errs
}

// malformed explains why one name=value piece of a query did not parse.
func malformed(piece string, err error) string {
	if strings.Contains(piece, ";") {
		return fmt.Sprintf("%s contains ';', which does not separate parameters: separate them with '&', or write ';' as %%3B", quote(piece))
	}
	return fmt.Sprintf("%s is not URL-encoded (%v): write '%%' as %%25", quote(piece), err)
}

// clip shortens s to at most maxEcho bytes, at a rune boundary, marking a
// cut with "…".
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	i := maxEcho
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// quote quotes a client's text for an error message, clipped.
func quote(s string) string { return strconv.Quote(clip(s)) }

// form reads query parameters, collecting one ParamError per bad
// parameter instead of stopping at the first.
type form struct {
	q    url.Values
	errs []ParamError
	seen map[string]bool
}

// newForm parses the raw query; a malformed one leaves the form empty,
// with its errors recorded.
func newForm(raw string) *form {
	q, errs := parseQuery(raw)
	return &form{q: q, errs: errs, seen: map[string]bool{}}
}

// malformed reports whether the query itself did not parse.
func (f *form) malformed() bool { return f.q == nil }

func (f *form) bad(name, format string, a ...any) {
	f.errs = append(f.errs, ParamError{Param: clip(name), Reason: fmt.Sprintf(format, a...)})
}

// get returns the parameter's only value, or "" and false if absent.
func (f *form) get(name string) (string, bool) {
	f.seen[name] = true
	vs, ok := f.q[name]
	if !ok {
		return "", false
	}
	if len(vs) > 1 {
		qs := make([]string, len(vs))
		for i, v := range vs {
			qs[i] = quote(v)
		}
		if len(qs) > 4 {
			qs = append(qs[:3], "…")
		}
		f.bad(name, "given %d times (%s): give it once", len(vs), strings.Join(qs, ", "))
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
		f.bad(name, "%s is not a number: use %g to %g", quote(s), lo, hi)
		return def
	}
	if x < lo || x > hi {
		f.bad(name, "%g is out of range: use %g to %g", x, lo, hi)
		return def
	}
	if x == 0 {
		x = 0 // -0 reads as 0: one cache entry, one echo
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
		f.bad(name, "%s is not a whole number: use %d to %d", quote(s), lo, hi)
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
		f.bad(name, "%s is not a whole number >= 0", quote(s))
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
		f.bad(name, "%s is not known: use one of %s", quote(s), strings.Join(allowed, ", "))
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
	f.bad(name, "%s is not a boolean: use true or false", quote(s))
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
	if x, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(x) {
		if math.IsInf(x, 0) || math.Abs(x) >= 1e9 {
			f.bad(name, "%s milliseconds is out of range: use 0 to %v", quote(s), hi)
			return def
		}
		d = time.Duration(math.Round(x * float64(time.Millisecond)))
	} else if d, err = time.ParseDuration(s); err != nil {
		f.bad(name, "%s is not a duration: give milliseconds (130) or a duration (130ms)", quote(s))
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
		if k == "" {
			f.bad(k, "a parameter with no name: give name=value")
			continue
		}
		f.bad(k, "unknown parameter")
	}
}
