package hedgehttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// stallingRT is an in-memory RoundTripper, for fake time (sockets are not
// part of a synctest bubble): every copy stalls until its context ends or
// release is closed, then answers 200 with an empty body.
type stallingRT struct {
	release chan struct{}
	mu      sync.Mutex
	copies  []string // "copy N: body", in arrival order
}

func (s *stallingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	s.copies = append(s.copies, "copy "+req.Header.Get(hedgehttp.AttemptHeader)+": "+string(body))
	s.mu.Unlock()
	select {
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	case <-s.release:
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

func (s *stallingRT) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.copies...)
}

// A request that stalls far beyond the hedge delay is hedged if it may
// be, and otherwise sent exactly once, however long it stalls. In fake
// time, a stall of an hour passes only once every goroutine is blocked,
// so every hedge that could be due has been sent: "never" is checked
// without waiting for it.
func TestSlowRequestInFakeTime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method      string
		key         string // Idempotency-Key header
		keyedWrites bool
		maxBuf      int64
		noGetBody   bool
		copies      int
	}{
		{"GET", "GET", "", false, 0, false, 2},
		{"POST", "POST", "", false, 0, false, 1},
		{"POST with key, no opt-in", "POST", "k1", false, 0, false, 1},
		{"POST with key and opt-in", "POST", "k1", true, 0, false, 2},
		{"GET with a buffered body", "GET", "", false, 0, true, 2},
		{"GET with a body over the limit", "GET", "", false, 3, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &stallingRT{release: make(chan struct{})}
				h := newHedger(t, hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond)})
				tr, err := hedgehttp.New(rt, h, hedgehttp.Config{HedgeTransport: rt, HedgeKeyedWrites: tc.keyedWrites, MaxBodyBuffer: tc.maxBuf})
				if err != nil {
					t.Fatal(err)
				}
				var body io.Reader = strings.NewReader("body")
				if tc.noGetBody {
					body = struct{ io.Reader }{body}
				}
				req, err := http.NewRequest(tc.method, "http://backend.invalid/x", body)
				if err != nil {
					t.Fatal(err)
				}
				if tc.key != "" {
					req.Header.Set("Idempotency-Key", tc.key)
				}
				done := make(chan error, 1)
				go func() {
					resp, err := tr.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()

				time.Sleep(time.Hour)
				synctest.Wait()
				seen := rt.seen()
				if len(seen) != tc.copies {
					t.Errorf("%d copies sent during an hour's stall (%q), want %d", len(seen), seen, tc.copies)
				}
				for _, c := range seen {
					if !strings.HasSuffix(c, ": body") {
						t.Errorf("a copy carried %q, want the whole body", c)
					}
				}
				close(rt.release)
				if err := <-done; err != nil {
					t.Errorf("RoundTrip: %v", err)
				}
				// The Hedger's timer goroutine outlives its last timer by
				// a short linger: let it pass, so that the goroutine ends
				// inside the bubble.
				time.Sleep(time.Second)
			})
		})
	}
}
