package tied

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Handler serves claims at the claim path, and at both default paths
// when the claim path is one of them, so that peers posting claims to
// DefaultCancelPath (servers of earlier versions) are answered; other
// paths reach the application.
func TestClaimPaths(t *testing.T) {
	for _, c := range []struct {
		name      string
		cfg       Config
		served    []string
		notServed []string
	}{
		{"default", Config{}, []string{DefaultClaimPath, DefaultCancelPath}, []string{"/claim"}},
		{"ClaimPath default", Config{ClaimPath: DefaultClaimPath}, []string{DefaultClaimPath, DefaultCancelPath}, nil},
		{"ClaimPath the cancel path", Config{ClaimPath: DefaultCancelPath}, []string{DefaultClaimPath, DefaultCancelPath}, nil},
		{"CancelPath the cancel path", Config{CancelPath: DefaultCancelPath}, []string{DefaultClaimPath, DefaultCancelPath}, nil},
		{"ClaimPath custom", Config{ClaimPath: "/svc/claim"}, []string{"/svc/claim"}, []string{DefaultClaimPath, DefaultCancelPath}},
		{"CancelPath custom", Config{CancelPath: "/old"}, []string{"/old"}, []string{DefaultClaimPath, DefaultCancelPath}},
		{"both, the same", Config{ClaimPath: "/p", CancelPath: "/p"}, []string{"/p"}, []string{DefaultClaimPath}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Workers, cfg.Secret = 1, testSecret
			s, err := NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ap := newApp()
			ts := httptest.NewServer(s.Handler(ap.handler(0)))
			defer within(t, "the server at "+ts.URL, func() {
				ts.Close()
				s.Close()
			})
			client := newClient(t)
			post := func(path string) (int, string) {
				t.Helper()
				msg := Claim{ID: NewID(), Ticket: 1, Sent: time.Now()}.Sign(testSecret)
				resp, err := client.Post(ts.URL+path, "text/plain", strings.NewReader(msg))
				if err != nil {
					timedOut(err)
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, p := range c.served {
				if code, body := post(p); code != 200 || body != VerdictGo.String() {
					t.Errorf("claim at %s: %d %q, want 200 go", p, code, body)
				}
			}
			for _, p := range c.notServed {
				if code, body := post(p); code != 200 || body != "@0" {
					t.Errorf("POST to %s: %d %q, want the application's answer", p, code, body)
				}
			}
			st := s.Stats()
			if st.ClaimsReceived != int64(len(c.served)) || st.Started != int64(len(c.notServed)) {
				t.Errorf("%+v, want %d claims received, %d requests started", st, len(c.served), len(c.notServed))
			}
		})
	}
}

// A server without a Sender of its own, and a default HTTPSender, post
// claims to DefaultClaimPath on the peer; Config.ClaimPath and its
// earlier name CancelPath move them. A peer that does not answer 200
// fails the claim with ErrClaimStatus, which its earlier name
// ErrCancelStatus matches.
func TestClaimSentToClaimPath(t *testing.T) {
	paths := make(chan string, 1)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.Method + " " + r.URL.Path
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, VerdictGo.String())
	}))
	defer peer.Close()
	want := func(path string) {
		t.Helper()
		select {
		case got := <-paths:
			if got != "POST "+path {
				t.Errorf("claim sent as %s, want POST %s", got, path)
			}
		default:
			t.Errorf("no claim reached the peer, want POST %s", path)
		}
	}

	for _, c := range []struct {
		name string
		cfg  Config
		path string
	}{
		{"default", Config{}, DefaultClaimPath},
		{"ClaimPath", Config{ClaimPath: "/new"}, "/new"},
		{"CancelPath", Config{CancelPath: DefaultCancelPath}, DefaultCancelPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Workers, cfg.Secret, cfg.Peers, cfg.ClaimTimeout = 1, testSecret, []string{peer.URL}, claimTimeout
			s, err := NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s.Handler(newApp().handler(0)))
			defer within(t, "the server at "+ts.URL, func() {
				ts.Close()
				s.Close()
			})
			if r := recv(t, send(context.Background(), newClient(t), ts.URL, "tied", NewID(), peer.URL)); r.code != 200 {
				t.Fatalf("tied copy: %+v", r)
			}
			want(c.path) // the claim was answered before the copy started
			if st := s.Stats(); st.ClaimsWon != 1 {
				t.Errorf("%+v, want its claim won", st)
			}
		})
	}

	sender := NewHTTPSender(nil, "")
	defer sender.CloseIdleConnections()
	msg := Claim{ID: NewID(), Sent: time.Now()}.Sign(testSecret)
	if answer, err := sender.SendClaim(bounded(t), peer.URL, msg); err != nil || answer != VerdictGo.String() {
		t.Errorf("default HTTPSender: %q, %v", answer, err)
	}
	want(DefaultClaimPath)

	missing := NewHTTPSender(nil, "/missing")
	defer missing.CloseIdleConnections()
	_, err := missing.SendClaim(bounded(t), peer.URL, msg)
	if !errors.Is(err, ErrClaimStatus) || !errors.Is(err, ErrCancelStatus) {
		t.Errorf("claim answered 404: %v, want ErrClaimStatus (and ErrCancelStatus)", err)
	}
	want("/missing")
}

// ClaimPath and its earlier name CancelPath may both be set only to the
// same path; a path that does not start with a slash is refused under
// the name it was set by.
func TestClaimPathValidates(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want []string // in the error; none: valid
	}{
		{Config{ClaimPath: "/a", CancelPath: "/b"}, []string{`ClaimPath "/a"`, `CancelPath "/b"`, "differ"}},
		{Config{ClaimPath: "a"}, []string{`ClaimPath "a" does not start with a slash`}},
		{Config{CancelPath: "a"}, []string{`CancelPath "a" does not start with a slash`}},
		{Config{ClaimPath: "/a", CancelPath: "/a"}, nil},
	} {
		cfg := c.cfg
		cfg.Workers = 1
		s, err := NewServer(cfg)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%+v: %v", c.cfg, err)
			} else {
				s.Close()
			}
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c.cfg, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %s", c.cfg, err, w)
			}
		}
	}
}

// ServesClaims is what Handler takes for a claim: the claim path, and
// both default paths when the claim path is one of them.
func TestServesClaims(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		yes  []string
		no   []string
	}{
		{"default", Config{}, []string{DefaultClaimPath, DefaultCancelPath}, []string{"/", "/.tied", "/.tied/claim/", "/work"}},
		{"CancelPath default", Config{CancelPath: DefaultCancelPath}, []string{DefaultClaimPath, DefaultCancelPath}, []string{"/work"}},
		{"custom", Config{ClaimPath: "/svc/claim"}, []string{"/svc/claim"}, []string{DefaultClaimPath, DefaultCancelPath}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Workers, cfg.Secret = 1, testSecret
			s, err := NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, p := range c.yes {
				if !s.ServesClaims(p) {
					t.Errorf("ServesClaims(%q) = false, want true", p)
				}
			}
			for _, p := range c.no {
				if s.ServesClaims(p) {
					t.Errorf("ServesClaims(%q) = true, want false", p)
				}
			}
		})
	}
}
