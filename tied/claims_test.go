package tied

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
		{"dead", deadURL, claimTimeout, 0, 5, 3, 2},
		{"dead, no backoff", deadURL, claimTimeout, -1, 5, 5, 0},
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
			defer within(t, "the server at "+ts.URL, func() {
				ts.Close()
				s.Close()
			})
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
		req, _ := http.NewRequest(c.method, n.url+DefaultClaimPath, strings.NewReader(c.body))
		resp, err := client.Do(req)
		if err != nil {
			timedOut(err)
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

// peerPair starts servers A and B on loopback, each the other's only
// peer, with workers each, running ap. B is reached at its base URL plus
// bPath, and serves through wrapB (given B's middleware). The servers
// stop at the test's cleanup.
func peerPair(t *testing.T, ap *app, workers int, bPath string, wrapB func(http.Handler) http.Handler) (a, b *Server, aURL, bURL string) {
	t.Helper()
	bTS := httptest.NewUnstartedServer(nil)
	bURL = "http://" + bTS.Listener.Addr().String() + bPath
	a, err := NewServer(Config{Workers: workers, Secret: testSecret, Peers: []string{bURL + "/"}, ClaimTimeout: claimTimeout})
	if err != nil {
		t.Fatal(err)
	}
	aTS := httptest.NewServer(a.Handler(ap.handler(0)))
	b, err = NewServer(Config{Workers: workers, Secret: testSecret, Peers: []string{aTS.URL}, ClaimTimeout: claimTimeout})
	if err != nil {
		t.Fatal(err)
	}
	bTS.Config.Handler = wrapB(b.Handler(ap.handler(1)))
	bTS.Start()
	t.Cleanup(func() {
		within(t, "the servers at "+aTS.URL+" and "+bURL, func() {
			aTS.Close()
			bTS.Close()
			a.Close()
			b.Close()
		})
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
		d := limit()
		select {
		case r := <-ch:
			if r.code != 200 {
				t.Fatalf("%s: %+v, want 200, started unclaimed", name, r)
			}
		case <-arrived:
			t.Fatalf("%s sent a second claim to the peer while the probe was in flight", name)
		case <-time.After(d):
			t.Fatalf("%s: %s", name, ranOut(d))
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
	d := limit()
	select {
	case <-apps[1].started:
	case r := <-onB:
		t.Fatalf("copy on B: %+v before it started, want it run: its claim at A, which had no copy, was not granted", r)
	case <-time.After(d):
		t.Fatalf("waiting for the copy to start on B: %s", ranOut(d))
	}

	sender := NewHTTPSender(nil, "")
	defer sender.CloseIdleConnections()
	for _, ticket := range []uint64{0, 1 << 63} {
		answer, err := sender.SendClaim(bounded(t), b.url, Claim{ID: id, Ticket: ticket, Sent: time.Now()}.Sign(testSecret))
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
