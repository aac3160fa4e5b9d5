package hedgehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/spare"
)

// A hedge that a spare server refuses for want of a worker it may hold to
// the end (409 "Tied-Dropped: no-spare") is no answer: the primary goes
// on and its answer is the request's.
func TestCopyRefusedBySpareServerLeavesThePrimary(t *testing.T) {
	// Three workers, of which copies that cannot be preempted may hold
	// one: a copy with a body holds it, the primary another, and the
	// hedge, whose answer outgrows the buffer, is refused when it must
	// commit.
	l, err := spare.New(spare.Config{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	started, hold := make(chan struct{}), make(chan struct{})
	copies := make(chan string, 4)
	srv := httptest.NewServer(spare.Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			close(started)
			<-hold
			return
		}
		copies <- r.Header.Get(hedgehttp.AttemptHeader)
		if hedgehttp.AttemptIndex(r) == 0 {
			// The primary answers once the server refused the hedge.
			for l.Stats().Refused == 0 && r.Context().Err() == nil {
				time.Sleep(time.Millisecond)
			}
			io.WriteString(w, "primary")
			return
		}
		io.WriteString(w, strings.Repeat("x", spare.MaxBuffer+1))
	})))
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hold", strings.NewReader("a body"))
		req.Header.Set(hedgehttp.AttemptHeader, "1")
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started

	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Millisecond), MaxAttempts: 2, NoBudget: true, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
	tr := newTransport(t, nil, h, hedgehttp.Config{})
	resp := roundTrip(t, tr, newRequest(t, http.MethodGet, srv.URL+"/item", nil))
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != "primary" {
		t.Errorf("got %d %q, want the primary's 200", resp.StatusCode, body)
	}
	close(hold)
	<-done
	close(copies)
	var seen []string
	for c := range copies {
		seen = append(seen, c)
	}
	if len(seen) != 2 {
		t.Errorf("copies sent (their Hedge-Attempt): %q, want the primary and one hedge", seen)
	}
	tr.CloseIdleConnections()
	srv.Client().CloseIdleConnections()
}
