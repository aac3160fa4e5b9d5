package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowTail returns n durations, one per line: about 10ms, with one in 50
// ten times slower, as a slow replica or a pause would make them.
func slowTail(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for range n {
		d := time.Duration((8 + 4*r.Float64()) * float64(time.Millisecond))
		if r.IntN(50) == 0 {
			d *= 10
		}
		fmt.Fprintf(&b, "%v\n", d)
	}
	return b.Bytes()
}

func post(t *testing.T, ts *httptest.Server, query string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(ts.URL+"/api/advise?"+query, "text/plain", bytes.NewReader(body))
	return readResponse(t, resp, err)
}

func errorOf(t *testing.T, b []byte) string {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body is not an ErrorResponse: %v\n%s", err, b)
	}
	return e.Error
}

// A sample with a slow tail gets the report, its chart and a verdict.
func TestAdviseReport(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, h, b := post(t, ts, "percentiles=90,95,99", slowTail(5000))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var r AdviseResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Report, "\nRecommendation\n") {
		t.Errorf("the report lacks its recommendation section:\n%s", r.Report)
	}
	if !strings.HasPrefix(r.SVG, "<svg") && !strings.HasPrefix(r.SVG, "<?xml") {
		t.Errorf("svg does not start an SVG document: %.60q", r.SVG)
	}
	if r.N != 5000 || r.Verdict == "" || r.Queueing {
		t.Errorf("n %d, verdict %q, queueing %v: want 5000, a verdict, no queueing estimate without a load", r.N, r.Verdict, r.Queueing)
	}
	if r.Recommended == nil {
		t.Fatalf("no recommendation for a 2%% tail ten times slower: %s\n%s", r.NoAdvice, r.Report)
	}
	// Without a load no prediction applies the library's rules: the
	// default leads, unpredicted, and the recommendation's figures are
	// plain hedging's.
	if len(r.Headline) < 2 || !strings.HasPrefix(r.Headline[0], "The library's default") || !strings.HasPrefix(r.Verdict, r.Headline[0]) ||
		!strings.HasPrefix(r.Report, r.Headline[0]) || !strings.HasPrefix(r.Headline[1], "Recommended: ") {
		t.Errorf("headline %q, verdict %q; want the default first, then the recommendation, leading the report", r.Headline, r.Verdict)
	}
	if r.Recommended.RulesOn || r.Recommended.P99Ms >= r.TodayP99Ms || r.KeepDefault {
		t.Errorf("recommended %+v, keep the default %v, today's p99 %vms", r.Recommended, r.KeepDefault, r.TodayP99Ms)
	}
}

// With a load the queueing estimate runs, bounded by the server's
// MaxRequests.
func TestAdviseQueueing(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxRequests: 5000})
	code, _, b := post(t, ts, "load=0.4&percentiles=95", slowTail(2000))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var r AdviseResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Queueing || r.QueueRequests != 5000 || !strings.Contains(r.Report, "Queueing, fresh sizes") {
		t.Errorf("queueing %v with %d requests, want 5000:\n%s", r.Queueing, r.QueueRequests, r.Report)
	}
	// The simulation applies the library's rules: the default's line
	// leads, and the recommendation's figures are its Config as the
	// library runs it.
	if len(r.Headline) < 2 || !strings.HasPrefix(r.Headline[0], "The library's default (the zero hedge.Config, delay about") || !strings.Contains(r.Headline[0], "simulated") {
		t.Errorf("headline %q; want the simulated default first", r.Headline)
	}
	if rec := r.Recommended; rec != nil && (!rec.RulesOn || rec.Kind != "queue-fresh") {
		t.Errorf("recommended %+v; want its figures with the rules on, from the fresh queueing estimate", rec)
	}
}

// With send times and the number of replicas, the report has the
// moment-local estimate and its line for the library's default, replayed
// on the sample's occupancy.
func TestAdviseSendTimesAndReplicas(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxRequests: 5000})
	code, _, b := post(t, ts, "format=jsonl&time-field=sent&replicas=3&concurrency=2&objective=p99.9&percentiles=95", timedLines(2000))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var r AdviseResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Independent copies of the moment", "replayed on the sample's own occupancy", "spread at random over 3 replicas", "6 FCFS servers", "judged by the p99.9"} {
		if !strings.Contains(r.Report, want) {
			t.Errorf("the report lacks %q:\n%s", want, r.Report)
		}
	}
}

// timedLines is slowTail(n) as JSON lines with a send time every 10 ms.
func timedLines(n int) []byte {
	var body bytes.Buffer
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, line := range strings.Split(strings.TrimSpace(string(slowTail(n))), "\n") {
		fmt.Fprintf(&body, "{\"sent\":%.6f,\"latency\":%q}\n", float64(t0.Add(time.Duration(i)*10*time.Millisecond).UnixMicro())/1e6, line)
	}
	return body.Bytes()
}

// Each mistake gets its status and a message that says what is wrong.
func TestAdviseErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	bad := append(slowTail(20), "12ms\nfast\n"...)
	for _, c := range []struct {
		name, query string
		body        []byte
		code        int
		want        []string
	}{
		{"too small", "", slowTail(10), 400, []string{"sample too small", "10 latencies", "at least 1000"}},
		{"bad line", "", bad, 400, []string{"line 22", `"fast"`}},
		{"bad load", "load=1.5", slowTail(10), 400, []string{"load", "(0, 1)"}},
		{"one server", "servers=1", slowTail(10), 400, []string{"servers", "2 to 10000"}},
		{"one replica", "replicas=1", slowTail(10), 400, []string{"replicas", "2 to 10000"}},
		{"bad objective", "objective=p50", slowTail(10), 400, []string{"objective", "p99 or p99.9"}},
		{"servers on send times", "format=jsonl&time-field=sent&servers=12", timedLines(2000), 400, []string{"servers is ambiguous", "--replicas"}},
		{"servers not a number", "servers=three", slowTail(10), 400, []string{"servers", `"three"`}},
		{"load not a number", "load=half", slowTail(10), 400, []string{"load", `"half"`}},
		{"bad percentile", "percentiles=95,x", slowTail(10), 400, []string{"percentiles", `"x"`}},
		{"unknown parameter", "lod=0.5", slowTail(10), 400, []string{"lod: unknown parameter"}},
		{"send lag", "send-lag=-1ms", slowTail(10), 400, []string{"send-lag"}},
		{"lag p99 below median", "send-lag=1ms&send-lag-p99=100us", slowTail(2000), 400, []string{"send lag p99"}},
		{"too big", "", bytes.Repeat([]byte("12ms\n"), MaxAdviseBody/5+1), 413, []string{"4 MiB", "hedge advise --in"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, b := post(t, ts, c.query, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %s", code, c.code, b)
			}
			msg := errorOf(t, b)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// /api/advise takes POST only, and the other endpoints GET only, each
// saying so in Allow.
func TestAdviseMethods(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/api/advise", "POST"},
		{"HEAD", "/api/advise", "POST"},
		{"PUT", "/api/advise", "POST"},
		{"POST", "/api/explore", "GET"},
		{"DELETE", "/api/study", "GET"},
	} {
		req, err := http.NewRequest(c.method, ts.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
		}
	}
	code, _, b := get(t, ts, "/api/advise")
	if code != 405 || !strings.Contains(errorOf(t, b), "POST") {
		t.Errorf("GET /api/advise: %d %s", code, b)
	}
}

// A request that finds every simulation slot taken gets 503.
func TestAdviseBusy(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxConcurrent: 1, QueueWait: -1})
	held := make(chan struct{})
	done := make(chan struct{})
	s.testHook = func(ctx context.Context) {
		close(held)
		<-done
	}
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/api/advise?percentiles=95", "text/plain", bytes.NewReader(slowTail(2000)))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-held
	code, h, b := post(t, ts, "percentiles=95", slowTail(2000))
	close(done)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("second request: %d %s", code, b)
	}
	if code := <-first; code != http.StatusOK {
		t.Errorf("first request: %d", code)
	}
}

// parseAdvise never panics, and every refusal names a reason.
func FuzzParseAdvise(f *testing.F) {
	for _, q := range []string{"", "load=0.5", "percentiles=p99,90&delays=20ms", "percentiles=", "unit=ms&format=csv&field=a.b",
		"send-lag=1ms&send-lag-p99=2ms", "load=NaN", "load=1e400", "percentiles=1e309", "delays=-1s", "format=x;y", "%zz"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		_, errs := parseAdvise(q)
		for _, e := range errs {
			if e.Reason == "" {
				t.Errorf("%q: a ParamError without a reason: %+v", q, e)
			}
		}
	})
}

// A histogram's counts say nothing of its size. A 74-byte scrape that
// counts 1e300 observations is refused with a 400 saying what is
// accepted, and one that counts 1e12 is spread into MaxAdviseHistogram
// latencies, with the queueing estimate's requests set by the server's
// bounds, whatever the counts: both bounded by count, so that two such
// uploads cannot hold the slots for seconds.
func TestAdviseHistogramBounds(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxRequests: 5000})
	absurd := []byte("x_bucket{le=\"0.01\"} 1e300\nx_bucket{le=\"0.1\"} 1e300\nx_bucket{le=\"+Inf\"} 1e300\n")
	code, _, b := post(t, ts, "load=0.5", absurd)
	if msg := errorOf(t, b); code != http.StatusBadRequest || !strings.Contains(msg, "1e+300") || !strings.Contains(msg, "at most 2^53") {
		t.Errorf("counts of 1e300: status %d, %q; want 400 saying what is accepted", code, msg)
	}
	big := []byte("x_bucket{le=\"0.01\"} 9.8e11\nx_bucket{le=\"0.1\"} 1e12\nx_bucket{le=\"+Inf\"} 1e12\n")
	code, _, b = post(t, ts, "load=0.5&percentiles=95", big)
	if code != http.StatusOK {
		t.Fatalf("counts of 1e12: status %d: %s", code, b)
	}
	var r AdviseResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.N != MaxAdviseHistogram || !r.Queueing || r.QueueRequests != 5000 {
		t.Errorf("counts of 1e12: %d latencies, queueing %v with %d requests; want %d and 5000", r.N, r.Queueing, r.QueueRequests, MaxAdviseHistogram)
	}
}
