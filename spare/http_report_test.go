package spare

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

// Every answer of Handler carries the Limiter's load report, of the
// requests other than the one answered: a primary's and a copy's, and a
// refusal's.
func TestHandlerReportsLoad(t *testing.T) {
	l := newLimiter(t, Config{Workers: 2, MaxQueue: -1})
	started := make(chan struct{})
	hold := make(chan struct{})
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			<-hold
		}
		w.Write([]byte("ok"))
	})))
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	report := func(path, attempt string) (int, hedge.Load) {
		t.Helper()
		resp, _ := get(t, c, srv.URL+path, attempt)
		if resp == nil {
			t.FailNow()
		}
		ld, err := loadreport.Parse(resp.Header.Get(loadreport.Header))
		if err != nil {
			t.Fatalf("%s: %d without a report: %v", path, resp.StatusCode, err)
		}
		return resp.StatusCode, ld
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(hold)
	wg.Go(func() { get(t, c, srv.URL+"/hold", "") })
	<-started
	if code, ld := report("/now", ""); code != http.StatusOK || ld != (hedge.Load{Running: 1, Workers: 2}) {
		t.Errorf("a primary beside one held: %d with %+v, want 200, 1 running of 2 workers", code, ld)
	}
	// A copy's answer is held back until it has run, and leaves after its
	// worker is released: it counts in Done.
	if code, ld := report("/now", "1"); code != http.StatusOK || ld != (hedge.Load{Running: 1, Workers: 2, Done: 2}) {
		t.Errorf("a copy beside one held: %d with %+v, want 200, 1 running of 2 workers, 2 done", code, ld)
	}
	wg.Go(func() { get(t, c, srv.URL+"/hold", "") })
	<-started
	if code, ld := report("/now", ""); code != http.StatusServiceUnavailable || ld != (hedge.Load{Running: 2, Workers: 2, Done: 2}) {
		t.Errorf("a primary refused: %d with %+v, want 503, 2 running of 2 workers, 2 done", code, ld)
	}
}
