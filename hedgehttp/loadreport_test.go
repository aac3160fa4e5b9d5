package hedgehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/loadreport"
)

// reportingReplicas starts n loopback servers running app behind
// loadreport.Handler with workers workers, and returns their base URLs.
func reportingReplicas(t *testing.T, n, workers int, app http.Handler) []string {
	t.Helper()
	var urls []string
	for range n {
		h, err := loadreport.Handler(app, workers)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls
}

// failPrimaries returns a handler, for every replica of a test, that
// answers the primary of a request to /fail 503, a retryable failure after
// which the Hedger decides on the next copy at once, and anything else
// 200 "ok". The copy after the 503 stands alone and carries no
// Hedge-Attempt, so the primary is told by its turn: the tests send one
// request at a time, each of two copies.
func failPrimaries() http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" && n.Add(1)%2 == 1 {
			http.Error(w, "try another replica", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}
}

// Replicas' load reports reach the Transport on every answer, a failed
// one's included, are counted, and reach the Hedger, whose hedge
// decisions then read a replica's load from its report. The hedge delay
// is an hour, so that no copy goes by the clock and every report counts
// (for a delay) when the next decision reads it: a primary answered 503
// makes the Hedger decide on its hedge at once.
func TestLoadReportsReachTheHedger(t *testing.T) {
	urls := reportingReplicas(t, 2, 4, failPrimaries())
	h := newHedger(t, hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{Replicas: urls})

	// No report yet: the first decision reads the Hedger's own view.
	if body := readAll(t, roundTrip(t, tr, newRequest(t, http.MethodGet, urls[0]+"/fail", nil))); body != "ok" {
		t.Fatalf("first request: %q, want the hedge's ok", body)
	}
	if s := tr.Stats(); s.LoadReports != 2 || s.BadLoadReports != 0 {
		t.Fatalf("after a 503 and a 200, each with a report: %+v, want 2 reports, none bad", s)
	}
	// The hedge went to the other replica, which had not reported.
	if st := h.OpStats(http.MethodGet); st.LoadByReport != 0 || st.LoadByOwnView != 1 {
		t.Fatalf("first hedge decision: %d by report, %d by own view; want 0 and 1", st.LoadByReport, st.LoadByOwnView)
	}

	// Both replicas have reported: the next decision reads a report.
	resp := roundTrip(t, tr, newRequest(t, http.MethodGet, urls[1]+"/fail", nil))
	// The winner's report reaches the caller too, as the server sent it.
	if l, err := loadreport.Parse(resp.Header.Get(loadreport.Header)); err != nil || l.Workers != 4 || l.Done == 0 {
		t.Errorf("the winner's report: %+v, %v; want 4 workers and the requests done", l, err)
	}
	if body := readAll(t, resp); body != "ok" {
		t.Fatalf("second request: %q, want the hedge's ok", body)
	}
	if s := tr.Stats(); s.LoadReports != 4 || s.BadLoadReports != 0 {
		t.Fatalf("after two requests: %+v, want 4 reports, none bad", s)
	}
	if st := h.OpStats(http.MethodGet); st.LoadByReport != 1 || st.LoadByOwnView != 1 {
		t.Fatalf("after the second hedge decision: %d by report, %d by own view; want 1 and 1", st.LoadByReport, st.LoadByOwnView)
	}
}

// A report the Transport cannot read is counted and ignored: the request
// succeeds, and the Hedger reads its own view.
func TestBadLoadReportsAreCountedAndIgnored(t *testing.T) {
	header := make(chan string, 2) // one for each copy of a request
	fail := failPrimaries()
	var urls []string
	for range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := <-header; v != "" {
				w.Header().Set(loadreport.Header, v)
			}
			fail(w, r)
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	h := newHedger(t, hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{Replicas: urls})
	var bad int64
	for _, c := range []struct{ name, header string }{
		{"JSON", `JSON {"cpu_utilization": 0.3}`},
		{"BIN", "BIN CAESDgoIaGVsbG8="},
		{"not ORCA", "busy"},
		{"no '='", "TEXT named_metrics.hedge_running 3"},
		{"negative", "TEXT named_metrics.hedge_running=-1"},
		{"nothing read", "TEXT mem_utilization=0.5"},
		{"none", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			header <- c.header
			resp := roundTrip(t, tr, newRequest(t, http.MethodGet, urls[0]+"/ok", nil))
			if body := readAll(t, resp); resp.StatusCode != http.StatusOK || body != "ok" {
				t.Fatalf("%d %q, want 200 ok", resp.StatusCode, body)
			}
			if c.header != "" {
				bad++
			}
			if s := tr.Stats(); s.LoadReports != 0 || s.BadLoadReports != bad {
				t.Fatalf("%+v, want no report read and %d bad", s, bad)
			}
		})
	}
	// A bad report leaves the decisions to the Hedger's own view.
	header <- "JSON {}"
	header <- "JSON {}"
	if body := readAll(t, roundTrip(t, tr, newRequest(t, http.MethodGet, urls[0]+"/fail", nil))); body != "ok" {
		t.Fatalf("a failed primary: %q, want the hedge's ok", body)
	}
	if st := h.OpStats(http.MethodGet); st.LoadByReport != 0 || st.LoadByOwnView != 1 {
		t.Errorf("%d hedge decisions by report, %d by own view; want 0 and 1", st.LoadByReport, st.LoadByOwnView)
	}
}

// Without Replicas there is no replica to pin a report on: reports are
// not read.
func TestLoadReportsSingleHost(t *testing.T) {
	urls := reportingReplicas(t, 1, 4, failPrimaries())
	h := newHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	tr := newTransport(t, nil, h, hedgehttp.Config{})
	if body := readAll(t, roundTrip(t, tr, newRequest(t, http.MethodGet, urls[0]+"/fail", nil))); body != "ok" {
		t.Fatalf("%q, want the hedge's ok", body)
	}
	if s := tr.Stats(); s.LoadReports != 0 || s.BadLoadReports != 0 {
		t.Fatalf("%+v, want no report read", s)
	}
}
