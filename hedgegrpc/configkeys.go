package hedgegrpc

import (
	"bytes"
	"encoding/json"
	"strings"
)

// fields describes the keys of one kind of object in a service config.
type fields struct {
	name  string   // the object, in messages: "hedgingPolicy"
	read  []string // the keys hedgegrpc reads, as gRPC spells them
	other []string // gRPC's other keys, which hedgegrpc leaves to gRPC
	// closed means gRPC defines exactly the keys in read, so that any other
	// key is a mistake; an open object may hold fields hedgegrpc does not
	// know of.
	closed bool
	// elsewhere maps keys of other objects, put here by mistake, to the
	// object they belong in.
	elsewhere map[string]string
}

var (
	topFields = fields{
		name:  "the service config",
		read:  []string{"methodConfig", "retryThrottling"},
		other: []string{"loadBalancingPolicy", "loadBalancingConfig", "healthCheckConfig"},
		elsewhere: map[string]string{
			"name": "a methodConfig entry", "hedgingPolicy": "a methodConfig entry", "retryPolicy": "a methodConfig entry",
			"maxAttempts": "hedgingPolicy", "hedgingDelay": "hedgingPolicy", "nonFatalStatusCodes": "hedgingPolicy",
			"maxTokens": "retryThrottling", "tokenRatio": "retryThrottling",
		},
	}
	methodFields = fields{
		name:  "a methodConfig entry",
		read:  []string{"name", "retryPolicy", "hedgingPolicy"},
		other: []string{"timeout", "waitForReady", "maxRequestMessageBytes", "maxResponseMessageBytes"},
		elsewhere: map[string]string{
			"service": "a name list entry", "method": "a name list entry",
			"maxAttempts": "hedgingPolicy", "hedgingDelay": "hedgingPolicy", "nonFatalStatusCodes": "hedgingPolicy",
			"retryThrottling": "the top level", "maxTokens": "retryThrottling", "tokenRatio": "retryThrottling",
		},
	}
	nameFields       = fields{name: "a name", read: []string{"service", "method"}, closed: true}
	hedgingFields    = fields{name: "hedgingPolicy", read: []string{"maxAttempts", "hedgingDelay", "nonFatalStatusCodes"}, closed: true}
	throttlingFields = fields{name: "retryThrottling", read: []string{"maxTokens", "tokenRatio"}, closed: true}
)

// keys checks the keys of the object raw (at path) against f: errors for
// keys that are certainly wrong, warnings for near misses (see
// ParseServiceConfig and ServiceConfig.Warnings).
func (p *parser) keys(path string, raw json.RawMessage, f *fields) {
	setBy := map[string]string{} // a field read -> the key that set it
	for _, k := range objectKeys(raw) {
		field := k
		if path != "" {
			field = path + "." + k
		}
		known, read, how := f.match(k)
		switch how {
		case matchExact, matchCase:
			if prev, dup := setBy[known]; dup {
				p.fail(field, "sets %s a second time (%q set it already): keep one", known, prev)
				continue
			}
			setBy[known] = k
			if how == matchCase {
				p.warn(field, "differs from %q only in case: gRPC-Go reads it, other gRPC implementations ignore it; write it %q", known, known)
			}
		case matchSpelling:
			if read {
				p.fail(field, "is not read: gRPC spells this field %q and ignores any other spelling, so its value would be dropped without a word; write it %q", known, known)
			} else {
				p.warn(field, "is ignored by gRPC, which spells this field %q: write it %q", known, known)
			}
		case matchNear:
			if f.closed {
				p.fail(field, "unknown field: did you mean %q? %s has only %s", known, f.name, list(f.read))
			} else {
				p.warn(field, "unknown field, ignored by gRPC too: did you mean %q?", known)
			}
		default:
			if where, ok := f.elsewhereOf(k); ok {
				if f.closed {
					p.fail(field, "belongs in %s, not in %s: move it", where, f.name)
				} else {
					p.warn(field, "belongs in %s, not in %s, and is ignored here: move it", where, f.name)
				}
			} else if f.closed {
				p.fail(field, "unknown field: %s has only %s; remove it", f.name, list(f.read))
			}
		}
	}
}

// How a key matches a known field.
const (
	matchNone     = iota
	matchExact    // as gRPC spells it
	matchCase     // the same but for case: encoding/json (gRPC-Go) reads it
	matchSpelling // the same words, joined or cased otherwise: "hedging_policy"
	matchNear     // a small edit away: "hedgingPolicey"
)

// match finds the known field that key k names or nearly names, whether
// hedgegrpc reads it, and how close k is.
func (f *fields) match(k string) (known string, read bool, how int) {
	nk := normalize(k)
	best := -1
	for i, names := range [2][]string{f.read, f.other} {
		for _, name := range names {
			switch {
			case k == name:
				return name, i == 0, matchExact
			case strings.EqualFold(k, name):
				return name, i == 0, matchCase
			case nk == normalize(name):
				known, read, how = name, i == 0, matchSpelling
			case how != matchSpelling && nk != "":
				nn := normalize(name)
				if d := distance(nk, nn); d <= max(1, len(nn)/4) && (best < 0 || d < best) {
					known, read, how, best = name, i == 0, matchNear, d
				}
			}
		}
	}
	return known, read, how
}

// elsewhereOf reports the object that k (in any spelling) belongs in, if
// it belongs in another object than f.
func (f *fields) elsewhereOf(k string) (string, bool) {
	nk := normalize(k)
	for name, where := range f.elsewhere {
		if normalize(name) == nk {
			return where, true
		}
	}
	return "", false
}

// normalize folds case and drops '_' and '-', so that "hedging_policy",
// "hedging-policy" and "HedgingPolicy" all read "hedgingpolicy".
func normalize(k string) string {
	return strings.ToLower(separators.Replace(k))
}

var separators = strings.NewReplacer("_", "", "-", "")

// distance is the number of single-byte insertions, deletions,
// substitutions and swaps of adjacent bytes that turn a into b (optimal
// string alignment). Keys are short; large inputs are cut off early.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// list formats names as "a, b and c".
func list(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// objectKeys returns the keys of the JSON object raw, in order, duplicates
// included; nil if raw is not an object.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}
