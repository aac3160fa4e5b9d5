package hedgehttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// hedgeDelay is the delay of tests in which a hedge should fire. Ordering
// never depends on it: a primary that must lose stalls until cancelled.
const hedgeDelay = hedge.Fixed(time.Millisecond)

// primaryStallsHedgeAnswers is the usual handler: the primary records
// itself and stalls until its client gives up; a hedge answers once the
// primary has arrived, with "copy N" and the body it received.
func primaryStallsHedgeAnswers(s *server, w http.ResponseWriter, r *http.Request) {
	c := s.rec.record(r)
	if c.attempt == 0 {
		stall(s, r)
		return
	}
	if awaitPrimary(s, r) {
		fmt.Fprintf(w, "copy %d: %s", c.attempt, c.body)
	}
}

func TestNewValidates(t *testing.T) {
	h := newHedger(t, hedge.Config{})
	h2 := newHedger(t, hedge.Config{Replicas: 2})
	for _, tc := range []struct {
		name string
		h    *hedge.Hedger
		cfg  hedgehttp.Config
		want []string // substrings of the error; none means valid
	}{
		{"zero", h, hedgehttp.Config{}, nil},
		{"nil hedger", nil, hedgehttp.Config{}, []string{"hedge.New"}},
		{"one replica", h, hedgehttp.Config{Replicas: []string{"http://a"}}, []string{"at least two"}},
		{"bad scheme", h, hedgehttp.Config{Replicas: []string{"ftp://a", "http://b"}}, []string{"Replicas[0]", "http:// or https://"}},
		{"no scheme", h2, hedgehttp.Config{Replicas: []string{"a:80", "b"}}, []string{"Replicas[0]", "Replicas[1]", "no scheme", "http://a:80", "https://b"}},
		{"no host", h, hedgehttp.Config{Replicas: []string{"http://a", "http://"}}, []string{"Replicas[1]", "no host"}},
		{"path", h, hedgehttp.Config{Replicas: []string{"http://a/api", "http://b?x=1"}}, []string{"Replicas[0]", "Replicas[1]", "only scheme://host[:port]"}},
		{"empty query and fragment", h2, hedgehttp.Config{Replicas: []string{"http://a?", "http://b#"}}, []string{"Replicas[0]", "Replicas[1]", "only scheme://host[:port]"}},
		{"user info", h2, hedgehttp.Config{Replicas: []string{"http://user:pass@a", "http://b"}}, []string{"Replicas[0]", "user information"}},
		{"port out of range", h2, hedgehttp.Config{Replicas: []string{"http://a:99999", "http://b:0"}}, []string{"Replicas[0]", "Replicas[1]", "1 to 65535"}},
		{"not ASCII", h2, hedgehttp.Config{Replicas: []string{"http://bücher.example", "http://b"}}, []string{"Replicas[0]", "xn--"}},
		{"duplicate", h, hedgehttp.Config{Replicas: []string{"http://a", "HTTP://A:80"}}, []string{"Replicas[1]", "repeats"}},
		{"duplicate, trailing dot", h2, hedgehttp.Config{Replicas: []string{"http://a.example", "http://A.example."}}, []string{"Replicas[1]", "repeats the backend of Replicas[0]"}},
		{"duplicate, leading zero", h2, hedgehttp.Config{Replicas: []string{"http://a:8080", "http://a:08080"}}, []string{"Replicas[1]", "repeats"}},
		{"duplicate, IPv6 spelling", h2, hedgehttp.Config{Replicas: []string{"http://[::1]:80", "http://[0:0::1]"}}, []string{"Replicas[1]", "repeats"}},
		{"duplicate, IPv4-mapped", h2, hedgehttp.Config{Replicas: []string{"http://127.0.0.1:8080", "http://[::ffff:127.0.0.1]:8080"}}, []string{"Replicas[1]", "repeats"}},
		{"duplicate, other scheme", h2, hedgehttp.Config{Replicas: []string{"https://a", "http://a:443"}}, []string{"Replicas[1]", "host and port a:443"}},
		{"valid replicas", h2, hedgehttp.Config{Replicas: []string{"http://a:8080", "https://b/"}}, nil},
		{"valid, every option", h2, hedgehttp.Config{Replicas: []string{"http://a:8080", "http://a:8081"}, ServiceURLs: []string{"https://api.example"}, CredentialScope: hedgehttp.PerOrigin, SensitiveHeaders: []string{"X-Api-Key"}}, nil},
		{"service URLs alone", h, hedgehttp.Config{ServiceURLs: []string{"http://api"}}, []string{"ServiceURLs is set", "Replicas is empty"}},
		{"service URL is a replica", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}, ServiceURLs: []string{"http://A:80"}}, []string{"ServiceURLs[0]", "is one of the Replicas"}},
		{"service URL twice", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}, ServiceURLs: []string{"http://api", "http://api/"}}, []string{"ServiceURLs[1]", "repeats ServiceURLs[0]"}},
		{"bad service URL", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}, ServiceURLs: []string{"http://api/v1"}}, []string{"ServiceURLs[0]", "only scheme://host[:port]"}},
		{"per origin alone", h, hedgehttp.Config{CredentialScope: hedgehttp.PerOrigin}, []string{"PerOrigin", "Replicas is empty"}},
		{"unknown scope", h, hedgehttp.Config{CredentialScope: 7}, []string{"CredentialScope(7)", "hedgehttp.PerOrigin"}},
		{"sensitive headers, one service", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}, SensitiveHeaders: []string{"X-Api-Key"}}, []string{"SensitiveHeaders", "CredentialScope: hedgehttp.PerOrigin"}},
		{"bad sensitive header", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}, CredentialScope: hedgehttp.PerOrigin, SensitiveHeaders: []string{"X-Api-Key: v"}}, []string{"SensitiveHeaders[0]", "not a header name"}},
		{"hedger without replicas", h, hedgehttp.Config{Replicas: []string{"http://a", "http://b"}}, []string{"hedge.Config{Replicas: 2}"}},
		{"hedger with other replicas", h2, hedgehttp.Config{Replicas: []string{"http://a", "http://b", "http://c"}}, []string{"has 2 replicas", "hedge.Config{Replicas: 3}"}},
		{"hedger with replicas, no list", h2, hedgehttp.Config{}, []string{"Config.Replicas is empty"}},
		{"every mistake at once", h2, hedgehttp.Config{Replicas: []string{"http://a"}, ServiceURLs: []string{"ftp://x"}, CredentialScope: 9, SensitiveHeaders: []string{""}}, []string{"single entry", "ServiceURLs[0]", "CredentialScope(9)", "SensitiveHeaders[0]", "hedge.Config{Replicas: 1}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hedgehttp.New(nil, tc.h, tc.cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted an invalid Config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A slow GET is hedged; the hedge wins, is marked, and the primary is
// cancelled. The caller's request is left as it was.
func TestHedgeWins(t *testing.T) {
	s := newServer(t, primaryStallsHedgeAnswers)
	h := newHedger(t, hedge.Config{Delay: hedgeDelay})
	tr := newTransport(t, nil, h, hedgehttp.Config{})

	req := newRequest(t, "GET", s.URL+"/x", nil)
	req.Header.Set(hedgehttp.AttemptHeader, "7") // a stray mark must not reach the primary
	req.Header.Set("Authorization", "Bearer t")
	before := req.Header.Clone()
	resp := roundTrip(t, tr, req)
	if got := readAll(t, resp); got != "copy 1: " {
		t.Fatalf("body %q, want the hedge's", got)
	}
	copies := s.rec.byAttempt(t)
	if len(copies) != 2 {
		t.Fatalf("server saw %d copies, want 2", len(copies))
	}
	if hdr := copies[0].attemptHdr; hdr != nil {
		t.Errorf("primary carries %s: %q, want no header", hedgehttp.AttemptHeader, hdr)
	}
	if hdr := copies[1].attemptHdr; !slices.Equal(hdr, []string{"1"}) {
		t.Errorf("hedge carries %s: %q, want [1]", hedgehttp.AttemptHeader, hdr)
	}
	for i, c := range copies {
		if c.header.Get("Authorization") != "Bearer t" {
			t.Errorf("copy %d lost its credentials on the request's own host", i)
		}
	}
	if !reflect.DeepEqual(req.Header, before) || req.URL.String() != s.URL+"/x" || req.Context() != context.Background() {
		t.Errorf("the caller's request was modified: header %v, URL %v", req.Header, req.URL)
	}
	st := h.OpStats("GET")
	if st.Requests != 1 || st.Hedges != 1 || st.HedgeWins != 1 {
		t.Errorf("stats %+v, want one request won by its hedge", st)
	}
}

// With a delay that never passes, one copy is sent and it wins.
func TestPrimaryWins(t *testing.T) {
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.rec.record(r)
		io.WriteString(w, "primary")
	})
	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{})
	if got := readAll(t, roundTrip(t, tr, newRequest(t, "GET", s.URL, nil))); got != "primary" {
		t.Fatalf("body %q", got)
	}
	if n := len(s.rec.all()); n != 1 {
		t.Fatalf("server saw %d copies, want 1", n)
	}
	if st := h.OpStats("GET"); st.PrimaryWins != 1 || st.Hedges != 0 {
		t.Errorf("stats %+v, want one primary win", st)
	}
}

// Only safe methods are hedged by default; a write is hedged only with an
// Idempotency-Key header and HedgeKeyedWrites, and then every copy has the
// key. A request that may not be hedged is marked so for the Hedger, which
// counts it Unhedgeable and never arms a timer for it; that a slow one
// still goes once is TestSlowRequestInFakeTime's.
func TestWhichRequestsAreHedged(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method      string
		header      map[string]string
		keyedWrites bool
		ctxKey      string // attached with hedge.WithIdempotencyKey by an outer caller
		hedged      bool
	}{
		{"GET", "GET", nil, false, "", true},
		{"HEAD", "HEAD", nil, false, "", true},
		{"OPTIONS", "OPTIONS", nil, false, "", true},
		{"POST", "POST", nil, false, "", false},
		{"POST opt-in without key", "POST", nil, true, "", false},
		{"POST key without opt-in", "POST", map[string]string{"Idempotency-Key": "k1"}, false, "", false},
		{"POST key and opt-in", "POST", map[string]string{"Idempotency-Key": "k1"}, true, "", true},
		{"PUT X-Idempotency-Key and opt-in", "PUT", map[string]string{"X-Idempotency-Key": "k2"}, true, "", true},
		{"DELETE", "DELETE", nil, true, "", false},
		{"POST key only on the context", "POST", nil, true, "ctx-key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
				c := s.rec.record(r)
				if tc.hedged {
					// The primary stalls until the hedge wins; the
					// hedge answers once the primary has arrived.
					if c.attempt == 0 {
						stall(s, r)
						return
					}
					if !awaitPrimary(s, r) {
						return
					}
				}
				fmt.Fprintf(w, "copy %d", c.attempt)
			})
			h := newHedger(t, hedge.Config{Delay: hedgeDelay})
			tr := newTransport(t, nil, h, hedgehttp.Config{HedgeKeyedWrites: tc.keyedWrites})
			payload := "payload"
			var body io.Reader = strings.NewReader(payload)
			if tc.method == "HEAD" || tc.method == "OPTIONS" || tc.method == "DELETE" {
				payload, body = "", nil
			}
			req := newRequest(t, tc.method, s.URL, body)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.ctxKey != "" {
				req = req.WithContext(hedge.WithIdempotencyKey(context.Background(), tc.ctxKey))
			}
			resp := roundTrip(t, tr, req)
			readAll(t, resp)

			copies := s.rec.byAttempt(t)
			want := 1
			if tc.hedged {
				want = 2
			}
			if len(copies) != want {
				t.Fatalf("server saw %d copies, want %d", len(copies), want)
			}
			for i, c := range copies {
				if c.body != payload {
					t.Errorf("copy %d body %q, want %q", i, c.body, payload)
				}
				for k, v := range tc.header {
					if c.header.Get(k) != v {
						t.Errorf("copy %d has %s %q, want %q", i, k, c.header.Get(k), v)
					}
				}
			}
			st := h.OpStats(tc.method)
			if tc.hedged && (st.Hedges != 1 || st.Unhedgeable != 0) {
				t.Errorf("stats %+v, want one hedge", st)
			}
			if !tc.hedged && (st.Hedges != 0 || st.Unhedgeable != 1 || tr.Stats().WritesOnce != 1) {
				t.Errorf("stats %+v, transport %+v: want unhedgeable, no hedge, one write sent once", st, tr.Stats())
			}
		})
	}
}

// Every copy receives the same body, whether it is replayed with GetBody
// or from a buffer; a body that cannot be replayed is sent once, whole.
func TestBodyReplay(t *testing.T) {
	long := strings.Repeat("0123456789", 100) // 1,000 bytes
	for _, tc := range []struct {
		name    string
		body    string
		req     func(t *testing.T, url, body string) (*http.Request, *closeTracker)
		maxBuf  int64
		hedged  bool
		counted bool // in Stats.Unreplayable
	}{
		{"GetBody", long, getBodyRequest, 0, true, false},
		{"buffered, known length", long, trackedRequest(true), 0, true, false},
		{"buffered, unknown length", long, trackedRequest(false), 0, true, false},
		{"buffered, empty", "", trackedRequest(false), 0, true, false},
		{"buffered, exactly the limit", long, trackedRequest(false), int64(len(long)), true, false},
		{"GetBody ignores the limit", long, getBodyRequest, 10, true, false},
		{"over the limit, known length", long, trackedRequest(true), 999, false, true},
		{"over the limit, unknown length", long, trackedRequest(false), 999, false, true},
		{"buffering off", long, trackedRequest(false), -1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
				c := s.rec.record(r)
				if tc.hedged {
					// The primary stalls until the hedge wins; the
					// hedge answers once the primary has arrived.
					if c.attempt == 0 {
						stall(s, r)
						return
					}
					if !awaitPrimary(s, r) {
						return
					}
				}
				io.WriteString(w, c.body) // echo
			})
			h := newHedger(t, hedge.Config{Delay: hedgeDelay})
			tr := newTransport(t, nil, h, hedgehttp.Config{MaxBodyBuffer: tc.maxBuf})
			req, tracker := tc.req(t, s.URL, tc.body)
			resp := roundTrip(t, tr, req)
			if got := readAll(t, resp); got != tc.body {
				t.Errorf("echoed body has %d bytes, want %d", len(got), len(tc.body))
			}
			copies := s.rec.all()
			want := 1
			if tc.hedged {
				want = 2
			}
			if len(copies) != want {
				t.Fatalf("server saw %d copies, want %d", len(copies), want)
			}
			for _, c := range copies {
				if c.body != tc.body {
					t.Errorf("copy %d received %d bytes %.20q..., want %d bytes", c.attempt, len(c.body), c.body, len(tc.body))
				}
			}
			if got := tr.Stats().Unreplayable; got != map[bool]int64{false: 0, true: 1}[tc.counted] {
				t.Errorf("Stats.Unreplayable = %d", got)
			}
			if st := h.OpStats("GET"); tc.hedged != (st.Unhedgeable == 0) || tc.hedged != (st.Hedges == 1) {
				t.Errorf("stats %+v, want hedged: %v", st, tc.hedged)
			}
			if tracker != nil {
				tracker.waitClosed(t)
			}
		})
	}
}

func getBodyRequest(t *testing.T, url, body string) (*http.Request, *closeTracker) {
	req := newRequest(t, "GET", url, strings.NewReader(body))
	if req.GetBody == nil {
		t.Fatal("no GetBody")
	}
	return req, nil
}

// trackedRequest makes a GET whose body has no GetBody and records Close.
func trackedRequest(knownLength bool) func(t *testing.T, url, body string) (*http.Request, *closeTracker) {
	return func(t *testing.T, url, body string) (*http.Request, *closeTracker) {
		ct := newCloseTracker(struct{ io.Reader }{strings.NewReader(body)})
		req := newRequest(t, "GET", url, ct)
		if knownLength {
			req.ContentLength = int64(len(body))
		} else {
			req.ContentLength = -1
		}
		if req.GetBody != nil {
			t.Fatal("GetBody is set")
		}
		return req, ct
	}
}

// The winner's body streams to the end after the loser was cancelled:
// the hedge sends its first chunk, waits until the server has seen the
// primary's client give up, and only then sends the rest.
func TestWinnerBodyReadableAfterLoserCancelled(t *testing.T) {
	const size = 4 << 20
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 7)
	}
	primaryGone := make(chan struct{})
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		c := s.rec.record(r)
		if c.attempt == 0 {
			if stall(s, r) {
				close(primaryGone)
			}
			return
		}
		if !awaitPrimary(s, r) {
			return
		}
		w.Write(want[:64<<10])
		w.(http.Flusher).Flush()
		select {
		case <-primaryGone:
		case <-s.stop:
			return
		}
		for off := 64 << 10; off < size; off += 256 << 10 {
			w.Write(want[off:min(off+256<<10, size)])
			w.(http.Flusher).Flush()
		}
	})
	h := newHedger(t, hedge.Config{Delay: hedgeDelay})
	rec := &ctxRecorder{rt: &http.Transport{}}
	tr := newTransport(t, rec, h, hedgehttp.Config{HedgeTransport: rec})
	resp := roundTrip(t, tr, newRequest(t, "GET", s.URL, nil))
	// The loser was reaped before RoundTrip returned.
	if err := rec.ctx(0).Err(); err == nil {
		t.Fatal("RoundTrip returned before the primary was cancelled")
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the winner's body: %v after %d bytes", err, len(got))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the winner's body has %d bytes, want %d, equal: %v", len(got), size, bytes.Equal(got, want[:len(got)]))
	}
	select {
	case <-primaryGone:
	default:
		t.Fatal("the server never saw the primary cancelled")
	}
	resp.Body.Close()
	rec.rt.(*http.Transport).CloseIdleConnections()
}

// ctxRecorder passes requests to rt and keeps each copy's context, by
// attempt index.
type ctxRecorder struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	ctxs map[int]context.Context
}

func (c *ctxRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.ctxs == nil {
		c.ctxs = map[int]context.Context{}
	}
	c.ctxs[hedgehttp.AttemptIndex(req)] = req.Context()
	c.mu.Unlock()
	return c.rt.RoundTrip(req)
}

func (c *ctxRecorder) ctx(i int) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctxs[i]
}

func (c *ctxRecorder) CloseIdleConnections() {
	c.rt.(*http.Transport).CloseIdleConnections()
}

// The winner's context lives while its body is read and is released by
// Close, or by reading to EOF without Close.
func TestWinnerContextReleased(t *testing.T) {
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	})
	for _, byClose := range []bool{true, false} {
		h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
		rec := &ctxRecorder{rt: &http.Transport{}}
		tr := newTransport(t, rec, h, hedgehttp.Config{HedgeTransport: rec})
		resp := roundTrip(t, tr, newRequest(t, "GET", s.URL, nil))
		if err := rec.ctx(0).Err(); err != nil {
			t.Fatalf("the winner's context ended before its body was read: %v", err)
		}
		if byClose {
			resp.Body.Close()
		} else {
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "hello" {
				t.Fatalf("body %q, %v", b, err)
			}
		}
		if rec.ctx(0).Err() == nil {
			t.Errorf("close=%v: the winner's context is still alive", byClose)
		}
		tr.CloseIdleConnections()
	}
}

// No connection outlives its use: losers' connections are closed, late
// successes are discarded, and after CloseIdleConnections the server has
// no connection open.
func TestNoLeakedConnections(t *testing.T) {
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		c := s.rec.record(r)
		if c.attempt == 0 && r.URL.Path == "/stall" {
			stall(s, r)
			return
		}
		io.WriteString(w, strings.Repeat("x", 10000))
	})
	// A hedge wins every /stall request; at /race both copies go at once
	// and both may succeed, so the loser is cancelled or discarded.
	for _, tc := range []struct {
		path  string
		delay hedge.Fixed
	}{{"/stall", hedgeDelay}, {"/race", 0}} {
		h := newHedger(t, hedge.Config{Delay: tc.delay, NoBudget: true})
		tr := newTransport(t, nil, h, hedgehttp.Config{})
		for i := range 10 {
			resp := roundTrip(t, tr, newRequest(t, "GET", s.URL+tc.path, nil))
			if tc.path == "/stall" {
				// Only the winner's connection is still open: the
				// loser's was closed when it was cancelled (plus idle
				// ones from earlier rounds, closed below).
				tr.CloseIdleConnections()
				s.waitOpen(t, 1)
			}
			switch i % 3 {
			case 0:
				readAll(t, resp)
			case 1:
				io.ReadAll(resp.Body) // to EOF, never closed
			case 2:
				resp.Body.Close() // unread
			}
		}
		if st := h.OpStats("GET"); st.Hedges != 10 {
			t.Fatalf("%s: %d hedges, want 10", tc.path, st.Hedges)
		}
		tr.CloseIdleConnections()
		s.waitOpen(t, 0)
	}
}

// Status classification: 502, 503 and 504 send the next copy at once;
// pushback (429, or Retry-After) ends hedging and is returned; other
// statuses are final. Failed responses are returned when nothing better
// came. The copy sent after a failed primary is the request's only copy:
// it carries no Hedge-Attempt, so that a server serves it as a primary.
func TestStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		name       string
		primary    int
		retryAfter bool
		hedgeCode  int // the hedge's answer
		copies     int
		wantCode   int
		wantBody   string
		pushback   bool
		retryable  int64 // copies answered 502, 503 or 504 without Retry-After
	}{
		{"200 final", 200, false, 200, 1, 200, "copy 0", false, 0},
		{"404 final", 404, false, 200, 1, 404, "copy 0", false, 0},
		{"500 final", 500, false, 200, 1, 500, "copy 0", false, 0},
		{"502 retryable", 502, false, 200, 2, 200, "copy 1", false, 1},
		{"503 retryable", 503, false, 200, 2, 200, "copy 1", false, 1},
		{"504 retryable", 504, false, 200, 2, 200, "copy 1", false, 1},
		{"503 Retry-After", 503, true, 200, 1, 503, "copy 0", true, 0},
		{"500 Retry-After", 500, true, 200, 1, 500, "copy 0", true, 0},
		{"429", 429, false, 200, 1, 429, "copy 0", true, 0},
		{"429 Retry-After", 429, true, 200, 1, 429, "copy 0", true, 0},
		{"all 503", 503, false, 503, 2, 503, "copy 1", false, 2},
		{"503 then pushback", 503, false, 429, 2, 429, "copy 1", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var arrived atomic.Int64
			s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
				s.rec.record(r)
				// Copies go one after the other: the primary is the
				// first to arrive. The next carries no Hedge-Attempt.
				i := arrived.Add(1) - 1
				code := tc.primary
				if i > 0 {
					code = tc.hedgeCode
				} else if tc.retryAfter {
					w.Header().Set("Retry-After", "1")
				}
				w.WriteHeader(code)
				fmt.Fprintf(w, "copy %d", i)
			})
			// The delay never passes: only a failure can send a hedge.
			h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
			tr := newTransport(t, nil, h, hedgehttp.Config{})
			resp := roundTrip(t, tr, newRequest(t, "GET", s.URL, nil))
			if body := readAll(t, resp); resp.StatusCode != tc.wantCode || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if n := len(s.rec.all()); n != tc.copies {
				t.Errorf("server saw %d copies, want %d", n, tc.copies)
			}
			for _, c := range s.rec.all() {
				if c.attemptHdr != nil {
					t.Errorf("a copy carries Hedge-Attempt %q, sent when no other copy ran", c.attemptHdr)
				}
			}
			if got := tr.Stats().Pushbacks > 0; got != tc.pushback {
				t.Errorf("pushback counted: %v, want %v", got, tc.pushback)
			}
			if got := tr.Stats().RetryableStatus; got != tc.retryable {
				t.Errorf("Stats.RetryableStatus = %d, want %d", got, tc.retryable)
			}
			// Failed copies were drained: their connection went back to
			// the pool, so nothing is left open but idle connections.
			tr.CloseIdleConnections()
			s.waitOpen(t, 0)
		})
	}
}

// With one host, a hedge goes on a connection of its own: it does not
// queue behind the slow primary (HTTP/1.1 with one connection per host)
// nor share its HTTP/2 connection. The primary stalls until cancelled, so
// a hedge that queued behind it would never win and the test would fail.
func TestSingleHostHedgeOnOtherConnection(t *testing.T) {
	handler := func(s *server, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			s.rec.recordQuiet(r) // not the primary: a hedge must still wait for that
			return
		}
		primaryStallsHedgeAnswers(s, w, r)
	}
	t.Run("HTTP/1.1 one connection per host", func(t *testing.T) {
		s := newServer(t, handler)
		checkOtherConnection(t, s, &http.Transport{MaxConnsPerHost: 1}, 1)
	})
	t.Run("HTTP/2", func(t *testing.T) {
		s := newUnstartedServer(t, handler)
		s.EnableHTTP2 = true
		s.StartTLS()
		checkOtherConnection(t, s, s.Client().Transport.(*http.Transport), 2)
	})
}

func checkOtherConnection(t *testing.T, s *server, base *http.Transport, proto int) {
	// A warm keep-alive connection in the base pool, as in steady
	// traffic: the primary will reuse it.
	resp, err := base.RoundTrip(newRequest(t, "GET", s.URL+"/warm", nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	h := newHedger(t, hedge.Config{Delay: hedgeDelay})
	tr := newTransport(t, base, h, hedgehttp.Config{})
	if got := readAll(t, roundTrip(t, tr, newRequest(t, "GET", s.URL+"/slow", nil))); got != "copy 1: " {
		t.Fatalf("body %q, want the hedge's", got)
	}
	all := s.rec.all()
	if len(all) != 3 {
		t.Fatalf("server saw %d requests, want warm-up, primary and hedge", len(all))
	}
	var warm, primary, hedgeCopy seen
	for _, c := range all {
		switch {
		case c.uri == "/warm":
			warm = c
		case c.attempt == 0:
			primary = c
		default:
			hedgeCopy = c
		}
		if c.proto != proto {
			t.Errorf("%s over HTTP/%d, want HTTP/%d", c.uri, c.proto, proto)
		}
	}
	if primary.remote != warm.remote {
		t.Errorf("the primary used %s, not the warm connection %s", primary.remote, warm.remote)
	}
	if hedgeCopy.remote == "" || hedgeCopy.remote == primary.remote {
		t.Errorf("the hedge used connection %q, the primary %q: want another", hedgeCopy.remote, primary.remote)
	}
}

// The operation class is the method and the route template, from the
// context or Config.Route; never the raw path.
func TestOperationClasses(t *testing.T) {
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {})
	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{Route: func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/items/") {
			return "/items/{id}"
		}
		return ""
	}})
	for _, p := range []string{"/items/1", "/items/2", "/other/3"} {
		readAll(t, roundTrip(t, tr, newRequest(t, "GET", s.URL+p, nil)))
	}
	req := newRequest(t, "HEAD", s.URL+"/items/4", nil)
	readAll(t, roundTrip(t, tr, req.WithContext(hedgehttp.WithRoute(context.Background(), "/things/{id}"))))
	// A route that names the method already, as a net/http pattern does,
	// is taken as it is; one naming another method is a route like any.
	req = newRequest(t, "GET", s.URL+"/items/5", nil)
	readAll(t, roundTrip(t, tr, req.WithContext(hedgehttp.WithRoute(context.Background(), "GET /items/{id}"))))
	req = newRequest(t, "GET", s.URL+"/items/6", nil)
	readAll(t, roundTrip(t, tr, req.WithContext(hedgehttp.WithRoute(context.Background(), "GETX /y"))))
	var ops []string
	for _, st := range h.Stats() {
		ops = append(ops, fmt.Sprintf("%s=%d", st.Op, st.Requests))
	}
	if want := []string{"GET=1", "GET /items/{id}=3", "GET GETX /y=1", "HEAD /things/{id}=1"}; !slices.Equal(ops, want) {
		t.Errorf("operation classes %v, want %v", ops, want)
	}
}

// A protocol upgrade goes to the base transport untouched.
func TestUpgradeBypasses(t *testing.T) {
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) { s.rec.record(r) })
	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(0)})
	tr := newTransport(t, nil, h, hedgehttp.Config{})
	req := newRequest(t, "GET", s.URL, nil)
	req.Header.Set("Upgrade", "websocket")
	readAll(t, roundTrip(t, tr, req))
	if n := len(s.rec.all()); n != 1 || len(h.Stats()) != 0 {
		t.Errorf("server saw %d copies, Hedger saw %d classes; want 1 copy, no class", n, len(h.Stats()))
	}
}

func TestAttemptIndex(t *testing.T) {
	for _, tc := range []struct {
		hdr  []string
		want int
	}{{nil, 0}, {[]string{"1"}, 1}, {[]string{"3"}, 3}, {[]string{"x"}, 0}, {[]string{"-2"}, 0}} {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{}}
		if tc.hdr != nil {
			r.Header[hedgehttp.AttemptHeader] = tc.hdr
		}
		if got := hedgehttp.AttemptIndex(r); got != tc.want {
			t.Errorf("AttemptIndex(%q) = %d, want %d", tc.hdr, got, tc.want)
		}
	}
}

// A 503 whose body is too large to hold in memory is final: returned as
// is, streamed, with no further copy.
func TestLargeFailureBodyIsFinal(t *testing.T) {
	big := strings.Repeat("e", 100<<10)
	s := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.rec.record(r)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, big)
	})
	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{})
	resp := roundTrip(t, tr, newRequest(t, "GET", s.URL, nil))
	if body := readAll(t, resp); resp.StatusCode != 503 || body != big {
		t.Errorf("got %d with %d bytes, want 503 with %d", resp.StatusCode, len(body), len(big))
	}
	if n := len(s.rec.all()); n != 1 || tr.Stats().RetryableStatus != 0 {
		t.Errorf("server saw %d copies, RetryableStatus %d; want 1, 0", n, tr.Stats().RetryableStatus)
	}
}
