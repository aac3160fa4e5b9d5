package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// small keeps handler tests fast: 2 runs of 5,000 requests.
const small = "runs=2&requests=5000"

func newTestServer(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, ts *httptest.Server, path string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	return readResponse(t, resp, err)
}

// readResponse reads a whole response, failing t on err or a read error,
// and returns its status, header and body.
func readResponse(t *testing.T, resp *http.Response, err error) (int, http.Header, []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func explore(t *testing.T, ts *httptest.Server, query string) ExploreResponse {
	t.Helper()
	code, h, b := get(t, ts, "/api/explore?"+query)
	if code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", query, code, b)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var r ExploreResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v\n%s", query, err, b)
	}
	return r
}

// A valid request returns measured numbers, a CCDF and a verdict.
func TestExploreValid(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	r := explore(t, ts, small)
	if r.Params.World != "lognormal" || r.Params.Routing != "pool" || r.Params.Strategy != "percentile" {
		t.Errorf("defaults not applied: %+v", r.Params)
	}
	b, h := r.Baseline, r.Hedged
	if !(b.P50 > 0 && b.P50 < b.P95 && b.P95 < b.P99 && b.P99 < b.P999) {
		t.Errorf("baseline percentiles out of order: %+v", b)
	}
	if !(h.P99 < b.P99) || r.Verdict.Tone != "good" || !strings.Contains(r.Verdict.Title, "cuts the p99") {
		t.Errorf("hedging at the quiet-day p95 should help at load 0.5: p99 %v -> %v, verdict %+v", b.P99, h.P99, r.Verdict)
	}
	if !(r.ExtraAttempts > 0.02 && r.ExtraAttempts < 0.15) {
		t.Errorf("extra attempts %v, want about 5%%", r.ExtraAttempts)
	}
	if !(r.Delay > 0) || !strings.Contains(r.DelayNote, "quiet day") {
		t.Errorf("delay %v (%q)", r.Delay, r.DelayNote)
	}
	if len(h.CCDF) < 8 || len(h.RunCCDFs) != 2 {
		t.Fatalf("ccdf %v, %d run ccdfs", h.CCDF, len(h.RunCCDFs))
	}
	for i := 1; i < len(h.CCDF); i++ {
		if !(h.CCDF[i].T > h.CCDF[i-1].T && h.CCDF[i].P < h.CCDF[i-1].P) {
			t.Errorf("ccdf not decreasing: %v", h.CCDF)
		}
	}
	if r.Gap.P99 <= 0 || r.Gap.P99 >= 1 || r.Headline != "p99" {
		t.Errorf("gap %+v headline %s", r.Gap, r.Headline)
	}
	if r.Cached || r.Simulated != 5000+2*2*5000 {
		t.Errorf("first request: cached %v, simulated %d, want 25000 (one calibration run, baseline, hedged)", r.Cached, r.Simulated)
	}
	again := explore(t, ts, small)
	if !again.Cached || again.Simulated != 0 || again.Hedged.P99 != h.P99 {
		t.Errorf("second identical request not served from the cache: %+v", again)
	}
	// A change of strategy reuses the baseline.
	r = explore(t, ts, small+"&strategy=fixed&delay=3")
	if r.Simulated != 2*5000 || r.Baseline.P99 != b.P99 {
		t.Errorf("fixed delay: simulated %d, want 10000 (the baseline is cached)", r.Simulated)
	}
}

// Every strategy and world runs; "none" is the baseline.
func TestExploreStrategies(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, q := range []string{
		"strategy=none", "strategy=fixed&delay=0", "strategy=live&livep=90", "strategy=budget&budget=5",
		"strategy=percentile&p=99.9&calib=load", "strategy=default", "tied=true", "tied=true&help=idle-only&routing=two-choice", "world=stalls&routing=two-choice",
		"world=bigjobs&routing=random", "world=mixed&routing=least-loaded&load=0.3", "world=noise&sigma=0",
	} {
		r := explore(t, ts, small+"&"+q)
		if !(r.Hedged.P99 > 0) || r.Verdict.Tone == "" {
			t.Errorf("%s: p99 %v, verdict %+v", q, r.Hedged.P99, r.Verdict)
		}
		switch q {
		case "strategy=none":
			if r.Verdict.Tone != "baseline" || r.ExtraAttempts != 0 {
				t.Errorf("none: %+v", r.Verdict)
			}
		case "strategy=default":
			if !strings.Contains(r.Config, "strategy=default") || !(r.Delay > 0) || r.Delay != r.Hedged.MeanDelay ||
				!strings.Contains(r.DelayNote, "primary latencies") || !strings.Contains(r.Label, "library default") {
				t.Errorf("default: config %s, delay %v (mean in force %v, %q), label %q", r.Config, r.Delay, r.Hedged.MeanDelay, r.DelayNote, r.Label)
			}
		case "tied=true":
			if r.ExtraAttempts != 1 || !strings.Contains(r.Config, "strategy=tied") {
				t.Errorf("tied: extra attempts %v, config %s", r.ExtraAttempts, r.Config)
			}
		case "tied=true&help=idle-only&routing=two-choice":
			if r.ExtraAttempts != 0 || r.ExtraWork != 0 || !strings.Contains(r.Config, "strategy=tied-spare") || !strings.Contains(r.Label, "spare form") {
				t.Errorf("tied, spare form: extra attempts %v, work %v, config %s, label %q", r.ExtraAttempts, r.ExtraWork, r.Config, r.Label)
			}
		case "world=stalls&routing=two-choice":
			if r.Headline != "p999" {
				t.Errorf("stalls headline %s, want p999", r.Headline)
			}
		case "strategy=fixed&delay=0":
			if !hasKind(r.HeadsUp, "zero-delay") || !hasKind(r.Warnings, "many-hedged") {
				t.Errorf("delay 0: heads-up %v, warnings %v", r.HeadsUp, r.Warnings)
			}
		}
	}
}

func hasKind(ns []Note, kind string) bool {
	for _, n := range ns {
		if n.Kind == kind {
			return true
		}
	}
	return false
}

// Cancellation off at 85% utilisation collapses, and the warning comes
// from the measured numbers; the rule-based heads-up is there too.
func TestExploreCollapseWarning(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	r := explore(t, ts, "runs=2&requests=20000&load=0.85&cancel=false")
	if r.Verdict.Tone != "collapse" || r.Gap.Headline <= collapseRatio {
		t.Fatalf("verdict %+v, p99 ratio %v: want collapse", r.Verdict, r.Gap.Headline)
	}
	if !hasKind(r.Warnings, "collapse") || !hasKind(r.Warnings, "saturated") {
		t.Errorf("warnings %v", r.Warnings)
	}
	if !hasKind(r.HeadsUp, "no-cancel-high-load") {
		t.Errorf("heads-up %v", r.HeadsUp)
	}
	if r.Hedged.HedgedFraction < allHedged {
		t.Errorf("hedged fraction %v, want near 100%%", r.Hedged.HedgedFraction)
	}
	// The same point with cancellation is fine.
	r = explore(t, ts, "runs=2&requests=20000&load=0.85&cancel=true")
	if r.Verdict.Tone == "collapse" || len(r.Warnings) > 0 {
		t.Errorf("with cancellation: %+v, warnings %v", r.Verdict, r.Warnings)
	}
}

// Each invalid parameter gets a 400 whose JSON names it.
func TestExploreInvalid(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tc := range []struct{ query, param, reason string }{
		{"world=mars", "world", "lognormal"},
		{"sigma=5", "sigma", "0 to 3"},
		{"sigma=NaN", "sigma", "not a number"},
		{"load=0", "load", "0.05 to 0.95"},
		{"load=1", "load", "out of range"},
		{"load=abc", "load", "not a number"},
		{"load=0.5&load=0.6", "load", "once"},
		{"routing=magic", "routing", "two-choice"},
		{"strategy=hope", "strategy", "percentile"},
		{"delay=-1", "delay", "0 to 50"},
		{"delay=1e9", "delay", "out of range"},
		{"p=42", "p", "99.9"},
		{"calib=someday", "calib", "quiet"},
		{"livep=10", "livep", "50 to 99.9"},
		{"budget=0", "budget", "0.1 to 100"},
		{"budget=101", "budget", "0.1 to 100"},
		{"cancel=maybe", "cancel", "true or false"},
		{"tied=2", "tied", "true or false"},
		{"runs=0", "runs", "1 to 4"},
		{"runs=5", "runs", "1 to 4"},
		{"requests=10", "requests", "1000 to 200000"},
		{"requests=10000000", "requests", "1000 to 200000"},
		{"requests=200000&runs=4", "requests", "limit of 400000"},
		{"seed=-1", "seed", "whole number"},
		{"frobnicate=1", "frobnicate", "unknown parameter"},
		{"clients=0", "clients", "1 to 100"},
		{"clients=101", "clients", "1 to 100"},
		{"help=maybe", "help", "low-priority"},
		{"help=low-priority&routing=pool", "help", "queue per server"},
		{"help=low-priority&routing=two-choice&tied=true", "help", "idle-only"},
		{"width=0", "width", "1 to 100"},
		{"width=101", "width", "out of range"},
		{"width=4.5", "width", "whole number"},
		{"need=-1", "need", "0 to 100"},
		{"need=2", "need", "more leaves than the width (1): use 0 (all of them) to 1"},
		{"width=4&need=5", "need", "use 0 (all of them) to 4"},
		{"fancall=perhaps", "fancall", "true or false"},
		{"width=40&requests=20000", "requests", "20000 x 40 = 800000 leaves per run exceeds the lab's limit of 200000: lower requests to 5000"},
		{"width=40&requests=5000&runs=4", "requests", "limit of 400000 simulated leaves per point: lower requests to 2500"},
	} {
		code, _, b := get(t, ts, "/api/explore?"+tc.query)
		var e ErrorResponse
		if err := json.Unmarshal(b, &e); err != nil {
			t.Errorf("%s: not JSON: %s", tc.query, b)
			continue
		}
		if code != http.StatusBadRequest || len(e.Params) != 1 || e.Params[0].Param != tc.param ||
			!strings.Contains(e.Params[0].Reason, tc.reason) || !strings.Contains(e.Error, tc.param+": ") {
			t.Errorf("%s: status %d, %+v; want 400 naming %q with %q", tc.query, code, e, tc.param, tc.reason)
		}
	}
	// Several mistakes are reported together.
	code, _, b := get(t, ts, "/api/explore?load=7&world=mars")
	var e ErrorResponse
	json.Unmarshal(b, &e)
	if code != 400 || len(e.Params) != 2 {
		t.Errorf("two bad parameters: %d %s", code, b)
	}
}

// At most MaxConcurrent simulations run; the next request gets a 503 with
// a reason and Retry-After, and succeeds once a slot is free.
func TestConcurrencyLimit(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxConcurrent: 1, QueueWait: -1})
	entered := make(chan struct{})
	hold := make(chan struct{})
	var once sync.Once
	s.testHook = func(context.Context) {
		once.Do(func() {
			close(entered)
			<-hold
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if r := explore(t, ts, small+"&seed=11"); !(r.Hedged.P99 > 0) {
			t.Error("held request returned no numbers")
		}
	})
	<-entered
	code, h, b := get(t, ts, "/api/explore?"+small+"&seed=12")
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !bytes.Contains(b, []byte("limit")) {
		t.Errorf("second simulation while one runs: %d %s (Retry-After %q), want 503", code, b, h.Get("Retry-After"))
	}
	// The drill and the study need no slot.
	if code, _, _ := get(t, ts, "/api/drill"); code != 200 {
		t.Errorf("drill while the slot is taken: %d", code)
	}
	close(hold)
	wg.Wait()
	explore(t, ts, small+"&seed=12")
}

// A waiting request takes the slot when it frees within QueueWait. The
// slot is released only once the second request is known to be waiting,
// so the test exercises the wait on any schedule; QueueWait only bounds a
// hang.
func TestQueueWait(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxConcurrent: 1, QueueWait: 10 * time.Minute})
	entered, hold, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.testHook = func(context.Context) {
		once.Do(func() {
			close(entered)
			<-hold
		})
	}
	s.testWaiting = func() { close(waiting) } // only the second request waits
	var wg sync.WaitGroup
	wg.Go(func() { explore(t, ts, small+"&seed=21") })
	<-entered
	wg.Go(func() { explore(t, ts, small+"&seed=22") }) // waits, then runs
	<-waiting
	close(hold)
	wg.Wait()
}

// The time limit stops a simulation with a 503 that says what to do. The
// hook returns only once the request's deadline has passed, so the
// simulation starts after it on any schedule.
func TestTimeout(t *testing.T) {
	s, ts := newTestServer(t, Options{Timeout: time.Millisecond})
	s.testHook = func(ctx context.Context) { <-ctx.Done() }
	code, _, b := get(t, ts, "/api/explore?"+small)
	if code != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("lower requests or runs")) {
		t.Errorf("status %d: %s", code, b)
	}
}

func TestDrillAPI(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	drill := func(q string) DrillResponse {
		t.Helper()
		code, _, b := get(t, ts, "/api/drill?"+q)
		if code != 200 {
			t.Fatalf("%s: %d %s", q, code, b)
		}
		var r DrillResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		q       string
		outcome string
		p95     float64
		check   func(DrillResponse) bool
	}{
		{"delay=50", "EXCESS LOAD", 146, func(r DrillResponse) bool { return r.Hedges == 20 && r.ExtraLoad == 100 }},
		{"delay=130ms", "TAIL CUT", 226, func(r DrillResponse) bool { return r.ExtraLoad == 15 && r.LoserWorkMs == 684 && r.BaselineP95Ms == 640 }},
		{"delay=500", "TAIL CUT", 595, func(r DrillResponse) bool { return r.Hedges == 2 }},
		{"delay=0", "EXCESS LOAD", 0, func(r DrillResponse) bool { return r.Hedges == 20 }},
		{"delay=50&budget=10", "NO TAIL GAIN", 640, func(r DrillResponse) bool {
			return r.Requests[0].Hedged && r.Requests[1].Hedged && r.Requests[0].Winner == "primary" && r.Requests[1].Winner == "primary"
		}},
		{"delay=130&cancel=false", "TAIL CUT", 226, func(r DrillResponse) bool { return r.LoserWorkMs == 1990 }},
		{"delay=130&op=write", "DUPLICATE WRITES", 226, func(r DrillResponse) bool { return r.Duplicates == 3 }},
		{"delay=130&op=write-key", "TAIL CUT", 226, func(r DrillResponse) bool { return r.Deduplicated == 3 && r.Duplicates == 0 }},
		{"hedge=false", "BASELINE", 640, func(r DrillResponse) bool { return r.Hedges == 0 }},
	} {
		r := drill(tc.q)
		if r.Outcome != tc.outcome || (tc.p95 > 0 && r.P95Ms != tc.p95) || !tc.check(r) {
			t.Errorf("%s: %s, p95 %v; want %s, %v (%+v)", tc.q, r.Outcome, r.P95Ms, tc.outcome, tc.p95, r)
		}
		if len(r.Events) == 0 || r.Events[len(r.Events)-1].AtMs != r.EndMs {
			t.Errorf("%s: trace does not end at end_ms", tc.q)
		}
	}
	for _, tc := range []struct{ query, param string }{
		{"delay=-5", "delay"}, {"delay=abc", "delay"}, {"delay=11s", "delay"}, {"budget=101", "budget"},
		{"budget=x", "budget"}, {"op=delete", "op"}, {"hedge=maybe", "hedge"}, {"cancel=2", "cancel"}, {"speed=2", "speed"},
	} {
		code, _, b := get(t, ts, "/api/drill?"+tc.query)
		var e ErrorResponse
		json.Unmarshal(b, &e)
		if code != 400 || len(e.Params) != 1 || e.Params[0].Param != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.query, code, b, tc.param)
		}
	}
}

func TestStudyAPI(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, _, b := get(t, ts, "/api/study")
	if code != 200 || !bytes.Equal(b, EmbeddedStudy()) {
		t.Errorf("study: %d, %d bytes", code, len(b))
	}
	if code, _, _ := get(t, ts, "/api/study?world=noise"); code != 400 {
		t.Errorf("study with a parameter: %d, want 400", code)
	}
	// --study replaces the embedded copy; a bad file is refused.
	own := []byte(`[{"world":"noise","routing":"two-choice","strategy":"none","load":0.5}]`)
	_, ts2 := newTestServer(t, Options{Study: own})
	if _, _, b := get(t, ts2, "/api/study"); !bytes.Equal(b, own) {
		t.Errorf("study option ignored: %s", b)
	}
	for _, bad := range []string{`{}`, `[]`, `[{"world":"noise"}]`, `not json`} {
		if _, err := New(Options{Study: []byte(bad)}); err == nil {
			t.Errorf("New accepted study %q", bad)
		}
	}
}

// The embedded copy must match the committed study.
func TestEmbeddedStudyIsCurrent(t *testing.T) {
	want, err := os.ReadFile("../../docs/study/results.json")
	if err != nil {
		t.Skipf("no docs/study/results.json to compare with: %v", err)
	}
	if !bytes.Equal(want, EmbeddedStudy()) {
		t.Error("lab/study.json differs from docs/study/results.json: run go generate ./lab")
	}
}

func TestPageAndRoutes(t *testing.T) {
	_, ts := newTestServer(t, Options{DefaultRequests: 20000})
	code, h, b := get(t, ts, "/")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !bytes.Contains(b, []byte(`data-requests="20000"`)) ||
		!bytes.Contains(b, []byte(`data-max-requests="200000" data-max-work="400000"`)) {
		t.Errorf("/: %d %q", code, h.Get("Content-Type"))
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("no CSP: %v", h)
	}
	for path, ct := range map[string]string{
		"/static/style.css": "text/css", "/static/js/app.js": "javascript", "/static/js/explorer.js": "javascript",
		"/static/js/study.js": "javascript", "/static/js/drill.js": "javascript", "/static/js/svg.js": "javascript",
		"/favicon.ico": "image/svg+xml",
	} {
		code, h, _ := get(t, ts, path)
		if code != 200 || !strings.Contains(h.Get("Content-Type"), ct) {
			t.Errorf("%s: %d %q", path, code, h.Get("Content-Type"))
		}
	}
	for path, want := range map[string]int{"/api/nothing": 404, "/static/nope.js": 404} {
		if code, _, _ := get(t, ts, path); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
	resp, err := http.PostForm(ts.URL+"/api/explore", url.Values{"load": {"0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// Every element the scripts look up by id exists in the page, and no
// markup carries an inline style (the CSP forbids it).
func TestPageIDs(t *testing.T) {
	page, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte(" style=")) {
		t.Error("index.html has an inline style attribute, which the CSP blocks")
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bid="([^"]+)"`).FindAllSubmatch(page, -1) {
		ids[string(m[1])] = true
	}
	entries, err := staticFS.ReadDir("static/js")
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\$\('([a-z0-9-]+)'\)`)
	for _, e := range entries {
		js, _ := staticFS.ReadFile("static/js/" + e.Name())
		for _, m := range ref.FindAllSubmatch(js, -1) {
			if !ids[string(m[1])] {
				t.Errorf("%s looks up #%s, which index.html lacks", e.Name(), m[1])
			}
		}
	}
}
