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
