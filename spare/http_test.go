package spare

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/tied"
)

func get(t *testing.T, c *http.Client, url string, attempt string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	if attempt != "" {
		req.Header.Set(hedgehttp.AttemptHeader, attempt)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp, string(b)
}

// TestHandlerPreemptsAndReplaysACopy runs a real HTTP server with one
// worker: a copy that holds it is preempted by a primary, nothing of its
// first run reaches the client, and its second run's answer does.
func TestHandlerPreemptsAndReplaysACopy(t *testing.T) {
	l := newLimiter(t, Config{Workers: 1})
	started := make(chan struct{})
	var copyRuns atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) {
		if copyRuns.Add(1) == 1 {
			w.Header().Set("X-Run", "1")
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte("partial "))
			close(started)
			<-r.Context().Done() // holds the worker until preempted
			return
		}
		w.Header().Set("X-Run", "2")
		w.Write([]byte("whole"))
	})
	mux.HandleFunc("/primary", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("primary"))
	})
	srv := httptest.NewServer(Handler(l, mux))
	defer srv.Close()
	c := srv.Client()

	type answer struct {
		resp *http.Response
		body string
	}
	copyDone := make(chan answer, 1)
	go func() {
		resp, body := get(t, c, srv.URL+"/copy", "1")
		copyDone <- answer{resp, body}
	}()
	<-started
	if _, body := get(t, c, srv.URL+"/primary", ""); body != "primary" {
		t.Fatalf("primary answered %q", body)
	}
	a := <-copyDone
	if a.resp == nil {
		t.Fatal("the copy got no answer")
	}
	if a.body != "whole" || a.resp.StatusCode != http.StatusOK || a.resp.Header.Get("X-Run") != "2" {
		t.Fatalf("the copy got %d %q with X-Run %q: want 200 \"whole\" from its second run, nothing of its first",
			a.resp.StatusCode, a.body, a.resp.Header.Get("X-Run"))
	}
	if s := l.Stats(); s.Preempted != 1 || s.Reruns != 1 || s.Primaries != 1 || s.Copies != 1 {
		t.Fatalf("stats %+v", s)
	}
	c.CloseIdleConnections()
}

// TestHandlerSendsALargeCopyAsItComes checks that a copy whose answer
// outgrows the buffer is sent, whole, and runs to the end.
func TestHandlerSendsALargeCopyAsItComes(t *testing.T) {
	l := newLimiter(t, Config{Workers: 1})
	big := strings.Repeat("x", MaxBuffer+10)
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", "yes")
		io.WriteString(w, big[:MaxBuffer/2])
		io.WriteString(w, big[MaxBuffer/2:])
	})))
	defer srv.Close()
	resp, body := get(t, srv.Client(), srv.URL, "1")
	if resp == nil || body != big || resp.Header.Get("X-Big") != "yes" {
		t.Fatalf("got %d bytes, want %d with its header", len(body), len(big))
	}
	srv.Client().CloseIdleConnections()
}

// TestHandlerRefusesWhenFull answers a primary 503 with Retry-After when
// the queue is full, and a copy 409 with Tied-Dropped: no-spare.
func TestHandlerRefusesWhenFull(t *testing.T) {
	l := newLimiter(t, Config{Workers: 1, MaxQueue: -1})
	hold := make(chan struct{})
	started := make(chan struct{})
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(started)
			<-hold
		}
	})))
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		get(t, srv.Client(), srv.URL+"/hold", "")
	}()
	<-started
	resp, _ := get(t, srv.Client(), srv.URL+"/other", "")
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a request with no worker and no queue: %v", resp)
	}
	// A copy turned away is answered as one with no spare worker, never
	// with the 503 that would end its whole request, primary included.
	resp, _ = get(t, srv.Client(), srv.URL+"/other", "1")
	if resp == nil || resp.StatusCode != http.StatusConflict || resp.Header.Get(tied.DroppedHeader) != tied.DroppedNoSpare || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("a copy with no worker and no queue: %v", resp)
	}
	close(hold)
	<-done
	srv.Client().CloseIdleConnections()
}
