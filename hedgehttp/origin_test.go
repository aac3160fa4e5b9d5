package hedgehttp

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseReplica(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the normal form; "" means rejected
		err  string // a substring of the error
	}{
		{"http://a.example", "http://a.example", ""},
		{"HTTP://A.Example.:0080/", "http://a.example", ""},
		{"https://a.example:443", "https://a.example", ""},
		{"https://a.example:80", "https://a.example:80", ""},
		{"http://a:", "http://a", ""},
		{"http://[::1]:80", "http://[::1]", ""},
		{"http://[0:0::1]:8080", "http://[::1]:8080", ""},
		{"http://[::FFFF:127.0.0.1]", "http://127.0.0.1", ""},
		{"http://[fe80::1%25en0]:8080", "http://[fe80::1%25en0]:8080", ""},
		{"http://svc_name:9000", "http://svc_name:9000", ""},
		{"", "", "empty"},
		{"a.example", "", "no scheme: write http://a.example"},
		{"a.example:80", "", "no scheme"},
		{"[::1]:80", "", "no scheme"},
		{"ftp://a", "", `scheme "ftp"`},
		{"http://user:pass@a", "", "user information"},
		{"http://@a", "", "user information"},
		{"http://a/p", "", "only scheme://host[:port]"},
		{"http://a?", "", "only scheme://host[:port]"},
		{"http://a#", "", "only scheme://host[:port]"},
		{"http://a:99999", "", "1 to 65535"},
		{"http://a:0", "", "1 to 65535"},
		{"http://.", "", "no host"},
		{"http://", "", "no host"},
		{"http://bücher.example", "", "not ASCII"},
		{"http://a!b", "", "neither a host name nor an IP address"},
		{"http://[fe80::1%25a!b]", "", "IPv6 zone"},
	} {
		o, err := parseReplica(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("parseReplica(%q) = %v, want an error saying %q", tc.in, o, tc.err)
		case tc.want == "" && !strings.Contains(err.Error(), tc.err):
			t.Errorf("parseReplica(%q): %v, want it to say %q", tc.in, err, tc.err)
		case tc.want != "" && err != nil:
			t.Errorf("parseReplica(%q): %v", tc.in, err)
		case tc.want != "" && o.String() != tc.want:
			t.Errorf("parseReplica(%q) = %v, want %v", tc.in, o, tc.want)
		}
	}
}

// A request URL belongs to an origin however its scheme, host and port
// are spelled; user information does not change it.
func TestOriginOf(t *testing.T) {
	a, err := parseReplica("http://a.example:8080")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		same bool
	}{
		{"http://a.example:8080/x?y", true},
		{"HTTP://A.EXAMPLE.:08080/x", true},
		{"http://u:p@a.example:8080/", true},
		{"https://a.example:8080/", false},
		{"http://a.example/", false},
		{"http://b.example:8080/", false},
		{"http://a.example.evil:8080/", false},
		{"ws://a.example:8080/", false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := originOf(u)
		if got := ok && o == a; got != tc.same {
			t.Errorf("originOf(%q) = %v, %v: same as %v is %v, want %v", tc.url, o, ok, a, got, tc.same)
		}
	}
}

// parseReplica accepts exactly scheme://host[:port][/], with scheme http
// or https in any case, and returns it in a normal form that parses to
// itself and names the origin the input names.
func FuzzParseReplica(f *testing.F) {
	f.Add("http://replica-a.example:8443")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseReplica(s)
		if err != nil {
			if o != (origin{}) {
				t.Errorf("parseReplica(%q) returned %#v with its error", s, o)
			}
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("parseReplica(%q): the error %q does not quote the input", s, err)
			}
			return
		}

		// Normal form.
		if o.scheme != "http" && o.scheme != "https" {
			t.Fatalf("parseReplica(%q): scheme %q", s, o.scheme)
		}
		if n, err := strconv.Atoi(o.port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != o.port {
			t.Fatalf("parseReplica(%q): port %q", s, o.port)
		}
		if ip, err := netip.ParseAddr(o.host); err == nil {
			if ip.Is4In6() || ip.String() != o.host {
				t.Fatalf("parseReplica(%q): IP host %q not in normal form", s, o.host)
			}
		} else if o.host == "" || o.host != strings.ToLower(o.host) || strings.HasSuffix(o.host, ".") || !isASCII(o.host) {
			t.Fatalf("parseReplica(%q): host %q not in normal form", s, o.host)
		}
		if h, p, err := net.SplitHostPort(o.backend()); err != nil || h != o.host || p != o.port {
			t.Fatalf("parseReplica(%q): backend %q does not split into %q and %q", s, o.backend(), o.host, o.port)
		}

		// The normal form round-trips.
		if o2, err := parseReplica(o.String()); err != nil || o2 != o {
			t.Fatalf("parseReplica(%q) = %#v, whose String %q parses to %#v, %v", s, o, o.String(), o2, err)
		}
		if u, err := url.Parse(o.String()); err != nil || u.Host != o.hostport() {
			t.Fatalf("parseReplica(%q): String %q has host %q, want %q (%v)", s, o.String(), u.Host, o.hostport(), err)
		}

		// It names what the input names, and the input names nothing
		// else.
		lower := strings.ToLower(s)
		if !strings.HasPrefix(lower, o.scheme+"://") {
			t.Fatalf("parseReplica(%q) accepted a scheme other than http:// or https://", s)
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("parseReplica(%q) accepted what url.Parse rejects: %v", s, err)
		}
		if u.User != nil || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#") {
			t.Fatalf("parseReplica(%q) accepted more than scheme://host[:port]", s)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || strconv.Itoa(n) != o.port {
				t.Fatalf("parseReplica(%q): port %q, the input says %q", s, o.port, p)
			}
		} else if o.port != map[string]string{"http": "80", "https": "443"}[o.scheme] {
			t.Fatalf("parseReplica(%q): port %q, want the default of %s", s, o.port, o.scheme)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if ip.Unmap().String() != o.host {
				t.Fatalf("parseReplica(%q): host %q, the input says %v", s, o.host, ip)
			}
		} else if !strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), o.host) {
			t.Fatalf("parseReplica(%q): host %q, the input says %q", s, o.host, u.Hostname())
		}
		if got, ok := originOf(u); !ok || got != o {
			t.Fatalf("parseReplica(%q) = %#v, but a request to it addresses %#v, %v", s, o, got, ok)
		}

		// Other spellings of the same origin parse to the same origin.
		if !strings.HasSuffix(s, "/") {
			if o2, err := parseReplica(s + "/"); err != nil || o2 != o {
				t.Fatalf("parseReplica(%q) = %#v, with a trailing slash %#v, %v", s, o, o2, err)
			}
		}
		if !strings.Contains(s, "%") {
			if o2, err := parseReplica(strings.ToUpper(s)); err != nil || o2 != o {
				t.Fatalf("parseReplica(%q) = %#v, in upper case %#v, %v", s, o, o2, err)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
