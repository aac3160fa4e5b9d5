package dedup

import (
	"fmt"
	"net/http"
	"strings"
)

// DefaultMaxKeyLen is the longest idempotency key accepted by default, in
// bytes. A UUID is 36; 255 leaves room for any reasonable scheme.
const DefaultMaxKeyLen = 255

// HeaderKey is the request header that carries the idempotency key.
// XHeaderKey is accepted too, as package hedgehttp does; a request with
// both must give the same key in each.
const (
	HeaderKey  = "Idempotency-Key"
	XHeaderKey = "X-Idempotency-Key"
)

// HeaderReplayed is the response header set to "true" on a replayed
// outcome.
const HeaderReplayed = "Idempotent-Replayed"

// ParseKey validates one Idempotency-Key header value and returns the key.
// The value is either a bare key or, as the IETF draft on the header
// writes it, a Structured Field string ("\"...\"", with \" and \\
// escapes), which is unquoted. The key must be 1 to maxLen bytes
// (DefaultMaxKeyLen when maxLen <= 0) of printable ASCII (0x20 to 0x7E),
// and not only spaces. Every refusal matches ErrInvalidKey and says what
// is wrong.
func ParseKey(value string, maxLen int) (string, error) {
	if maxLen <= 0 {
		maxLen = DefaultMaxKeyLen
	}
	k := strings.TrimSpace(value)
	if len(k) >= 2 && k[0] == '"' {
		u, err := unquote(k)
		if err != nil {
			return "", err
		}
		k = u
	}
	if strings.TrimSpace(k) == "" {
		return "", fmt.Errorf("%w: the key is empty; send a unique key per operation, such as a UUID", ErrInvalidKey)
	}
	if len(k) > maxLen {
		return "", fmt.Errorf("%w: the key is %d bytes long, the limit is %d", ErrInvalidKey, len(k), maxLen)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: byte %d of the key is %#x; only printable ASCII (0x20 to 0x7E) is allowed", ErrInvalidKey, i, c)
		}
	}
	return k, nil
}

// unquote decodes a Structured Field string.
func unquote(s string) (string, error) {
	if len(s) < 2 || s[len(s)-1] != '"' {
		return "", fmt.Errorf("%w: the quoted key has no closing quote", ErrInvalidKey)
	}
	body := s[1 : len(s)-1]
	if !strings.ContainsAny(body, "\\\"") {
		return body, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch c {
		case '"':
			return "", fmt.Errorf("%w: an unescaped quote inside the quoted key", ErrInvalidKey)
		case '\\':
			i++
			if i == len(body) || (body[i] != '"' && body[i] != '\\') {
				return "", fmt.Errorf("%w: a backslash in a quoted key must escape a quote or a backslash", ErrInvalidKey)
			}
			c = body[i]
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// KeyFromHeader returns the idempotency key of a request's headers:
// ("", nil) when it carries none, the key when its Idempotency-Key and
// X-Idempotency-Key values all parse (ParseKey) to the same key, and an
// error matching ErrInvalidKey otherwise.
func KeyFromHeader(h http.Header, maxLen int) (string, error) {
	var key string
	seen := false
	for _, name := range [...]string{HeaderKey, XHeaderKey} {
		for _, v := range h.Values(name) {
			k, err := ParseKey(v, maxLen)
			if err != nil {
				return "", err
			}
			if seen && k != key {
				return "", fmt.Errorf("%w: the request carries two different keys (%s and %s headers); send one", ErrInvalidKey, HeaderKey, XHeaderKey)
			}
			key, seen = k, true
		}
	}
	return key, nil
}
