package try

import (
	"maps"
	"net/http"
	"slices"
	"strings"
)

// redacted replaces a header value that may be a credential.
const redacted = "<redacted>"

// redactHeaders lists the headers for the outputs: their names alone,
// each once; with values, as "Name: value", the value replaced by
// redacted when the header is secret, named like a credential
// (Sensitive), or holds a value shaped like one (secretShaped).
func redactHeaders(h http.Header, secret map[string]bool, values bool) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if !values {
			out = append(out, name)
			continue
		}
		for _, v := range h[name] {
			if secret[http.CanonicalHeaderKey(name)] || Sensitive(name) || secretShaped(v) {
				v = redacted
			}
			out = append(out, name+": "+v)
		}
	}
	return out
}

// authSchemes are the HTTP authentication schemes (and the words used
// like them) that begin a value carrying a credential.
var authSchemes = []string{"basic", "bearer", "digest", "token", "negotiate", "ntlm", "apikey", "api-key", "hoba", "mutual", "vapid", "scram-sha-1", "scram-sha-256", "aws4-hmac-sha256", "dpop", "oauth", "sharedkey", "signature"}

// secretShaped reports whether a header value looks like a credential
// whatever its header's name: it begins with an authentication scheme
// and a space ("Bearer ...", "Basic ..."), or holds a run of token
// characters (letters, digits and +/_-.~=%) that is a JWT or base64 JSON
// (it holds "eyJ", the encoding of `{"`), or that is long and random
// looking (20 or more, letters and digits mixed: API keys, hex and
// base64 secrets, and, as the price of caution, UUIDs).
func secretShaped(v string) bool {
	v = strings.TrimSpace(v)
	if scheme, rest, ok := strings.Cut(v, " "); ok && strings.TrimSpace(rest) != "" {
		for _, s := range authSchemes {
			if strings.EqualFold(scheme, s) {
				return true
			}
		}
	}
	run, letters, digits := 0, false, false
	check := func(end int) bool {
		if run == 0 {
			return false
		}
		tok := v[end-run : end]
		return strings.Contains(tok, "eyJ") || (run >= 20 && letters && digits)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letters = true
		case c >= '0' && c <= '9':
			digits = true
		case strings.IndexByte("+/_-.~=%", c) >= 0:
		default:
			if check(i) {
				return true
			}
			run, letters, digits = 0, false, false
			continue
		}
		run++
	}
	return check(len(v))
}
