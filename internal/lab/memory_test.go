package lab

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A request whose single run may need more memory than MaxMemory is
// refused with 413 before anything is simulated, naming the limit and
// the most requests that fit.
func TestExploreMemoryLimit(t *testing.T) {
	// MaxRequests and MaxWork would allow a million requests; the
	// default memory limit does not.
	_, ts := newTestServer(t, Options{MaxRequests: 1_000_000, MaxWork: 1_000_000})
	code, _, b := get(t, ts, "/api/explore?runs=1&requests=1000000&strategy=none")
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not JSON: %.300s", b)
	}
	if code != http.StatusRequestEntityTooLarge || len(e.Params) != 1 || e.Params[0].Param != "requests" ||
		!strings.Contains(e.Error, "limit of 160 MiB") || !strings.Contains(e.Error, "lower requests to 209715 or less") {
		t.Errorf("status %d: %s; want 413 naming the 160 MiB limit and 209715 requests", code, b)
	}
	// The largest run that fits is accepted (answered from the limit
	// check alone here: a custom small limit keeps the test fast).
	_, ts = newTestServer(t, Options{MaxMemory: 5000 * runBytesPerRequest})
	if code, _, b := get(t, ts, "/api/explore?runs=1&requests=5001&strategy=none"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("5001 requests over a 5000-request limit: %d %.200s", code, b)
	}
	explore(t, ts, "runs=2&requests=5000&strategy=none")
	// A fan-out's run holds its leaves.
	code, _, b = get(t, ts, "/api/explore?runs=1&requests=1000&width=6&strategy=none")
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "a run of 1000 requests of 6 leaves") ||
		!strings.Contains(string(b), "lower requests to 833 or less") {
		t.Errorf("6,000 leaves over a 5000-request limit: %d %.300s", code, b)
	}
	explore(t, ts, "runs=2&requests=1000&width=5&strategy=none")
}

// The size limits count leaves: a query without requests gets as many as
// fit its width, and one that asks for more is told the most that fit.
func TestExploreFanOutSize(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxRequests: 20_000, MaxWork: 30_000})
	for _, tc := range []struct {
		query    string
		requests int
	}{
		{"runs=1", 15_000}, // DefaultRequests: MaxWork over the page's 2 runs
		{"runs=2", 15_000},
		{"runs=1&width=10", 2000},         // 20,000 leaves a run
		{"runs=2&width=10", 1500},         // 30,000 leaves a point
		{"runs=4&width=100", minRequests}, // the least there is, refused below
	} {
		p, errs := s.parseExplore(tc.query)
		if p.Requests != tc.requests {
			t.Errorf("%s: requests %d (%v), want %d", tc.query, p.Requests, errs, tc.requests)
		}
	}
	r := explore(t, ts, "runs=2&width=10&strategy=none&world=noise")
	if r.Params.Requests != 1500 || r.Simulated != 2*1500 || r.Baseline.Fan == nil || r.Baseline.Fan.Copies != 10 {
		t.Errorf("requests %d, simulated %d, fan %+v: want 2 runs of 1,500 requests of 10 leaves", r.Params.Requests, r.Simulated, r.Baseline.Fan)
	}
	for query, reason := range map[string]string{
		"runs=2&width=10&requests=1501": "2 x 1501 x 10 = 30020 leaves exceeds the lab's limit of 30000 simulated leaves per point: lower requests to 1500 or less",
		"runs=1&width=10&requests=2001": "2001 x 10 = 20010 leaves per run exceeds the lab's limit of 20000: lower requests to 2000 or less",
		"runs=4&width=100":              "1000 x 100 = 100000 leaves per run exceeds the lab's limit of 20000: lower the width: with the least requests, 1000, width may be at most 20",
		"runs=4&width=10":               "4 x 1000 x 10 = 40000 leaves exceeds the lab's limit of 30000 simulated leaves per point: lower runs or the width: with the least requests, 1000, runs x width may be at most 30",
	} {
		code, _, b := get(t, ts, "/api/explore?"+query)
		var e ErrorResponse
		json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || len(e.Params) != 1 || e.Params[0].Param != "requests" || !strings.Contains(e.Params[0].Reason, reason) {
			t.Errorf("%s: %d %s; want 400 naming requests with %q", query, code, b, reason)
		}
	}
}

// The runs of a point run in parallel only as far as MaxMemory allows.
func TestRunWorkers(t *testing.T) {
	s, err := New(Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ requests, runs, want int }{
		{200_000, 2, 1},   // 160 MB a run: one at a time
		{100_000, 2, 2},   // 80 MB a run: both at once
		{100_000, 4, 2},   // still two at a time
		{20_000, 4, 4},    // every run, up to Workers
		{20_000, 1, 1},    // no more workers than runs
		{210_000, 1, 0},   // one run exceeds the limit
		{1_000_000, 1, 0}, // by far
	} {
		if got := s.runWorkers(tc.requests, tc.runs); got != tc.want {
			t.Errorf("runWorkers(%d, %d) = %d, want %d", tc.requests, tc.runs, got, tc.want)
		}
	}
	if got, want := s.MemoryBudget(), int64(2*DefaultMaxMemory+cacheBytes); got != want {
		t.Errorf("MemoryBudget() = %d, want %d", got, want)
	}
}

// After an unstable simulation (hedging without cancellation at 95%
// utilisation holds nearly every request in flight) the server gives the
// memory back to the operating system before the request returns, rather
// than keeping it for the runtime's gradual scavenger. The bound is
// measured on the heap the process holds (HeapSys - HeapReleased), which
// is deterministic once the handler has returned: nothing else in the
// test allocates meanwhile.
func TestExploreReturnsMemory(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.trimAbove = 0 // trim after every simulation, however small
	held := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapSys - m.HeapReleased
	}
	debug.FreeOSMemory()
	before := held()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/explore?runs=2&requests=20000&world=lognormal&sigma=3&load=0.95&strategy=live&livep=50&cancel=false", nil))
	after := held()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	const bound = 8 << 20
	if after > before+bound {
		t.Errorf("the process holds %d MiB of heap after the request, %d MiB more than before: want at most %d MiB more",
			after>>20, (after-before)>>20, bound>>20)
	}
}
