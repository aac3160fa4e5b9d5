package try

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestSecretShaped(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", true},          // a JWT
		{"jwt=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln; x=1", true}, // within a cookie-like value
		{"Bearer abc", true},
		{"bearer  abc.def", true},
		{"Basic dXNlcjpwYXNz", true},
		{"AWS4-HMAC-SHA256 Credential=AKIA/2026", true},
		{"sk_live_4eC39HqLyjWDarjtT1zdp7dc", true},     // an API key
		{"0123456789abcdef0123456789abcdef", true},     // a hex secret
		{"q8Zk3vN1pL0xR7yT2bW9mC4s", true},             // base64
		{"123e4567-e89b-12d3-a456-426614174000", true}, // a UUID, by caution
		{"visible", false},
		{"application/json", false},
		{"text/html; charset=utf-8", false},
		{"no-cache", false},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", false},
		{"gzip, deflate, br", false},
		{"en-US,en;q=0.9", false},
		{"Bearer", false}, // a word alone
		{"12345", false},
		{"", false},
	} {
		if got := secretShaped(c.v); got != c.want {
			t.Errorf("secretShaped(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

// Without ShowHeaderValues the outputs name the headers only.
func TestRedactHeaders(t *testing.T) {
	h := http.Header{"X-Plain": {"visible"}, "X-Trace": {"a", "b"}, "Authorization": {"hunter2"}}
	if got, want := redactHeaders(h, nil, false), []string{"Authorization", "X-Plain", "X-Trace"}; !slices.Equal(got, want) {
		t.Errorf("names only: %q, want %q", got, want)
	}
	want := []string{"Authorization: <redacted>", "X-Plain: <redacted>", "X-Trace: a", "X-Trace: b"}
	if got := redactHeaders(h, map[string]bool{"X-Plain": true}, true); !slices.Equal(got, want) {
		t.Errorf("with values: %q, want %q", got, want)
	}
}

// Whatever surrounds it, a value holding a JWT, or a run of 20 token
// characters or more with letters and digits, is never written: the
// secret is built from the fuzzer's bytes in those two shapes.
func FuzzSecretShaped(f *testing.F) {
	f.Add("", "", []byte("0123456789abcdef"), false)
	f.Add("session=", "; Path=/", []byte{0xff, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, true)
	f.Add("Token ", "", []byte("x"), true)
	f.Add("a b ", " c", []byte{}, false)
	f.Fuzz(func(t *testing.T, before, after string, b []byte, jwt bool) {
		var secret string
		if jwt {
			enc := base64.RawURLEncoding
			secret = "eyJ" + enc.EncodeToString(b) + "." + enc.EncodeToString(append(b, '}')) + "." + enc.EncodeToString(b)
		} else {
			secret = hex.EncodeToString(b) + "a0b1c2d3e4f5a6b7c8d9" // at least 20, letters and digits
		}
		v := before + secret + after
		if !secretShaped(v) {
			t.Errorf("secretShaped(%q) = false: it holds %q", v, secret)
		}
		out := strings.Join(redactHeaders(http.Header{"X-Anything": {v}}, nil, true), "\n")
		if strings.Contains(out, secret) {
			t.Errorf("written: %q", out)
		}
		// And whatever the value, the detector never panics and the
		// header's value is either written whole or not at all.
		if w := redactHeaders(http.Header{"X-V": {after}}, nil, true)[0]; w != "X-V: "+after && w != "X-V: "+redacted {
			t.Errorf("value %q written as %q", after, w)
		}
	})
}
