package tied

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
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

// gateSender holds every cancel message until gate is closed.
type gateSender struct {
	inner Sender
	gate  chan struct{}
}

func (g *gateSender) SendCancel(ctx context.Context, addr, msg string) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.inner.SendCancel(ctx, addr, msg)
}

func (g *gateSender) CloseIdleConnections() {
	if c, ok := g.inner.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// newService starts n servers on loopback, each a peer of the others,
// with cfg (Peers, Secret and a long CancelTimeout filled in) and app
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
		if c.CancelTimeout == 0 {
			c.CancelTimeout = hang
		}
		if g, ok := cfg.Sender.(*gateSender); ok {
			c.Sender = &gateSender{inner: NewHTTPSender(nil, ""), gate: g.gate}
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
// when its sibling starts on an idle server.
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
	a.s.Close() // waits for the cancel message's sender
	sa, sb := a.s.Stats(), b.s.Stats()
	if sa.CancelsSent != 1 || sa.TiedStarted != 1 {
		t.Errorf("A: %+v, want 1 cancel sent, 1 tied start", sa)
	}
	if sb.Dropped != 1 || sb.CancelsReceived != 1 || sb.TiedStarted != 0 || sb.Started != 1 {
		t.Errorf("B: %+v, want 1 dropped, 1 cancel received, only the busy request started", sb)
	}
	if lat := b.s.CancelLatencies(); len(lat) != 1 || lat[0] < 0 || sb.CancelLatencySum != lat[0] {
		t.Errorf("B's cancellation latencies %v, sum %v: want one", lat, sb.CancelLatencySum)
	}
}

// When both copies start before either cancel message arrives, both run:
// each server counts a cancel too late, and the two servers' tied starts
// exceed the tied calls by one, the duplicated execution.
func TestStartedSiblingRunsAndCounts(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	gate := make(chan struct{})
	lateA, tooLateA := waitFor("too-late")
	lateB, tooLateB := waitFor("too-late")
	nodes := newService(t, 2, Config{Workers: 1, Sender: &gateSender{gate: gate}}, func(i int) http.Handler { return apps[i].handler(i) }, lateA, lateB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()

	id := NewID()
	onA := send(ctx, client, a.url, "block-a", id, b.url)
	onB := send(ctx, client, b.url, "block-b", id, a.url)
	await[string](t, apps[0].started, "the copy to start on A")
	await[string](t, apps[1].started, "the copy to start on B")
	close(gate) // both cancel messages go now, too late
	await(t, tooLateA, "A's too-late cancel")
	await(t, tooLateB, "B's too-late cancel")
	close(apps[0].release)
	close(apps[1].release)
	for _, ch := range []<-chan reply{onA, onB} {
		if r := recv(t, ch); r.code != 200 {
			t.Fatalf("copy: %+v, want 200: both run", r)
		}
	}
	sa, sb := a.s.Stats(), b.s.Stats()
	for i, s := range []Stats{sa, sb} {
		if s.TiedStarted != 1 || s.CancelsTooLate != 1 || s.Dropped != 0 {
			t.Errorf("server %d: %+v, want 1 tied start, 1 cancel too late, none dropped", i, s)
		}
	}
	if dup := sa.TiedStarted + sb.TiedStarted - 1; dup != 1 {
		t.Errorf("duplicated executions %d, want 1", dup)
	}
}

// A cancel that comes before its copy is remembered, and the copy is
// dropped on arrival: the case of an idle first server, which the
// client's gap makes the common one.
func TestEarlyCancelDropsOnArrival(t *testing.T) {
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
	await(t, early, "the cancel at B")
	r := recv(t, send(ctx, client, b.url, "tied-b", id, a.url))
	if r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("second copy: %+v, want 409 dropped", r)
	}
	if apps[1].has("tied-b") {
		t.Error("the second copy ran")
	}
	if s := b.s.Stats(); s.Dropped != 1 || s.CancelsEarly != 1 || s.Started != 0 {
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
	if s.Started != 3 || s.TiedStarted != 0 || s.UnknownSibling != 1 || s.BadTie != 1 || s.CancelsShed+s.CancelsSent != 0 {
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

// Forged, stale, malformed and misdirected cancel messages are refused
// with 403 and change nothing; a valid one is accepted.
func TestCancelAuthentication(t *testing.T) {
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
		{"valid", http.MethodPost, Cancel{ID: id, Started: now}.Sign(testSecret), 200},
		{"forged", http.MethodPost, Cancel{ID: NewID(), Started: now}.Sign(other), 403},
		{"stale", http.MethodPost, Cancel{ID: NewID(), Started: now.Add(-time.Hour)}.Sign(testSecret), 403},
		{"future", http.MethodPost, Cancel{ID: NewID(), Started: now.Add(time.Hour)}.Sign(testSecret), 403},
		{"garbage", http.MethodPost, "hello", 403},
		{"tampered", http.MethodPost, strings.Replace(Cancel{ID: id, Started: now}.Sign(testSecret), id, NewID(), 1), 403},
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
	}
	s := n.s.Stats()
	if s.CancelsReceived != 1 || s.CancelsEarly != 1 || s.CancelsRejected != 5 {
		t.Errorf("%+v, want 1 received (early), 5 rejected", s)
	}
}

func TestVerifyCancel(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123)
	id := "AAAAAAAAAAAAAAAAAAAAAA"
	good := Cancel{ID: id, Started: t0}.Sign(testSecret)
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
		{"version", "v2" + good[2:], t0, false},
		{"extra field", good + ".x", t0, false},
		{"leading zero time", strings.Replace(good, ".1700", ".01700", 1), t0, false},
		{"empty", "", t0, false},
	} {
		got, err := VerifyCancel(c.msg, testSecret, c.now, 10*time.Second)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil && !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: %v does not match ErrBadMessage", c.name, err)
		}
		if err == nil && (got.ID != id || !got.Started.Equal(t0)) {
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

// Cancel messages beyond MaxCancelsInFlight are not sent, and counted.
func TestCancelFanInBound(t *testing.T) {
	gate := make(chan struct{})
	ap := newApp()
	earlyB, early := waitFor("early")
	nodes := newService(t, 2, Config{Workers: 4, MaxCancelsInFlight: 1, Sender: &gateSender{gate: gate}}, func(i int) http.Handler { return ap.handler(i) }, nil, earlyB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	for i := range 3 {
		if r := recv(t, send(context.Background(), client, a.url, "t"+strconv.Itoa(i), NewID(), b.url)); r.code != 200 {
			t.Fatalf("%+v", r)
		}
	}
	close(gate)
	await(t, early, "the one cancel message at B")
	a.s.Close()
	// The one message B took counts as sent (or failed, had B's answer
	// been lost).
	if s := a.s.Stats(); s.CancelsShed != 2 || s.CancelsSent+s.CancelsFailed != 1 {
		t.Errorf("A: %+v, want 2 shed, 1 sent", s)
	}
	if s := b.s.Stats(); s.CancelsReceived != 1 {
		t.Errorf("B: %+v, want 1 received", s)
	}
}
