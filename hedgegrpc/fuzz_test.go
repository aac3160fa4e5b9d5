package hedgegrpc

import (
	"encoding/json"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tailcut/hedge"
)

// protoDurationRE is the JSON form of a google.protobuf.Duration that
// hedgingDelay accepts: seconds, at most nine fractional digits, "s".
var protoDurationRE = regexp.MustCompile(`^(-?)([0-9]*)(?:\.([0-9]{1,9}))?s$`)

// wantDuration reads s as the proto Duration grammar says, independently of
// parseDuration (a regular expression and big integers instead of cutting
// and strconv): the duration, saturated at hedge.Never, and whether s is a
// valid, non-negative hedgingDelay.
func wantDuration(s string) (time.Duration, bool) {
	m := protoDurationRE.FindStringSubmatch(s)
	if m == nil || m[2] == "" && m[3] == "" {
		return 0, false
	}
	secs, nanos := new(big.Int), new(big.Int)
	if m[2] != "" {
		secs.SetString(m[2], 10)
	}
	if m[3] != "" {
		nanos.SetString(m[3]+strings.Repeat("0", 9-len(m[3])), 10)
	}
	if m[1] == "-" && (secs.Sign() != 0 || nanos.Sign() != 0) {
		return 0, false // negative
	}
	if secs.Cmp(big.NewInt(315_576_000_000)) > 0 {
		return 0, false // beyond the proto maximum
	}
	ns := new(big.Int).Add(new(big.Int).Mul(secs, big.NewInt(1e9)), nanos)
	if !ns.IsInt64() {
		return hedge.Never, true
	}
	return time.Duration(ns.Int64()), true
}

// suggestion returns the quoted text after `write ` in msg, if any.
func suggestion(msg string) (string, bool) {
	_, after, ok := strings.Cut(msg, "write ")
	if !ok || !strings.HasPrefix(after, `"`) {
		return "", false
	}
	q, err := strconv.QuotedPrefix(after)
	if err != nil {
		return "", false
	}
	s, err := strconv.Unquote(q)
	return s, err == nil
}

// FuzzParseDuration checks parseDuration, which reads hedgingDelay, against
// an independent reading of the grammar: it accepts exactly the valid,
// non-negative proto Durations, with their value (saturated at hedge.Never);
// what it accepts formats back to a string it reads as the same value; a
// refusal quotes the input, and the spelling it suggests is accepted.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"0s", "0.010s", ".5s", "3s", "-0s", "-.0s", "1.s", "+1s", "1e3s", "0.0000000001s",
		"9223372036s", "9223372036.854775807s", "9223372036.854775808s",
		"315576000000s", "315576000000.999999999s", "315576000001s", "-1s", "",
		"s", "1", "10ms", "1h", "99999999999999999999", "007s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		want, ok := wantDuration(s)
		switch {
		case ok && err != nil:
			t.Fatalf("parseDuration(%q) refused a valid delay: %v", s, err)
		case !ok && err == nil:
			t.Fatalf("parseDuration(%q) = %v, want a refusal", s, d)
		case ok && d != want:
			t.Fatalf("parseDuration(%q) = %d, want %d", s, d, want)
		}
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("error %q does not quote the input %q", err, s)
			}
			if sug, ok := suggestion(err.Error()); ok {
				if _, err := parseDuration(sug); err != nil {
					t.Errorf("for %q the error suggests %q, which is refused too: %v", s, sug, err)
				}
			}
			return
		}
		if d < 0 {
			t.Fatalf("parseDuration(%q) = %v, negative", s, d)
		}
		f := formatDuration(d)
		if back, err := parseDuration(f); err != nil || back != d {
			t.Fatalf("parseDuration(formatDuration(%d) = %q) = %d, %v", d, f, back, err)
		}
		if _, frac, _ := strings.Cut(strings.TrimSuffix(f, "s"), "."); len(frac)%3 != 0 {
			t.Errorf("formatDuration(%d) = %q: want 0, 3, 6 or 9 fractional digits", d, f)
		}
	})
}

// wantCode reads one element of nonFatalStatusCodes independently of
// parseCode: a JSON string that is a canonical name, or a JSON number that
// is a whole number, of a code from 1 to 16.
func wantCode(raw json.RawMessage) (codes.Code, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	switch v := v.(type) {
	case string:
		for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
			if codeNames[c] == v {
				return c, true
			}
		}
	case float64:
		if v >= 1 && v <= 16 && v == math.Trunc(v) {
			return codes.Code(v), true
		}
	}
	return 0, false
}

// FuzzParseCode checks parseCode, which reads nonFatalStatusCodes, against
// an independent reading: it accepts exactly the canonical names and the
// whole numbers of the codes 1 to 16 (OK is not a failure); each code reads
// back from its name and its number; and the spelling a refusal suggests is
// accepted. raw is the JSON text of one list element.
func FuzzParseCode(f *testing.F) {
	for _, raw := range []string{
		`"UNAVAILABLE"`, `14`, `0`, `17`, `-1`, `"unavailable"`, `" UNAVAILABLE "`, `"14"`,
		`14.0`, `1e1`, `"OK"`, `"Canceled"`, `"CANCELLED"`, `null`, `true`, `[]`, `"UNAVAIL\u0041BLE"`,
	} {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var list []json.RawMessage
		if json.Unmarshal([]byte("["+raw+"]"), &list) != nil || len(list) != 1 {
			return // not one JSON value: the list itself is refused
		}
		elem := list[0]
		c, err := parseCode(elem)
		want, ok := wantCode(elem)
		switch {
		case ok && err != nil:
			t.Fatalf("parseCode(%s) refused code %d: %v", elem, want, err)
		case !ok && err == nil:
			t.Fatalf("parseCode(%s) = %d, want a refusal", elem, c)
		case ok && c != want:
			t.Fatalf("parseCode(%s) = %d, want %d", elem, c, want)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseCode(%s): empty error", elem)
			}
			msg := err.Error()
			if _, name, ok := strings.Cut(msg, "write it "); ok {
				if _, err := parseCode(json.RawMessage(strconv.Quote(name))); err != nil {
					t.Errorf("for %s the error suggests %s, which is refused too: %v", elem, name, err)
				}
			}
			if _, n, ok := strings.Cut(msg, "write "); ok && n != "" && n[0] >= '0' && n[0] <= '9' {
				n, _, _ = strings.Cut(n, " ")
				if _, err := parseCode(json.RawMessage(n)); err != nil {
					t.Errorf("for %s the error suggests %s, which is refused too: %v", elem, n, err)
				}
			}
			return
		}
		name, _ := json.Marshal(codeName(c))
		if back, err := parseCode(name); err != nil || back != c {
			t.Errorf("code %d does not read back from its name %s: %d, %v", c, name, back, err)
		}
		if back, err := parseCode(json.RawMessage(strconv.Itoa(int(c)))); err != nil || back != c {
			t.Errorf("code %d does not read back from its number: %d, %v", c, back, err)
		}
	})
}

// The canonical names are the ones gRPC itself reads (codes.Code's JSON
// form), so that the table the parser and FuzzParseCode share is right.
func TestCodeNamesMatchGRPC(t *testing.T) {
	for c, name := range codeNames {
		var got codes.Code
		if err := got.UnmarshalJSON([]byte(strconv.Quote(name))); err != nil || got != codes.Code(c) {
			t.Errorf("gRPC reads %q as %v (%v), want %v", name, got, err, codes.Code(c))
		}
	}
}
