package tied

import (
	"context"
	"errors"
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

// hang bounds every wait of these tests: they synchronise on channels and
// hooks, and this only turns a bug into a failure instead of a hang.
const hang = 2 * time.Minute

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
// with cfg (Peers, Secret and a long ClaimTimeout filled in) and app
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
			c.ClaimTimeout = hang
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
			nd.ts.Close()
			nd.s.Close()
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

func await[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hang):
		t.Fatalf("timed out waiting for %s", what)
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
	ch := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/work", nil)
		req.Header.Set("X-Name", name)
		if id != "" {
			req.Header.Set(IDHeader, id)
			req.Header.Set(SiblingHeader, sibling)
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

func recv(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hang):
		t.Fatal("timed out waiting for a reply")
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

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A tied copy queued behind a busy worker is dropped, without running,
// when its sibling claims the tie on an idle server.
func TestQueuedSiblingDropped(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	queuedB, queued := waitFor("queued")
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, nil, queuedB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()

	busy := send(ctx, client, b.url, "block-b", "", "")
	await[string](t, apps[1].started, "B's worker to be busy")
	id := NewID()
	onB := send(ctx, client, b.url, "tied-b", id, a.url)
	await(t, queued, "the copy to queue at B")
	onA := send(ctx, client, a.url, "tied-a", id, b.url)

	if r := recv(t, onA); r.err != nil || r.code != 200 || r.body != "tied-a@0" {
		t.Fatalf("copy on A: %+v, want 200 tied-a@0", r)
	}
	r := recv(t, onB)
	if r.err != nil || r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("copy on B: %+v, want 409 with %s: sibling", r, DroppedHeader)
	}
	close(apps[1].release)
	if r := recv(t, busy); r.code != 200 {
		t.Fatalf("busy request: %+v", r)
	}
	if apps[1].has("tied-b") {
		t.Error("the dropped copy ran on B")
	}
	sa, sb := a.s.Stats(), b.s.Stats()
	if sa.ClaimsWon != 1 || sa.TiedStarted != 1 {
		t.Errorf("A: %+v, want 1 claim won, 1 tied start", sa)
	}
	if sb.Dropped != 1 || sb.ClaimsReceived != 1 || sb.TiedStarted != 0 || sb.Started != 1 {
		t.Errorf("B: %+v, want 1 dropped, 1 claim received, only the busy request started", sb)
	}
	if lat := a.s.ClaimLatencies(); len(lat) != 1 || lat[0] < 0 || sa.ClaimLatencySum != lat[0] {
		t.Errorf("A's claim latencies %v, sum %v: want one", lat, sa.ClaimLatencySum)
	}
}

// Both servers idle: both copies get a worker at once and claim the tie
// at the same time (their claims are held until both are in flight, then
// delivered together or one after the other). Exactly one copy runs; the
// other is answered "dropped".
func TestTiedPairRunsOnce(t *testing.T) {
	for _, order := range []string{"together", "a-first", "b-first"} {
		t.Run(order, func(t *testing.T) {
			apps := []*app{newApp(), newApp()}
			var hooks [2]func(string)
			var seen [2]chan string
			for i := range hooks {
				ch := make(chan string, 16)
				seen[i] = ch
				hooks[i] = func(e string) {
					switch e {
					case "claiming", "refused", "crossed", "repeated":
						ch <- e
					}
				}
			}
			nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, hooks[:]...)
			gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
			for i, nd := range nodes {
				nd.s.sender = &gateSender{inner: nd.s.sender, gate: gates[i]}
			}
			a, b := nodes[0], nodes[1]
			client := newClient(t)
			ctx := context.Background()
			id := NewID()
			onA := send(ctx, client, a.url, "tied-a", id, b.url)
			onB := send(ctx, client, b.url, "tied-b", id, a.url)
			// expect waits for server i's next event, which must be one
			// of want.
			expect := func(i int, want ...string) {
				t.Helper()
				select {
				case e := <-seen[i]:
					for _, w := range want {
						if e == w {
							return
						}
					}
					t.Fatalf("server %d: event %q, want one of %q", i, e, want)
				case <-time.After(hang):
					t.Fatalf("server %d: no event %q", i, want)
				}
			}
			expect(0, "claiming")
			expect(1, "claiming")
			// Both copies hold a worker and claim: without the claim
			// both would start now.
			switch order {
			case "together":
				close(gates[0])
				close(gates[1])
			case "a-first":
				close(gates[0])
				expect(1, "refused", "crossed") // B answered A's claim
				close(gates[1])
			case "b-first":
				close(gates[1])
				expect(0, "refused", "crossed")
				close(gates[0])
			}
			ra, rb := recv(t, onA), recv(t, onB)
			ok := func(r reply, name string) bool {
				return r.err == nil && r.code == 200 && strings.HasPrefix(r.body, name+"@")
			}
			dropped := func(r reply) bool { return r.err == nil && r.code == http.StatusConflict && r.dropped == "sibling" }
			if !(ok(ra, "tied-a") && dropped(rb)) && !(ok(rb, "tied-b") && dropped(ra)) {
				t.Fatalf("replies A %+v, B %+v: want one 200 and one 409 dropped", ra, rb)
			}
			ranA, ranB := apps[0].has("tied-a"), apps[1].has("tied-b")
			if ranA == ranB {
				t.Errorf("ran on A: %v, on B: %v: want exactly one", ranA, ranB)
			}
			sa, sb := a.s.Stats(), b.s.Stats()
			if n := sa.TiedStarted + sb.TiedStarted; n != 1 {
				t.Errorf("tied starts %d, want 1 (A %+v, B %+v)", n, sa, sb)
			}
			if n := sa.Dropped + sb.Dropped; n != 1 {
				t.Errorf("dropped %d, want 1", n)
			}
			if sa.ClaimsFailed+sb.ClaimsFailed+sa.ClaimsSkipped+sb.ClaimsSkipped != 0 {
				t.Errorf("claims failed or skipped: A %+v, B %+v", sa, sb)
			}
		})
	}
}

// A claim that cannot be answered (the peer is down, or hangs past
// ClaimTimeout) does not stop the copy: it starts anyway, counted in
// ClaimsFailed; after three failures in a row, copies whose sibling is
// on that peer start without claiming for ClaimBackoff (ClaimsSkipped).
func TestClaimFallback(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close() // connections are refused from now on
	hung := make(chan struct{})
	hungTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer hungTS.Close()
	defer close(hung)

	for _, c := range []struct {
		name     string
		peer     string
		timeout  time.Duration
		backoff  time.Duration
		requests int
		failed   int64
		skipped  int64
	}{
		{"dead", deadURL, hang, 0, 5, 3, 2},
		{"dead, no backoff", deadURL, hang, -1, 5, 5, 0},
		// A hung peer: the claim is bound to fail, after ClaimTimeout.
		{"hung", hungTS.URL, time.Millisecond, 0, 4, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ap := newApp()
			t0 := time.Unix(1_700_000_000, 0)
			s, err := NewServer(Config{Workers: 1, Secret: testSecret, Peers: []string{c.peer}, ClaimTimeout: c.timeout, ClaimBackoff: c.backoff, Now: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s.Handler(ap.handler(0)))
			defer func() {
				ts.Close()
				s.Close()
			}()
			client := newClient(t)
			for i := range c.requests {
				name := "t" + strconv.Itoa(i)
				if r := recv(t, send(context.Background(), client, ts.URL, name, NewID(), c.peer)); r.code != 200 || r.body != name+"@0" {
					t.Fatalf("request %d: %+v, want 200: a copy whose claim fails runs", i, r)
				}
			}
			st := s.Stats()
			if st.TiedStarted != int64(c.requests) || st.ClaimsFailed != c.failed || st.ClaimsSkipped != c.skipped || st.ClaimsWon != 0 {
				t.Errorf("%+v, want %d tied starts, %d claims failed, %d skipped", st, c.requests, c.failed, c.skipped)
			}
		})
	}
}

// A claim that comes before its copy leaves a tombstone, and the copy is
// dropped on arrival: the case of an idle first server, which the
// client's gap makes the common one.
func TestEarlyClaimDropsOnArrival(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	earlyB, early := waitFor("early")
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, nil, earlyB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()
	id := NewID()
	if r := recv(t, send(ctx, client, a.url, "tied-a", id, b.url)); r.code != 200 {
		t.Fatalf("first copy: %+v", r)
	}
	await(t, early, "the claim at B")
	r := recv(t, send(ctx, client, b.url, "tied-b", id, a.url))
	if r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("second copy: %+v, want 409 dropped", r)
	}
	if apps[1].has("tied-b") {
		t.Error("the second copy ran")
	}
	if s := b.s.Stats(); s.Dropped != 1 || s.ClaimsEarly != 1 || s.Started != 0 {
		t.Errorf("B: %+v", s)
	}
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

// The queue is bounded: with the worker busy and MaxQueue waiting, the
// next request is refused with 503 and RefusedHeader; with no queue the
// second request is.
func TestQueueBound(t *testing.T) {
	for _, c := range []struct {
		maxQueue, waiting int
	}{{1, 1}, {3, 3}, {-1, 0}} {
		t.Run(strconv.Itoa(c.maxQueue), func(t *testing.T) {
			ap := newApp()
			var mu sync.Mutex
			queuedN := 0
			allQueued := make(chan struct{})
			hook := func(e string) {
				if e != "queued" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if queuedN++; queuedN == c.waiting {
					close(allQueued)
				}
			}
			nodes := newService(t, 1, Config{Workers: 1, MaxQueue: c.maxQueue}, func(int) http.Handler { return ap.handler(0) }, hook)
			n := nodes[0]
			client := newClient(t)
			ctx := context.Background()
			var waits []<-chan reply
			waits = append(waits, send(ctx, client, n.url, "block-0", "", ""))
			await[string](t, ap.started, "the worker to be busy")
			for i := range c.waiting {
				waits = append(waits, send(ctx, client, n.url, "q"+strconv.Itoa(i), "", ""))
			}
			if c.waiting > 0 {
				await(t, allQueued, "the queue to fill")
			}
			req, _ := http.NewRequest(http.MethodGet, n.url+"/x", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(RefusedHeader) != "queue-full" {
				t.Errorf("over the bound: %s %q, want 503 queue-full", resp.Status, resp.Header.Get(RefusedHeader))
			}
			close(ap.release)
			for _, w := range waits {
				if r := recv(t, w); r.code != 200 {
					t.Errorf("admitted request: %+v", r)
				}
			}
			if s := n.s.Stats(); s.Refused != 1 || s.Started != int64(1+c.waiting) {
				t.Errorf("%+v", s)
			}
		})
	}
}

// A queued request whose client goes away leaves the queue.
func TestAbandonedLeavesQueue(t *testing.T) {
	ap := newApp()
	hookQ, queued := waitFor("queued")
	hookA, abandoned := waitFor("abandoned")
	nodes := newService(t, 1, Config{Workers: 1}, func(int) http.Handler { return ap.handler(0) }, combine(hookQ, hookA))
	n := nodes[0]
	client := newClient(t)
	busy := send(context.Background(), client, n.url, "block-0", "", "")
	await[string](t, ap.started, "the worker to be busy")
	ctx, cancel := context.WithCancel(context.Background())
	w := send(ctx, client, n.url, "gone", "", "")
	await(t, queued, "the request to queue")
	cancel()
	if r := recv(t, w); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("abandoned request: %+v", r)
	}
	await(t, abandoned, "the server to see the client go")
	close(ap.release)
	recv(t, busy)
	if s := n.s.Stats(); s.Abandoned != 1 || s.Started != 1 {
		t.Errorf("%+v", s)
	}
	if ap.has("gone") {
		t.Error("the abandoned request ran")
	}
}

// Forged, stale, malformed and misdirected claims are refused with 403
// and change nothing; a valid one is answered "go".
func TestClaimAuthentication(t *testing.T) {
	ap := newApp()
	nodes := newService(t, 1, Config{Workers: 1}, func(int) http.Handler { return ap.handler(0) })
	n := nodes[0]
	client := newClient(t)
	id := NewID()
	now := time.Now()
	other := []byte("another secret of thirty-two bytes or more!!")
	cases := []struct {
		name, method, body string
		code               int
	}{
		{"valid", http.MethodPost, Claim{ID: id, Ticket: 7, Sent: now}.Sign(testSecret), 200},
		{"forged", http.MethodPost, Claim{ID: NewID(), Sent: now}.Sign(other), 403},
		{"stale", http.MethodPost, Claim{ID: NewID(), Sent: now.Add(-time.Hour)}.Sign(testSecret), 403},
		{"future", http.MethodPost, Claim{ID: NewID(), Sent: now.Add(time.Hour)}.Sign(testSecret), 403},
		{"garbage", http.MethodPost, "hello", 403},
		{"tampered", http.MethodPost, strings.Replace(Claim{ID: id, Ticket: 7, Sent: now}.Sign(testSecret), id, NewID(), 1), 403},
		{"ticket changed", http.MethodPost, strings.Replace(Claim{ID: id, Ticket: 7, Sent: now}.Sign(testSecret), ".7.", ".1.", 1), 403},
		{"get", http.MethodGet, "", 405},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, n.url+DefaultCancelPath, strings.NewReader(c.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: %s %q, want %d", c.name, resp.Status, b, c.code)
		}
		if c.code == 200 && string(b) != "go" {
			t.Errorf("%s: answer %q, want go", c.name, b)
		}
	}
	s := n.s.Stats()
	if s.ClaimsReceived != 1 || s.ClaimsEarly != 1 || s.ClaimsRejected != 6 {
		t.Errorf("%+v, want 1 received (early), 6 rejected", s)
	}
}

func TestVerifyClaim(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123)
	id := "AAAAAAAAAAAAAAAAAAAAAA"
	good := Claim{ID: id, Ticket: 42, Sent: t0}.Sign(testSecret)
	for _, c := range []struct {
		name string
		msg  string
		now  time.Time
		ok   bool
	}{
		{"good", good, t0, true},
		{"good, 9s later", good, t0.Add(9 * time.Second), true},
		{"11s later", good, t0.Add(11 * time.Second), false},
		{"11s earlier", good, t0.Add(-11 * time.Second), false},
		{"truncated", good[:len(good)-1], t0, false},
		{"version", "v1" + good[2:], t0, false},
		{"leading zero ticket", strings.Replace(good, ".42.", ".042.", 1), t0, false},
		{"extra field", good + ".x", t0, false},
		{"leading zero time", strings.Replace(good, ".1700", ".01700", 1), t0, false},
		{"empty", "", t0, false},
	} {
		got, err := VerifyClaim(c.msg, testSecret, c.now, 10*time.Second)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil && !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: %v does not match ErrBadMessage", c.name, err)
		}
		if err == nil && (got.ID != id || got.Ticket != 42 || !got.Sent.Equal(t0)) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

func TestParseTie(t *testing.T) {
	id := NewID()
	for _, c := range []struct {
		id, sib string
		want    Tie
		ok      bool
	}{
		{"", "", Tie{}, true},
		{id, "HTTP://Host:1/", Tie{ID: id, Sibling: "http://host:1"}, true},
		{id, "HTTP://Host:1/Svc/B/", Tie{ID: id, Sibling: "http://host:1/Svc/B"}, true},
		{id, "Host:9090", Tie{ID: id, Sibling: "host:9090"}, true},
		{id, "https://User:Pw@Host/P?Q=1", Tie{ID: id, Sibling: "https://User:Pw@host/P?Q=1"}, true},
		{id, "[FE80::1]:9090/X", Tie{ID: id, Sibling: "[fe80::1]:9090/X"}, true},
		{id, "", Tie{}, false},
		{"", "http://h", Tie{}, false},
		{"short", "http://h", Tie{}, false},
		{strings.Repeat("a", 65), "http://h", Tie{}, false},
		{id[:20] + "!!", "http://h", Tie{}, false},
		{id, "http://h x", Tie{}, false},
	} {
		got, err := ParseTie(c.id, c.sib)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ParseTie(%q, %q) = %+v, %v", c.id, c.sib, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadTie) {
			t.Errorf("ParseTie(%q, %q): %v does not match ErrBadTie", c.id, c.sib, err)
		}
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

// Claims beyond MaxClaimsInFlight are not sent: the copy starts without
// claiming, counted.
func TestClaimFanOutBound(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{}, 4)
	ap := newApp()
	nodes := newService(t, 2, Config{Workers: 4, MaxClaimsInFlight: 1, Sender: &gateSender{gate: gate, entered: entered}}, func(i int) http.Handler { return ap.handler(i) })
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	first := send(context.Background(), client, a.url, "t0", NewID(), b.url)
	await(t, entered, "the first claim to be in flight")
	if r := recv(t, send(context.Background(), client, a.url, "t1", NewID(), b.url)); r.code != 200 {
		t.Fatalf("second copy: %+v, want 200, started unclaimed", r)
	}
	close(gate)
	if r := recv(t, first); r.code != 200 {
		t.Fatalf("first copy: %+v", r)
	}
	if s := a.s.Stats(); s.ClaimsSkipped != 1 || s.ClaimsWon != 1 || s.TiedStarted != 2 {
		t.Errorf("A: %+v, want 1 claim skipped, 1 won", s)
	}
	if s := b.s.Stats(); s.ClaimsReceived != 1 {
		t.Errorf("B: %+v, want 1 received", s)
	}
}

// With ClaimAhead, when a worker frees, the tied copies next in the queue
// claim their tie while they wait: the sibling's server keeps a tombstone
// and drops the sibling on arrival, and the queued copy runs when a
// worker is free for it. A copy that won its claim ahead and whose
// client then leaves gives up its place.
func TestClaimAhead(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	var waitingN atomic.Int64
	queued, twoWon := make(chan struct{}, 3), make(chan struct{})
	hookB := func(e string) {
		switch {
		case e == "queued":
			queued <- struct{}{}
		case e == "waiting" && waitingN.Add(1) == 2:
			close(twoWon)
		}
	}
	hookAbandoned, abandoned := waitFor("abandoned")
	nodes := newService(t, 2, Config{Workers: 1, ClaimAhead: 2}, func(i int) http.Handler { return apps[i].handler(i) }, nil, combine(hookB, hookAbandoned))
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()

	ctx1, cancel1 := context.WithCancel(ctx)
	busy1 := send(ctx1, client, b.url, "block-1", "", "")
	await[string](t, apps[1].started, "B's worker to be busy")
	// Queued in this order: block-2, tied-b, tied-gone.
	busy2 := send(ctx, client, b.url, "block-2", "", "")
	await(t, queued, "block-2 to queue")
	id := NewID()
	onB := send(ctx, client, b.url, "tied-b", id, a.url)
	await(t, queued, "tied-b to queue")
	gone, cancelGone := context.WithCancel(ctx)
	onGone := send(gone, client, b.url, "tied-gone", NewID(), a.url)
	await(t, queued, "tied-gone to queue")
	// Nothing has claimed while no worker freed.
	if st := a.s.Stats(); st.ClaimsReceived != 0 {
		t.Fatalf("A: %+v, want no claim before B makes progress", st)
	}
	cancel1() // block-1 ends: block-2 starts, the two tied copies claim ahead
	if r := recv(t, busy1); r.err == nil {
		t.Fatalf("cancelled request: %+v", r)
	}
	await[string](t, apps[1].started, "block-2 to start")
	await(t, twoWon, "the two claims ahead to be won")
	if r := recv(t, send(ctx, client, a.url, "tied-a", id, b.url)); r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("copy on A: %+v, want 409 dropped", r)
	}
	cancelGone()
	if r := recv(t, onGone); r.err == nil {
		t.Fatalf("abandoned copy: %+v, want an error", r)
	}
	await(t, abandoned, "B to see the client go")
	close(apps[1].release)
	recv(t, busy2)
	if r := recv(t, onB); r.code != 200 || r.body != "tied-b@1" {
		t.Fatalf("copy on B: %+v, want 200 after the busy requests", r)
	}
	if apps[0].has("tied-a") || apps[1].has("tied-gone") {
		t.Error("a dropped or abandoned copy ran")
	}
	sa, sb := a.s.Stats(), b.s.Stats()
	if sb.ClaimsWon != 2 || sb.TiedStarted != 1 || sb.Abandoned != 1 || sb.Queued != 0 || sb.Running != 0 {
		t.Errorf("B: %+v, want 2 claims won ahead, 1 tied start, 1 abandoned, nothing left", sb)
	}
	if sa.Dropped != 1 || sa.ClaimsEarly != 2 || sa.Started != 0 {
		t.Errorf("A: %+v, want its copy dropped on arrival", sa)
	}
}

// peerPair starts servers A and B on loopback, each the other's only
// peer, with workers each, running ap. B is reached at its base URL plus
// bPath, and serves through wrapB (given B's middleware). The servers
// stop at the test's cleanup.
func peerPair(t *testing.T, ap *app, workers int, bPath string, wrapB func(http.Handler) http.Handler) (a, b *Server, aURL, bURL string) {
	t.Helper()
	bTS := httptest.NewUnstartedServer(nil)
	bURL = "http://" + bTS.Listener.Addr().String() + bPath
	a, err := NewServer(Config{Workers: workers, Secret: testSecret, Peers: []string{bURL + "/"}, ClaimTimeout: hang})
	if err != nil {
		t.Fatal(err)
	}
	aTS := httptest.NewServer(a.Handler(ap.handler(0)))
	b, err = NewServer(Config{Workers: workers, Secret: testSecret, Peers: []string{aTS.URL}, ClaimTimeout: hang})
	if err != nil {
		t.Fatal(err)
	}
	bTS.Config.Handler = wrapB(b.Handler(ap.handler(1)))
	bTS.Start()
	t.Cleanup(func() {
		aTS.Close()
		bTS.Close()
		a.Close()
		b.Close()
	})
	return a, b, aTS.URL, bURL
}

// A peer's base URL may have a path, whose case matters (only the scheme
// and host are case-insensitive): claims reach the peer mounted there.
func TestClaimToPeerWithPath(t *testing.T) {
	ap := newApp()
	a, b, aURL, bURL := peerPair(t, ap, 1, "/Svc/B", func(h http.Handler) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/Svc/B/", http.StripPrefix("/Svc/B", h))
		return mux
	})
	client := newClient(t)
	// The client writes the scheme in capitals, with a trailing slash.
	sibling := "HTTP" + strings.TrimPrefix(bURL, "http") + "/"
	if r := recv(t, send(context.Background(), client, aURL, "tied-a", NewID(), sibling)); r.code != 200 {
		t.Fatalf("copy on A: %+v", r)
	}
	if st := a.Stats(); st.ClaimsWon != 1 || st.ClaimsFailed != 0 || st.UnknownSibling != 0 {
		t.Errorf("A: %+v, want its claim won at %s", st, bURL)
	}
	if st := b.Stats(); st.ClaimsEarly != 1 {
		t.Errorf("B: %+v, want the claim received", st)
	}
}

// After a claim to a peer goes unanswered, one claim at a time probes
// it: copies that come while the probe is in flight start without
// claiming, and once the peer answers again every copy claims.
func TestClaimProbeAfterFailure(t *testing.T) {
	ap := newApp()
	arrived := make(chan struct{})
	verdicts := make(chan bool) // false: answer 503; true: let the peer answer
	stop := make(chan struct{})
	a, _, aURL, bURL := peerPair(t, ap, 4, "", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case arrived <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case ok := <-verdicts:
				if !ok {
					http.Error(w, "unavailable", http.StatusServiceUnavailable)
					return
				}
			case <-stop:
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(stop) }) // before the servers close
	client := newClient(t)
	ctx := context.Background()
	tiedCopy := func(name string) <-chan reply { return send(ctx, client, aURL, name, NewID(), bURL) }
	answer := func(ok bool) {
		t.Helper()
		await(t, arrived, "a claim at the peer")
		verdicts <- ok
	}

	first := tiedCopy("t0")
	answer(false) // the peer fails to answer
	if r := recv(t, first); r.code != 200 {
		t.Fatalf("t0: %+v, want it run after its claim failed", r)
	}
	probe := tiedCopy("t1")
	await(t, arrived, "the probe at the peer")
	for _, name := range []string{"t2", "t3"} {
		ch := tiedCopy(name)
		select {
		case r := <-ch:
			if r.code != 200 {
				t.Fatalf("%s: %+v, want 200, started unclaimed", name, r)
			}
		case <-arrived:
			t.Fatalf("%s sent a second claim to the peer while the probe was in flight", name)
		case <-time.After(hang):
			t.Fatalf("%s: no reply", name)
		}
	}
	verdicts <- true // the probe is answered
	if r := recv(t, probe); r.code != 200 {
		t.Fatalf("t1: %+v", r)
	}
	last := tiedCopy("t4")
	answer(true)
	if r := recv(t, last); r.code != 200 {
		t.Fatalf("t4: %+v", r)
	}
	if st := a.Stats(); st.ClaimsFailed != 1 || st.ClaimsSkipped != 2 || st.ClaimsWon != 2 || st.TiedStarted != 5 {
		t.Errorf("A: %+v, want 1 claim failed, 2 skipped during the probe, 2 won", st)
	}
}

// A claim that arrives after this server's copy of the tie started is
// refused (answered lost) and counted, whatever its ticket, so that the
// claimant drops its copy instead of running it a second time.
func TestClaimAfterStartRefused(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) })
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	id := NewID()
	onB := send(context.Background(), client, b.url, "block-b", id, a.url)
	await[string](t, apps[1].started, "the copy to start on B")

	sender := NewHTTPSender(nil, "")
	defer sender.CloseIdleConnections()
	for _, ticket := range []uint64{0, 1 << 63} {
		answer, err := sender.SendClaim(context.Background(), b.url, Claim{ID: id, Ticket: ticket, Sent: time.Now()}.Sign(testSecret))
		if err != nil || answer != VerdictLost.String() {
			t.Errorf("claim with ticket %d after the start: %q, %v; want lost", ticket, answer, err)
		}
	}
	close(apps[1].release)
	if r := recv(t, onB); r.code != 200 || r.body != "block-b@1" {
		t.Fatalf("copy on B: %+v, want it run", r)
	}
	if st := b.s.Stats(); st.ClaimsReceived != 2 || st.ClaimsRefused != 2 || st.Dropped != 0 || st.TiedStarted != 1 {
		t.Errorf("B: %+v, want 2 claims received and refused, its copy run", st)
	}
}
