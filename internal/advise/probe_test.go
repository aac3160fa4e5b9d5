package advise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProbe probes a real server on loopback: only GETs arrive, one
// unrecorded warm-up plus Count recorded, each latency named by the
// address and timed.
func TestProbe(t *testing.T) {
	var mu sync.Mutex
	methods := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods[r.Method]++
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	s, err := Probe(context.Background(), ProbeOptions{URL: srv.URL + "/item", Rate: MaxProbeRate, Count: 20})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(methods) != 1 || methods["GET"] != 21 {
		t.Errorf("server saw %v, want 21 GETs (one warm-up) and nothing else", methods)
	}
	if s.Len() != 20 || len(s.Replicas) != 20 || len(s.Times) != 20 {
		t.Fatalf("%d latencies, %d replicas, %d times; want 20 each", s.Len(), len(s.Replicas), len(s.Times))
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := range s.Latencies {
		if s.Latencies[i] <= 0 || s.Replicas[i] != addr || s.Times[i].IsZero() {
			t.Fatalf("latency %d: %v on %q at %v", i, s.Latencies[i], s.Replicas[i], s.Times[i])
		}
	}
	if !strings.Contains(strings.Join(s.Notes, " "), "only GET requests") {
		t.Errorf("notes %q should say only GETs were sent", s.Notes)
	}
	// Too small to advise on, and Advise says so.
	if _, err := Advise(context.Background(), s, Options{}); !errors.Is(err, ErrTooSmall) {
		t.Errorf("Advise on 20 latencies: %v, want ErrTooSmall", err)
	}
}

func TestProbeRefuses(t *testing.T) {
	for _, o := range []ProbeOptions{
		{URL: "http://127.0.0.1:1/", Method: "POST"},
		{URL: "http://127.0.0.1:1/", Rate: MaxProbeRate + 1},
		{URL: "http://127.0.0.1:1/", Count: MaxProbeCount + 1},
		{URL: "ftp://x/"},
	} {
		if _, err := Probe(context.Background(), o); !errors.Is(err, ErrProbe) {
			t.Errorf("Probe(%+v): %v, want ErrProbe", o, err)
		}
	}
}

// fakeServer answers every probe request after 1 ms of the bubble's
// clock and records when each was sent.
type fakeServer struct {
	mu   sync.Mutex
	sent []time.Time
}

func (f *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.sent = append(f.sent, time.Now())
	f.mu.Unlock()
	time.Sleep(time.Millisecond)
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

// The probe's rate cap holds for every request it sends, the unrecorded
// warm-up of each resolved address included: on the most addresses a
// probe spreads over, at the highest rate, no two requests go closer
// than 1/rate apart. The clock is testing/synctest's, so the gaps are
// exact.
func TestProbeWarmupKeepsTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fakeServer
		addrs := make([]string, maxProbeAddrs+8)
		for i := range addrs {
			addrs[i] = fmt.Sprintf("10.0.0.%d", i+1)
		}
		o := ProbeOptions{URL: "http://svc.example/item", Rate: MaxProbeRate, Count: 20,
			Resolve:   func(context.Context, string) ([]string, error) { return addrs, nil },
			transport: func(string) http.RoundTripper { return &f }}
		s, err := Probe(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != 20 || len(f.sent) != maxProbeAddrs+20 {
			t.Fatalf("%d latencies from %d requests; want 20 from %d (one warm-up per address)", s.Len(), len(f.sent), maxProbeAddrs+20)
		}
		interval := time.Second / MaxProbeRate
		for i := 1; i < len(f.sent); i++ {
			if gap := f.sent[i].Sub(f.sent[i-1]); gap < interval {
				t.Fatalf("requests %d and %d went %v apart, closer than 1/rate = %v", i-1, i, gap, interval)
			}
		}
	})
}
