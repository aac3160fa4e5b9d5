package hedgehttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// origin is a scheme, host and port in one normal form, so that two ways
// of writing the same origin compare equal: the unit of trust for
// credentials, and (host and port alone) the identity of a backend.
type origin struct {
	scheme string // "http" or "https"
	host   string // a lower-case ASCII name without a trailing dot, or an IP address as netip writes it (IPv4-mapped IPv6 unmapped)
	port   string // decimal, 1 to 65535, never empty
}

// hostport returns o as the Host of a URL: the port is left out when it
// is the scheme's default, and an IPv6 address is bracketed.
func (o origin) hostport() string {
	if o.port == defaultPort(o.scheme) {
		if strings.Contains(o.host, ":") {
			return "[" + o.host + "]"
		}
		return o.host
	}
	return net.JoinHostPort(o.host, o.port)
}

// backend returns o's host and port: two origins with the same backend
// reach the same server, whatever their schemes.
func (o origin) backend() string { return net.JoinHostPort(o.host, o.port) }

// String returns o as a base URL, in normal form.
func (o origin) String() string {
	return (&url.URL{Scheme: o.scheme, Host: o.hostport()}).String()
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// parseReplica parses a base URL of Config.Replicas or Config.ServiceURLs:
// an http or https scheme, a host and an optional port, nothing else (a
// single trailing slash is allowed). The error says what is wrong and
// what to write instead.
func parseReplica(s string) (origin, error) {
	if s == "" {
		return origin{}, errors.New(`"" is empty: write a base URL such as https://replica-a.example:8443`)
	}
	if !strings.Contains(s, "://") {
		return origin{}, fmt.Errorf("%q has no scheme: write http://%s or https://%s", s, s, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return origin{}, fmt.Errorf("%q is not a URL: %w; write a base URL such as https://replica-a.example:8443", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return origin{}, fmt.Errorf("%q has scheme %q: use http:// or https:// followed by the replica's host[:port]", s, u.Scheme)
	}
	if u.User != nil {
		return origin{}, fmt.Errorf("%q has user information: a base URL names a server, not an account; give only scheme://host[:port] and put credentials on the requests", s)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return origin{}, fmt.Errorf("%q has more than a scheme and a host: give only scheme://host[:port]; the request's own path and query are kept", s)
	}
	o, err := makeOrigin(scheme, u.Hostname(), u.Port())
	if err != nil {
		return origin{}, fmt.Errorf("%q %w", s, err)
	}
	return o, nil
}

// originOf returns the origin a request URL addresses, and false if it
// addresses none that a base URL could name.
func originOf(u *url.URL) (origin, bool) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return origin{}, false
	}
	o, err := makeOrigin(scheme, u.Hostname(), u.Port())
	return o, err == nil
}

// makeOrigin puts scheme (lower-case, http or https), hostname and port
// (empty means the scheme's default) in normal form. Its errors complete
// a sentence whose subject is the URL.
func makeOrigin(scheme, hostname, port string) (origin, error) {
	o := origin{scheme: scheme, port: defaultPort(scheme)}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return origin{}, fmt.Errorf("has port %q: use a port from 1 to 65535, or none for the scheme's default", port)
		}
		o.port = port
		if port[0] == '0' {
			o.port = strconv.Itoa(n)
		}
	}
	if hostname == "" {
		return origin{}, errors.New("has no host: write scheme://host[:port]")
	}
	if mayBeIP(hostname) {
		if ip, err := netip.ParseAddr(hostname); err == nil {
			if z := ip.Zone(); z != "" && !validName(z) {
				return origin{}, fmt.Errorf("has IPv6 zone %q: write the name or number of a network interface, such as %%25eth0", z)
			}
			o.host = ip.Unmap().String()
			return o, nil
		}
	}
	name := strings.TrimSuffix(hostname, ".") // "a.example." is "a.example"
	if name == "" {
		return origin{}, errors.New("has no host: write scheme://host[:port]")
	}
	if !validName(name) {
		if strings.IndexFunc(name, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 {
			return origin{}, fmt.Errorf("has host %q, which is not ASCII: write its ASCII form (xn--...), as the server's certificate and DNS name it", hostname)
		}
		return origin{}, fmt.Errorf("has host %q, which is neither a host name nor an IP address: write letters, digits, '-', '.' and '_' only, or a bracketed IPv6 address", hostname)
	}
	o.host = strings.ToLower(name)
	return o, nil
}

// validName reports whether s is made of ASCII letters, digits, '-', '.'
// and '_' only: a host name, or an IPv6 zone.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// mayBeIP reports whether netip.ParseAddr might accept s: an IPv6
// address has a colon, an IPv4 address only digits and dots. It spares
// host names the cost of a parse error on every request.
func mayBeIP(s string) bool {
	if strings.Contains(s, ":") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}

// builtinCredentialHeaders are the request headers that carry credentials:
// those http.Client drops on a redirect to another host.
var builtinCredentialHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Cookie2", "Www-Authenticate", "Proxy-Authenticate",
}

// credentials returns the credentials req carries, by the header names as
// written (sorted), plus "user information in the URL", or nil. Header
// names are compared case-insensitively: net/http sends a key of the
// Header map as it is written, "authorization" included.
func (t *Transport) credentials(req *http.Request) []string {
	var found []string
	for k, v := range req.Header {
		if len(v) == 0 {
			continue // nothing is sent
		}
		if slices.ContainsFunc(builtinCredentialHeaders, func(c string) bool { return strings.EqualFold(k, c) }) ||
			slices.ContainsFunc(t.sensitive, func(c string) bool { return strings.EqualFold(k, c) }) {
			found = append(found, k)
		}
	}
	slices.Sort(found)
	if req.URL.User != nil {
		found = append(found, "user information in the URL")
	}
	return found
}

// validHeaderName reports whether s is a header field name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
