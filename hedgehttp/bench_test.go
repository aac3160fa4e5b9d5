package hedgehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// cannedTransport answers every request in memory with a fresh 200
// response and an empty body.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		Status:     "200 OK",
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Body:       http.NoBody,
		Request:    req,
	}, nil
}

// noHedge wraps base in a Transport whose hedge timer is armed on every
// request and never fires.
func noHedge(tb testing.TB, base http.RoundTripper) *hedgehttp.Transport {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := hedgehttp.New(base, h, hedgehttp.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// TestRoundTripAllocations pins what the Transport adds to a round trip
// when no hedge fires, in allocations: the primary's request
// (req.WithContext), the state its copies share, and the Hedger's two
// (the primary's context and the function that releases it when the body
// is closed).
func TestRoundTripAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocations")
	}
	req, _ := http.NewRequest("GET", "http://backend.invalid/items/1", nil)
	perTrip := func(rt http.RoundTripper) float64 {
		return testing.AllocsPerRun(1000, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	base, hedged := perTrip(cannedTransport{}), perTrip(noHedge(t, cannedTransport{}))
	if extra := hedged - base; extra > 4 {
		t.Errorf("a round trip that does not hedge: %v allocations above the base transport's %v; want at most 4", extra, base)
	}
}

// BenchmarkRoundTrip measures what the Transport adds to a RoundTrip when
// no hedge fires: base is the in-memory transport alone, hedgehttp wraps
// it. The difference is the overhead.
func BenchmarkRoundTrip(b *testing.B) {
	for _, c := range []struct {
		name string
		rt   func(b *testing.B) http.RoundTripper
	}{
		{"base", func(*testing.B) http.RoundTripper { return cannedTransport{} }},
		{"hedgehttp", func(b *testing.B) http.RoundTripper { return noHedge(b, cannedTransport{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt(b)
			req, _ := http.NewRequest("GET", "http://backend.invalid/items/1", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkLoopback sends GETs over keep-alive to a real server on
// 127.0.0.1, with a plain transport and with hedging enabled but never
// firing, and reports the median latency as p50-ns.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	for _, c := range []struct {
		name string
		rt   func(b *testing.B) http.RoundTripper
	}{
		{"plain", func(*testing.B) http.RoundTripper { return &http.Transport{} }},
		{"hedgehttp", func(b *testing.B) http.RoundTripper { return noHedge(b, &http.Transport{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt(b)
			defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			req, _ := http.NewRequest("GET", srv.URL+"/items/1", nil)
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		})
	}
}
