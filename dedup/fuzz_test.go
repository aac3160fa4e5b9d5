package dedup_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tailcut/hedge/dedup"
)

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k", `"k"`, `"a\"b"`, `"a\\b"`, `"`, `""`, " ", "k\x00", "clé", strings.Repeat("x", 300), `"unterminated`, `"bad\x"`} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, v string, maxLen int) {
		maxLen %= 512
		k, err := dedup.ParseKey(v, maxLen)
		if err != nil {
			if !errors.Is(err, dedup.ErrInvalidKey) {
				t.Fatalf("ParseKey(%q) error %v does not match ErrInvalidKey", v, err)
			}
			return
		}
		limit := maxLen
		if limit <= 0 {
			limit = dedup.DefaultMaxKeyLen
		}
		if k == "" || len(k) > limit || strings.TrimSpace(k) == "" {
			t.Fatalf("ParseKey(%q) = %q: empty or over %d bytes", v, k, limit)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q with byte %#x", v, k, k[i])
			}
		}
		// A key, quoted as a Structured Field string, parses to itself.
		q := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if k2, err := dedup.ParseKey(q, maxLen); err != nil || k2 != k {
			if strings.TrimSpace(k) == k {
				t.Fatalf("quoted %q parses to %q, %v", q, k2, err)
			}
		}
		// In a header, through KeyFromHeader, it is the same key.
		h := http.Header{}
		h.Set(dedup.HeaderKey, v)
		if k3, err := dedup.KeyFromHeader(h, maxLen); err != nil || k3 != k {
			t.Fatalf("KeyFromHeader(%q) = %q, %v; ParseKey gave %q", v, k3, err, k)
		}
	})
}

func FuzzOutcomeUnmarshal(f *testing.F) {
	good, _ := dedup.Outcome{Status: 201, Header: http.Header{"Location": {"/x"}}, Body: []byte("b")}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 2, 1, 1, 'a', 200, 200, 200, 200, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var o dedup.Outcome
		if err := o.UnmarshalBinary(b); err != nil {
			return
		}
		// What decodes re-encodes to the same outcome.
		b2, _ := o.MarshalBinary()
		var o2 dedup.Outcome
		if err := o2.UnmarshalBinary(b2); err != nil {
			t.Fatalf("re-encoded outcome does not decode: %v", err)
		}
		if o.Status != o2.Status || o.TooLarge != o2.TooLarge || !bytes.Equal(o.Body, o2.Body) || len(o.Header) != len(o2.Header) {
			t.Fatalf("round trip changed %+v to %+v", o, o2)
		}
	})
}
