package try

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The target parsers read files a user hands over: whatever the bytes,
// they return targets or an error matching ErrTargets, never panic, and
// every target they return is a path on the replicas with a method the
// options may send.
func FuzzParseTargets(f *testing.F) {
	replicas := []string{"http://127.0.0.1:8080", "http://127.0.0.1:8081"}
	for _, s := range []string{
		"GET /a\n\nHEAD /b\nX-Name: v\n",
		"GET http://127.0.0.1:8080/x?y=1\n",
		"GET http://example.com/x\n",
		`{"method":"GET","url":"/a","header":{"X":["1"]}}` + "\n",
		`{"method":"GET","url":"http://user:pw@127.0.0.1:8080/a"}`,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "@") {
			// A body line names a file to read: the fuzzer could name
			// one that never ends (a device, a pipe).
			return
		}
		check := func(ts []Target, err error) {
			if err != nil {
				if !errors.Is(err, ErrTargets) && !errors.Is(err, ErrForeignHost) {
					t.Fatalf("error %v matches neither ErrTargets nor ErrForeignHost", err)
				}
				return
			}
			for _, tg := range ts {
				if !strings.HasPrefix(tg.Path, "/") {
					t.Fatalf("target path %q is not a path on the replicas", tg.Path)
				}
			}
		}
		check(ParseHTTPTargets(strings.NewReader(s), "", replicas))
		check(ParseJSONTargets(bytes.NewReader([]byte(s)), replicas))
	})
}

// The address parsers of gRPC and Redis replicas read what a user types:
// whatever the string, they return an address or an error, never panic,
// and an error never echoes a password given in the address.
func FuzzParseAddrs(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:6379", "redis://10.0.0.1:6379/2", "rediss://host:6380", "redis://u:hunter2@h:1",
		"u:hunter2@h:1", "[::1]:50051", "http://h:1", "h", "redis://h", "redis://h:1/x", "h:0", "h:99999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const pw = "hunter2"
		a, err := parseRedisAddr(s)
		if err == nil && a.addr == "" {
			t.Errorf("parseRedisAddr(%q): no address and no error", s)
		}
		if err != nil && strings.Contains(s, "@") && strings.Contains(s, pw) && strings.Contains(err.Error(), pw) && !strings.Contains(s[strings.LastIndexByte(s, '@'):], pw) {
			t.Errorf("parseRedisAddr(%q): the error echoes the password: %v", s, err)
		}
		g, err := parseGRPCAddr(s)
		if err == nil && g == "" {
			t.Errorf("parseGRPCAddr(%q): no address and no error", s)
		}
		if err != nil && strings.Contains(s, "@") && strings.Contains(err.Error(), pw) && !strings.Contains(s[strings.LastIndexByte(s, '@'):], pw) {
			t.Errorf("parseGRPCAddr(%q): the error echoes the password: %v", s, err)
		}
		_, _, _ = splitMethod(s)
	})
}
