package hedgehttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// bothArrive returns a handler for two servers that receive one copy each
// at once (a zero delay sends both at the start): each records its copy
// and answers only when both have arrived, so that each server sees its
// copy whichever wins.
func bothArrive() handler {
	var (
		mu sync.Mutex
		n  int
	)
	arrived := make(chan struct{})
	return func(s *server, w http.ResponseWriter, r *http.Request) {
		c := s.rec.record(r)
		mu.Lock()
		if n++; n == 2 {
			close(arrived)
		}
		mu.Unlock()
		select {
		case <-arrived:
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
		fmt.Fprintf(w, "copy %d", c.attempt)
	}
}

// With the default CredentialScope, OneService, a request addressed to the
// service reaches every replica with all its headers, credentials
// included, whatever replica it addressed and however its header names
// are written; its path and query are kept and its Host follows the
// replica.
func TestCredentialsTravelWithinOneService(t *testing.T) {
	for _, tc := range []struct {
		name     string
		addressA bool // address replica a; otherwise the service URL
	}{
		{"addressed to a replica", true},
		{"addressed to a service URL", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bothArrive()
			a, b := newServer(t, h), newServer(t, h)
			url := "http://service.invalid/items/7?x=1"
			if tc.addressA {
				url = a.URL + "/items/7?x=1"
			}
			hg := newHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 2, NoBudget: true})
			tr := newTransport(t, nil, hg, hedgehttp.Config{
				Replicas:    []string{a.URL, b.URL},
				ServiceURLs: []string{"http://SERVICE.invalid:80/"}, // any spelling of the origin
			})
			req := newRequest(t, "GET", url, nil)
			req.Header.Set("Authorization", "Bearer secret")
			req.Header["cookie"] = []string{"session=1"} // sent as written
			req.Header.Set("X-Api-Key", "k")
			before := req.Header.Clone()
			readAll(t, roundTrip(t, tr, req))

			for _, srv := range []struct {
				name string
				s    *server
			}{{"a", a}, {"b", b}} {
				copies := srv.s.rec.all()
				if len(copies) != 1 {
					t.Fatalf("server %s saw %d copies, want 1", srv.name, len(copies))
				}
				c := copies[0]
				if c.uri != "/items/7?x=1" {
					t.Errorf("server %s saw %q", srv.name, c.uri)
				}
				if c.host != strings.TrimPrefix(srv.s.URL, "http://") {
					t.Errorf("server %s saw Host %q", srv.name, c.host)
				}
				for k, v := range map[string]string{"Authorization": "Bearer secret", "Cookie": "session=1", "X-Api-Key": "k"} {
					if got := c.header.Get(k); got != v {
						t.Errorf("server %s (copy %d): %s = %q, want %q", srv.name, c.attempt, k, got, v)
					}
				}
			}
			if st := tr.Stats(); st != (hedgehttp.Stats{}) {
				t.Errorf("Stats = %+v, want zero", st)
			}
			if !reflect.DeepEqual(req.Header, before) || req.URL.String() != url {
				t.Errorf("the caller's request was modified")
			}
		})
	}
}

// With CredentialScope PerOrigin, a request addressed to the service that
// carries credentials is refused, whatever the case of the header's name,
// with an error matching ErrCredentialsNotShared: nothing is sent, nothing
// is sent stripped. A request without credentials is hedged across the
// replicas.
func TestPerOriginRefusesCredentials(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string]string // set as written, not canonicalised
		user   bool              // user information in the URL
		refuse bool
	}{
		{"Authorization", map[string]string{"Authorization": "Bearer SECRET"}, false, true},
		{"authorization", map[string]string{"authorization": "Bearer SECRET"}, false, true},
		{"cookie", map[string]string{"cookie": "session=1"}, false, true},
		{"COOKIE2", map[string]string{"COOKIE2": "v=1"}, false, true},
		{"proxy-authorization", map[string]string{"proxy-authorization": "Basic cHJveHk="}, false, true},
		{"www-authenticate", map[string]string{"www-authenticate": "Basic"}, false, true},
		{"proxy-authenticate", map[string]string{"Proxy-authenticate": "Basic"}, false, true},
		{"declared sensitive", map[string]string{"x-api-key": "k"}, false, true},
		{"user information", nil, true, true},
		{"no credentials", map[string]string{"X-Other": "kept"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bothArrive()
			a, b := newServer(t, h), newServer(t, h)
			hg := newHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 2, NoBudget: true})
			tr := newTransport(t, nil, hg, hedgehttp.Config{
				Replicas:         []string{a.URL, b.URL},
				CredentialScope:  hedgehttp.PerOrigin,
				SensitiveHeaders: []string{"X-API-KEY"},
			})
			u, err := url.Parse(a.URL + "/items/7")
			if err != nil {
				t.Fatal(err)
			}
			if tc.user {
				u.User = url.UserPassword("user", "pass")
			}
			body := newCloseTracker(strings.NewReader("payload"))
			req := newRequest(t, "GET", u.String(), body)
			for k, v := range tc.header {
				req.Header[k] = []string{v}
			}
			// Through an http.Client, as a caller would: the error comes
			// wrapped in a *url.Error.
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if !tc.refuse {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				readAll(t, resp)
				for _, s := range []*server{a, b} {
					if copies := s.rec.all(); len(copies) != 1 || copies[0].header.Get("X-Other") != "kept" {
						t.Errorf("a server saw %+v, want one copy with X-Other", copies)
					}
				}
				if st := tr.Stats(); st.CredentialsRefused != 0 {
					t.Errorf("Stats = %+v, want nothing refused", st)
				}
				return
			}
			if !errors.Is(err, hedgehttp.ErrCredentialsNotShared) {
				t.Fatalf("Do: %v, want ErrCredentialsNotShared", err)
			}
			if resp != nil {
				t.Errorf("a response came with the error")
			}
			for _, want := range []string{"PerOrigin", "OneService"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q shows a credential", err)
			}
			if n := len(a.rec.all()) + len(b.rec.all()); n != 0 {
				t.Errorf("the servers saw %d copies, want none", n)
			}
			if st := tr.Stats(); st.CredentialsRefused != 1 {
				t.Errorf("Stats = %+v, want one request refused", st)
			}
			if st := hg.OpStats("GET"); st.Requests != 0 {
				t.Errorf("the Hedger saw %d requests, want none", st.Requests)
			}
			body.waitClosed(t)
		})
	}
}

// With Replicas, a request addressed to an origin outside the service,
// here the target of a redirect, goes there as it is, once, through the
// base transport: the other host sees it, the replicas never do.
func TestOtherOriginPassesThrough(t *testing.T) {
	other := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.rec.record(r)
		fmt.Fprint(w, "elsewhere")
	})
	redirect := func(s *server, w http.ResponseWriter, r *http.Request) {
		s.rec.record(r)
		http.Redirect(w, r, other.URL+"/elsewhere?from=replica", http.StatusFound)
	}
	a, b := newServer(t, redirect), newServer(t, redirect)
	// The delay never passes: each request to the service is one copy.
	hg := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 2})
	tr := newTransport(t, nil, hg, hedgehttp.Config{Replicas: []string{a.URL, b.URL}})
	client := &http.Client{Transport: tr}

	resp, err := client.Get(a.URL + "/start")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if body := readAll(t, resp); body != "elsewhere" {
		t.Fatalf("body %q, want the other host's", body)
	}
	got := other.rec.all()
	if len(got) != 1 || got[0].uri != "/elsewhere?from=replica" || got[0].attemptHdr != nil {
		t.Errorf("the other host saw %+v, want one unmarked GET /elsewhere?from=replica", got)
	}
	for _, c := range append(a.rec.all(), b.rec.all()...) {
		if c.uri != "/start" {
			t.Errorf("a replica saw %q", c.uri)
		}
	}
	if n := len(a.rec.all()) + len(b.rec.all()); n != 1 {
		t.Errorf("the replicas saw %d requests, want 1", n)
	}
	if st := tr.Stats(); st.OtherOrigins != 1 {
		t.Errorf("Stats = %+v, want one request to another origin", st)
	}
	if st := hg.OpStats("GET"); st.Requests != 1 {
		t.Errorf("the Hedger saw %d requests, want the one to the service", st.Requests)
	}
}
