package hedgehttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait of a test, so that a broken rule fails the
// test instead of hanging it. No assertion depends on it: a test waits for
// an event, never for time to pass.
const waitLimit = time.Minute

// server is an httptest.Server that counts its open connections and has a
// stop channel, closed before the server, that releases stalled handlers.
type server struct {
	*httptest.Server
	stop chan struct{}
	rec  recorder

	mu      sync.Mutex
	open    int64
	changed chan struct{} // closed, and replaced, when open changes
}

type handler func(s *server, w http.ResponseWriter, r *http.Request)

// newServer starts a plain HTTP/1.1 server.
func newServer(t *testing.T, h handler) *server {
	t.Helper()
	s := newUnstartedServer(t, h)
	s.Start()
	return s
}

// newUnstartedServer returns a server to start, closed when t ends.
func newUnstartedServer(t *testing.T, h handler) *server {
	t.Helper()
	s := &server{stop: make(chan struct{}), changed: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) }))
	s.Config.ConnState = s.connState
	t.Cleanup(func() { close(s.stop); s.Close() })
	return s
}

func (s *server) connState(_ net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.open++
	case http.StateClosed, http.StateHijacked:
		s.open--
	default:
		return
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitOpen waits until the server has n open connections, as its
// ConnState hook reports them: a connection the client closed is closed
// on the server a little later.
func (s *server) waitOpen(t *testing.T, n int64) {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		s.mu.Lock()
		open, changed := s.open, s.changed
		s.mu.Unlock()
		if open == n {
			return
		}
		select {
		case <-changed:
		case <-limit.C:
			t.Fatalf("server has %d open connections, want %d", open, n)
		}
	}
}

// seen is what a server saw of one copy.
type seen struct {
	attempt    int
	attemptHdr []string // the raw Hedge-Attempt values
	header     http.Header
	body       string
	remote     string
	uri        string
	host       string
	proto      int
}

// recorder keeps what a server saw, in arrival order, and signals
// arrivals.
type recorder struct {
	mu      sync.Mutex
	copies  []seen
	arrived [hedge.HardMaxAttempts]chan struct{} // closed when copy i arrives
	once    sync.Once
}

func (rc *recorder) init() {
	rc.once.Do(func() {
		for i := range rc.arrived {
			rc.arrived[i] = make(chan struct{})
		}
	})
}

// record reads r's body, records the copy and signals its arrival.
func (rc *recorder) record(r *http.Request) seen { return rc.keep(r, true) }

// recordQuiet records a request that is not a copy of the request under
// test (a warm-up), without signalling an arrival.
func (rc *recorder) recordQuiet(r *http.Request) seen { return rc.keep(r, false) }

func (rc *recorder) keep(r *http.Request, signal bool) seen {
	rc.init()
	b, _ := io.ReadAll(r.Body)
	c := seen{
		attempt:    hedgehttp.AttemptIndex(r),
		attemptHdr: r.Header[hedgehttp.AttemptHeader],
		header:     r.Header.Clone(),
		body:       string(b),
		remote:     r.RemoteAddr,
		uri:        r.RequestURI,
		host:       r.Host,
		proto:      r.ProtoMajor,
	}
	rc.mu.Lock()
	rc.copies = append(rc.copies, c)
	if signal {
		select {
		case <-rc.arrived[c.attempt]:
		default:
			close(rc.arrived[c.attempt])
		}
	}
	rc.mu.Unlock()
	return c
}

// waitArrived returns a channel closed when copy i has arrived.
func (rc *recorder) waitArrived(i int) <-chan struct{} {
	rc.init()
	return rc.arrived[i]
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.copies...)
}

// byAttempt returns the copies seen keyed by attempt index, failing t if
// an index arrived twice.
func (rc *recorder) byAttempt(t *testing.T) map[int]seen {
	t.Helper()
	m := map[int]seen{}
	for _, c := range rc.all() {
		if _, dup := m[c.attempt]; dup {
			t.Fatalf("copy %d arrived twice", c.attempt)
		}
		m[c.attempt] = c
	}
	return m
}

// stall blocks until the request's client gives up or the server stops;
// it reports whether the client gave up.
func stall(s *server, r *http.Request) bool {
	select {
	case <-r.Context().Done():
		return true
	case <-s.stop:
	}
	return false
}

// awaitPrimary blocks a hedge's handler until the primary has reached the
// server (so that a server counts both copies whichever wins), and reports
// whether it has.
func awaitPrimary(s *server, r *http.Request) bool {
	select {
	case <-s.rec.waitArrived(0):
		return true
	case <-r.Context().Done():
	case <-s.stop:
	}
	return false
}

func newHedger(t *testing.T, cfg hedge.Config) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newTransport wraps base (nil: a fresh *http.Transport, so that tests
// share no pools) and closes its idle connections when the test ends.
func newTransport(t *testing.T, base http.RoundTripper, h *hedge.Hedger, cfg hedgehttp.Config) *hedgehttp.Transport {
	t.Helper()
	if base == nil {
		base = &http.Transport{}
	}
	tr, err := hedgehttp.New(base, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// roundTrip sends req through rt, cancelling it after waitLimit (a rule
// that failed would otherwise hang the test). The watchdog is no deadline:
// the Hedger refuses hedges when the deadline is nearer than the delay.
func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(req.Context())
	watchdog := time.AfterFunc(waitLimit, cancel)
	t.Cleanup(func() { watchdog.Stop(); cancel() })
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	return resp
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("closing body: %v", err)
	}
	return string(b)
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// closeTracker is a request body without GetBody that records Close.
type closeTracker struct {
	io.Reader
	once   sync.Once
	closed chan struct{}
}

func newCloseTracker(r io.Reader) *closeTracker {
	return &closeTracker{Reader: r, closed: make(chan struct{})}
}

func (c *closeTracker) Close() error { c.once.Do(func() { close(c.closed) }); return nil }

// waitClosed waits until the body is closed: the base transport closes a
// request body once it has written it, on a goroutine of its own.
func (c *closeTracker) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(waitLimit):
		t.Fatal("the request body was never closed")
	}
}
