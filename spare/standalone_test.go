package spare

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// waitFor returns once cond holds. It is synchronisation, not a timing
// check: the test's own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// busyReplica is a real HTTP server behind a Limiter whose one worker a
// primary holds, with another primary queued behind it: a replica at
// saturation, as the survivor of a replica that died is.
type busyReplica struct {
	l    *Limiter
	srv  *httptest.Server
	hold chan struct{}
	wg   sync.WaitGroup
}

// newBusyReplica starts a busyReplica. Its handler answers "/x" with
// "x"; before the Limiter, fail503 (if set) may answer 503 instead.
func newBusyReplica(t *testing.T, fail503 func(*http.Request) bool) *busyReplica {
	t.Helper()
	b := &busyReplica{l: newLimiter(t, Config{Workers: 1}), hold: make(chan struct{})}
	started := make(chan struct{})
	inner := Handler(b.l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(started)
			<-b.hold
		}
		io.WriteString(w, r.URL.Path[1:])
	}))
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail503 != nil && fail503(r) {
			http.Error(w, "down for a moment", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	c := b.srv.Client()
	b.wg.Add(2)
	go func() { defer b.wg.Done(); get(t, c, b.srv.URL+"/hold", "") }()
	<-started
	go func() { defer b.wg.Done(); get(t, c, b.srv.URL+"/queued", "") }()
	waitFor(t, "the queued primary", func() bool { return b.l.Stats().QueuedPrimaries == 1 })
	return b
}

// release lets the held primary go.
func (b *busyReplica) release() { close(b.hold) }

// stop waits for both primaries and stops the server.
func (b *busyReplica) stop() {
	b.wg.Wait()
	b.srv.Client().CloseIdleConnections()
	b.srv.Close()
}

// TestStandaloneCopiesRunAsPrimaries sends, through hedgehttp, a request
// whose second copy is its only one: a failover (the first copy's
// connection was refused) or the copy sent at once after a 503. Both
// replicas are saturated spare servers; the copy must queue there as a
// primary, not behind every primary as a hedge copy, where it would wait
// as long as primaries keep coming.
func TestStandaloneCopiesRunAsPrimaries(t *testing.T) {
	for _, tc := range []string{"failover", "after 503"} {
		t.Run(tc, func(t *testing.T) {
			var first atomic.Bool
			first.Store(true)
			var fail503 func(*http.Request) bool
			if tc == "after 503" {
				fail503 = func(r *http.Request) bool { return r.URL.Path == "/x" && first.CompareAndSwap(true, false) }
			}
			a, b := newBusyReplica(t, fail503), newBusyReplica(t, fail503)

			base := &http.Transport{DisableKeepAlives: true}
			if tc == "failover" {
				// The first copy's connection is refused: a real
				// refusal, by a loopback port nobody listens on.
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				closed := lis.Addr().String()
				lis.Close()
				var d net.Dialer
				base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if first.CompareAndSwap(true, false) {
						addr = closed
					}
					return d.DialContext(ctx, network, addr)
				}
			}
			h, err := hedge.New(hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Hour), NoBudget: true, MaxAttempts: 2, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: []string{a.srv.URL, b.srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 1)
			go func() {
				_, body := get(t, &http.Client{Transport: tr}, a.srv.URL+"/x", "")
				done <- body
			}()
			queued := func() (primaries, copies int) {
				for _, r := range []*busyReplica{a, b} {
					s := r.l.Stats()
					primaries += s.QueuedPrimaries
					copies += s.QueuedCopies
				}
				return primaries, copies
			}
			waitFor(t, "the second copy to queue", func() bool { p, c := queued(); return p+c == 3 })
			if p, c := queued(); c != 0 {
				t.Errorf("queued: %d primaries, %d copies: the request's only copy queued as a hedge copy, behind every primary", p, c)
			}
			a.release()
			b.release()
			if body := <-done; body != "x" {
				t.Errorf("the request got %q, want \"x\"", body)
			}
			a.stop()
			b.stop()
			tr.CloseIdleConnections()
		})
	}
}
