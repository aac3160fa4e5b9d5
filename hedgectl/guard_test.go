package hedgectl_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgectl"
)

// TestRefusesWebPagesAndProxies: a loopback client is served only if the
// request cannot have come from a web page on another site (a form post,
// a page on another origin, a page whose name was rebound to 127.0.0.1)
// or through a proxy (forwarding headers). Refusals change nothing.
func TestRefusesWebPagesAndProxies(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const off = `{"mode":"off"}`
	for _, tc := range []struct {
		name   string
		method string
		body   string
		edit   func(r *http.Request)
		code   int
		want   error
		via    func(http.Handler) http.Handler // middleware in front, or nil
	}{
		{"cross-site form post", http.MethodPost, "mode=off", func(r *http.Request) {
			r.URL.RawQuery = "mode=off"
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", "http://evil.example")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		}, http.StatusForbidden, hedgectl.ErrCrossSite, nil},
		{"form post, no browser headers", http.MethodPost, "mode=off", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}, http.StatusUnsupportedMediaType, hedgectl.ErrNotJSON, nil},
		{"text/plain form shaped as JSON", http.MethodPost, `{"mode":"off","x":"="}`, func(r *http.Request) {
			r.Header.Set("Content-Type", "text/plain")
		}, http.StatusUnsupportedMediaType, hedgectl.ErrNotJSON, nil},
		{"no content type", http.MethodPost, off, func(r *http.Request) { r.Header.Del("Content-Type") }, http.StatusUnsupportedMediaType, hedgectl.ErrNotJSON, nil},
		{"another origin", http.MethodPost, off, func(r *http.Request) { r.Header.Set("Origin", "http://localhost:3000") }, http.StatusForbidden, hedgectl.ErrCrossSite, nil},
		{"opaque origin", http.MethodPost, off, func(r *http.Request) { r.Header.Set("Origin", "null") }, http.StatusForbidden, hedgectl.ErrCrossSite, nil},
		{"same-site page", http.MethodPost, off, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") }, http.StatusForbidden, hedgectl.ErrCrossSite, nil},
		{"cross-site read", http.MethodGet, "", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden, hedgectl.ErrCrossSite, nil},
		{"DNS rebinding", http.MethodPost, off, func(r *http.Request) {
			r.Host = "evil.example:8080"
			r.Header.Set("Origin", "http://evil.example:8080")
			r.Header.Set("Sec-Fetch-Site", "same-origin")
		}, http.StatusForbidden, hedgectl.ErrHost, nil},
		{"DNS rebinding, read", http.MethodGet, "", func(r *http.Request) { r.Host = "evil.example" }, http.StatusForbidden, hedgectl.ErrHost, nil},
		{"a subdomain of localhost", http.MethodGet, "", func(r *http.Request) { r.Host = "evil.localhost:8080" }, http.StatusForbidden, hedgectl.ErrHost, nil},
		{"no Host", http.MethodGet, "", func(r *http.Request) { r.Host = "" }, http.StatusForbidden, hedgectl.ErrHost, nil},
		{"X-Forwarded-For", http.MethodPost, off, func(r *http.Request) { r.Header.Set("X-Forwarded-For", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"Forwarded", http.MethodPost, off, func(r *http.Request) { r.Header.Set("Forwarded", "for=203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"X-Real-IP", http.MethodGet, "", func(r *http.Request) { r.Header.Set("X-Real-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"True-Client-IP", http.MethodPost, off, func(r *http.Request) { r.Header.Set("True-Client-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"CF-Connecting-IP", http.MethodPost, off, func(r *http.Request) { r.Header.Set("CF-Connecting-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"Fastly-Client-IP", http.MethodPost, off, func(r *http.Request) { r.Header.Set("Fastly-Client-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"X-Client-IP", http.MethodPost, off, func(r *http.Request) { r.Header.Set("X-Client-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"X-Cluster-Client-IP", http.MethodPost, off, func(r *http.Request) { r.Header.Set("X-Cluster-Client-IP", "203.0.113.7") }, http.StatusForbidden, hedgectl.ErrForwarded, nil},
		{"a remote client naming loopback in True-Client-IP, through RealIP", http.MethodPost, off, func(r *http.Request) {
			r.RemoteAddr = "203.0.113.7:40000"
			r.Header.Set("True-Client-IP", "127.0.0.1")
		}, http.StatusForbidden, hedgectl.ErrForwarded, realIP(false)},
		{"a remote client naming loopback in X-Real-IP, through RealIP", http.MethodPost, off, func(r *http.Request) {
			r.RemoteAddr = "203.0.113.7:40000"
			r.Header.Set("X-Real-IP", "::1")
		}, http.StatusForbidden, hedgectl.ErrForwarded, realIP(false)},
		{"a remote client naming loopback, through a RealIP that drops the header", http.MethodPost, off, func(r *http.Request) {
			r.RemoteAddr = "203.0.113.7:40000"
			r.Header.Set("True-Client-IP", "127.0.0.1")
		}, http.StatusForbidden, hedgectl.ErrNotLoopback, realIP(true)},
		{"a remote address without a port", http.MethodPost, off, func(r *http.Request) { r.RemoteAddr = "127.0.0.1" }, http.StatusForbidden, hedgectl.ErrNotLoopback, nil},
		{"a remote address of an IPv6 loopback without a port", http.MethodGet, "", func(r *http.Request) { r.RemoteAddr = "::1" }, http.StatusForbidden, hedgectl.ErrNotLoopback, nil},
		{"no remote address", http.MethodGet, "", func(r *http.Request) { r.RemoteAddr = "" }, http.StatusForbidden, hedgectl.ErrNotLoopback, nil},
	} {
		r := request(tc.method, "/mode", tc.body, local)
		if tc.method == http.MethodGet {
			r.URL.Path = "/"
		}
		tc.edit(r)
		var served http.Handler = ctl
		if tc.via != nil {
			served = tc.via(ctl)
		}
		w, _ := do(t, served, r)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), strings.TrimPrefix(tc.want.Error(), "hedgectl: ")) {
			t.Errorf("%s: %d %q, want %d: %v", tc.name, w.Code, w.Body, tc.code, tc.want)
		}
	}
	if h.Mode() != hedge.On {
		t.Fatalf("a refused request switched the mode to %v", h.Mode())
	}

	// What curl, a person's browser at the address, and a page of the
	// endpoint's own origin send is served.
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"curl to localhost", func(r *http.Request) { r.Host = "LocalHost:8080" }},
		{"curl to ::1", func(r *http.Request) { r.Host = "[::1]:8080" }},
		{"curl to 127.0.0.2, JSON with a charset", func(r *http.Request) {
			r.Host = "127.0.0.2"
			r.Header.Set("Content-Type", "application/json; charset=utf-8")
		}},
		{"a same-origin page", func(r *http.Request) {
			r.Header.Set("Origin", "http://127.0.0.1:8080")
			r.Header.Set("Sec-Fetch-Site", "same-origin")
		}},
		{"typed into the address bar", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "none") }},
	} {
		r := request(http.MethodPost, "/mode", `{"mode":"shadow"}`, local)
		tc.edit(r)
		if w, _ := do(t, ctl, r); w.Code != http.StatusOK {
			t.Errorf("%s: %d %q, want 200", tc.name, w.Code, w.Body)
		}
	}
	if h.Mode() != hedge.Shadow {
		t.Fatalf("mode %v, want shadow", h.Mode())
	}
}

// realIP is middleware in the manner of chi's RealIP: it sets the
// request's remote address to the client IP that True-Client-IP,
// X-Real-IP or X-Forwarded-For names, without a port. With drop it also
// deletes the header it read, as some such middleware does.
func realIP(drop bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, k := range []string{"True-Client-IP", "X-Real-IP", "X-Forwarded-For"} {
				if v := r.Header.Get(k); v != "" {
					ip, _, _ := strings.Cut(v, ",")
					r.RemoteAddr = strings.TrimSpace(ip)
					if drop {
						r.Header.Del(k)
					}
					break
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestBehindAProxy: forwarded requests are served only when Forwarded is
// set, which needs Authorize (the remote address is the proxy's), and
// the proxy's names must be listed in Hosts.
func TestBehindAProxy(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	if _, err := hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{Forwarded: true}); !errors.Is(err, hedgectl.ErrInvalidOptions) {
		t.Errorf("Forwarded without Authorize: %v, want ErrInvalidOptions", err)
	}
	for _, hosts := range [][]string{{""}, {"ops.example:443"}, {"ops example"}} {
		if _, err := hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{Hosts: hosts}); !errors.Is(err, hedgectl.ErrInvalidOptions) {
			t.Errorf("Hosts %q: %v, want ErrInvalidOptions", hosts, err)
		}
	}
	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{
		Forwarded: true,
		Hosts:     []string{"ops.example", "[2001:db8::2]"},
		Authorize: func(r *http.Request) error {
			if r.Header.Get("Authorization") != "Bearer ops" {
				return errors.New("hedgectl test: no token")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"ops.example", "[2001:db8::2]:8443", "127.0.0.1"} {
		r := request(http.MethodPost, "/mode", `{"mode":"off"}`, local)
		r.Host = host
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		r.Header.Set("Authorization", "Bearer ops")
		if w, _ := do(t, ctl, r); w.Code != http.StatusOK {
			t.Errorf("forwarded to %s with the token: %d %q, want 200", host, w.Code, w.Body)
		}
	}
	r := request(http.MethodPost, "/mode", `{"mode":"on"}`, local)
	r.Host = "other.example"
	r.Header.Set("Authorization", "Bearer ops")
	if w, _ := do(t, ctl, r); w.Code != http.StatusForbidden || h.Mode() != hedge.Off {
		t.Errorf("to a name not in Hosts: %d, mode %v; want 403", w.Code, h.Mode())
	}
}
