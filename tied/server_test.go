package tied

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hang bounds every wait of these tests and every request they send
// (newClient, bounded): they synchronise on channels and hooks, and the
// bound only turns a bug, such as a claim never answered, into a
// failure instead of a hang. A test takes milliseconds, so the bound is
// generous on the busiest machine.
const hang = 10 * time.Second

// Once a wait ran out (hung), the package's tests have failed; the later
// waits and requests give up after hungAfter instead of hang, so that a
// bug that hangs every test fails the suite in seconds, not at the test
// binary's timeout.
const hungAfter = time.Second

var hung atomic.Bool

// limit returns the bound of a wait or request that starts now: hang,
// or hungAfter once a wait ran out.
func limit() time.Duration {
	if hung.Load() {
		return hungAfter
	}
	return hang
}

// timedOut reports whether err is a request's running out of time
// (newClient, bounded), and records it as a wait that ran out.
func timedOut(err error) bool {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		hung.Store(true)
		return true
	}
	return false
}

// within runs stop, which closes what (a test's servers), and waits for
// it at most limit(): a server whose handler never returns (a claim that
// deadlocked) fails the test instead of hanging it, and is left behind.
func within(t *testing.T, what string, stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	d := limit()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("closing %s: %s", what, ranOut(d))
	}
}

// ranOut records that a wait ran out after d, and says so.
func ranOut(d time.Duration) string {
	hung.Store(true)
	return fmt.Sprintf("no answer in %v: a claim or request that never ends? (later waits give up after %v)", d, hungAfter)
}

// claimTimeout is the ClaimTimeout of these tests' servers: longer than
// hang, so that a claim never answered shows as a wait of the test
// running out, not as a copy started after its claim failed.
const claimTimeout = time.Minute

// bounded returns a context for a test's requests that ends limit()
// after the call, or when the test ends.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), limit())
	t.Cleanup(cancel)
	return ctx
}

var testSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")

// node is one server of a test service.
type node struct {
	s   *Server
	ts  *httptest.Server
	url string
}

// gateSender holds every claim until gate is closed; entered, if not
// nil, gets a value as each claim comes in.
type gateSender struct {
	inner   Sender
	gate    chan struct{}
	entered chan struct{}
}

func (g *gateSender) SendClaim(ctx context.Context, addr, msg string) (string, error) {
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return g.inner.SendClaim(ctx, addr, msg)
}

func (g *gateSender) CloseIdleConnections() {
	if c, ok := g.inner.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// newService starts n servers on loopback, each a peer of the others,
// with cfg (Peers, Secret and ClaimTimeout filled in) and app
// behind the middleware. hooks[i], if set, is server i's hook.
func newService(t *testing.T, n int, cfg Config, app func(i int) http.Handler, hooks ...func(string)) []*node {
	t.Helper()
	nodes := make([]*node, n)
	for i := range nodes {
		ts := httptest.NewUnstartedServer(nil)
		nodes[i] = &node{ts: ts, url: "http://" + ts.Listener.Addr().String()}
	}
	for i, nd := range nodes {
		c := cfg
		c.Peers = nil
		for j, o := range nodes {
			if j != i {
				c.Peers = append(c.Peers, o.url)
			}
		}
		if c.Secret == nil {
			c.Secret = testSecret
		}
		if c.ClaimTimeout == 0 {
			c.ClaimTimeout = claimTimeout
		}
		if g, ok := cfg.Sender.(*gateSender); ok {
			c.Sender = &gateSender{inner: NewHTTPSender(nil, ""), gate: g.gate, entered: g.entered}
		}
		s, err := NewServer(c)
		if err != nil {
			t.Fatal(err)
		}
		if i < len(hooks) {
			s.hook = hooks[i]
		}
		nd.s = s
		nd.ts.Config.Handler = s.Handler(app(i))
		nd.ts.Start()
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			within(t, "the server at "+nd.url, func() {
				nd.ts.Close()
				nd.s.Close()
			})
		}
	})
	return nodes
}

// waitFor returns a hook that closes the returned channel at the first
// event e.
func waitFor(e string) (func(string), <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(ev string) {
		if ev == e {
			once.Do(func() { close(ch) })
		}
	}, ch
}

// combine returns a hook calling each of hs.
func combine(hs ...func(string)) func(string) {
	return func(e string) {
		for _, h := range hs {
			h(e)
		}
	}
}

// await waits for a value on ch, at most limit().
func await[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	d := limit()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("waiting for %s: %s", what, ranOut(d))
	}
}

type reply struct {
	code    int
	body    string
	dropped string
	err     error
}

// send makes a request to url with the tie headers (id "" for none) and
// a X-Name header, and delivers the reply on the returned channel.
func send(ctx context.Context, client *http.Client, url, name, id, sibling string) <-chan reply {
	return sendRole(ctx, client, url, name, id, sibling, RoleEither)
}

// sendRole is send with a RoleHeader, unless role is RoleEither.
func sendRole(ctx context.Context, client *http.Client, url, name, id, sibling string, role Role) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/work", nil)
		req.Header.Set("X-Name", name)
		if id != "" {
			req.Header.Set(IDHeader, id)
			req.Header.Set(SiblingHeader, sibling)
		}
		if role != RoleEither {
			req.Header.Set(RoleHeader, role.String())
		}
		resp, err := client.Do(req)
		if err != nil {
			ch <- reply{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- reply{code: resp.StatusCode, body: string(b), dropped: resp.Header.Get(DroppedHeader)}
	}()
	return ch
}

// recv waits for a reply on ch, at most limit(). A request that ran out
// of time (newClient, bounded) counts as a wait that ran out.
func recv(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	d := limit()
	select {
	case r := <-ch:
		timedOut(r.err)
		return r
	case <-time.After(d):
		t.Fatalf("waiting for a reply: %s", ranOut(d))
	}
	return reply{}
}

// app is a test application: a request named "block…" signals on started
// and waits for release; every request records its name in ran.
type app struct {
	mu      sync.Mutex
	ran     []string
	started chan string
	release chan struct{}
}

func newApp() *app {
	return &app{started: make(chan string, 16), release: make(chan struct{})}
}

func (a *app) handler(i int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Name")
		a.mu.Lock()
		a.ran = append(a.ran, name)
		a.mu.Unlock()
		if strings.HasPrefix(name, "block") {
			a.started <- name
			select {
			case <-a.release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, name+"@"+strconv.Itoa(i))
	})
}

func (a *app) has(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.ran {
		if n == name {
			return true
		}
	}
	return false
}

// newClient returns a client whose requests end within limit(). Its
// connections close at the test's cleanup, in use or not: a request that
// a failed test left behind (a copy that runs although it should have
// been dropped, held by its app) ends there, so that the servers' Close
// does not wait on it.
func newClient(t *testing.T) *http.Client {
	var mu sync.Mutex
	var conns []net.Conn
	var d net.Dialer
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return &http.Client{Transport: tr, Timeout: limit()}
}

// Untied requests, requests naming a sibling outside Peers and requests
// with malformed tie headers run normally.
func TestUntiedAndUnknownRun(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	nodes := newService(t, 2, Config{Workers: 2}, func(i int) http.Handler { return apps[i].handler(i) })
	a := nodes[0]
	client := newClient(t)
	ctx := context.Background()
	for _, c := range []struct{ name, id, sib string }{
		{"plain", "", ""},
		{"stranger", NewID(), "http://203.0.113.1:80"},
		{"bad-id", "short", nodes[1].url},
	} {
		if r := recv(t, send(ctx, client, a.url, c.name, c.id, c.sib)); r.code != 200 || r.body != c.name+"@0" {
			t.Errorf("%s: %+v, want 200", c.name, r)
		}
	}
	s := a.s.Stats()
	if s.Started != 3 || s.TiedStarted != 0 || s.UnknownSibling != 1 || s.BadTie != 1 || s.ClaimsWon+s.ClaimsSkipped+s.ClaimsFailed != 0 {
		t.Errorf("%+v", s)
	}
}

func TestNewServerValidates(t *testing.T) {
	_, err := NewServer(Config{Peers: []string{"http://x", ""}, Secret: []byte("short"), MaxSkew: -1, CancelPath: "x"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Workers", "Secret", "Peers[1]", "MaxSkew", "CancelPath"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := NewClient(ClientConfig{Replicas: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewClient with 1 replica: %v", err)
	}
}
