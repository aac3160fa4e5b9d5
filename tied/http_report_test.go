package tied

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

// Every answer of Handler carries the Server's load report, of the
// requests other than the one answered: an application's answer, a
// refusal's, and a claim's.
func TestHandlerReportsLoad(t *testing.T) {
	s, err := NewServer(Config{Workers: 2, MaxQueue: -1, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	hold := make(chan struct{})
	ts := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	})))
	defer within(t, "the server at "+ts.URL, func() {
		ts.Close()
		s.Close()
	})
	// The held requests end before the server closes, whatever the
	// test's outcome.
	var wg sync.WaitGroup
	release := sync.OnceFunc(func() { close(hold) })
	defer wg.Wait()
	defer release()
	client := newClient(t)
	// get makes a request, and returns its status and load report.
	get := func(method, path, body string) (int, hedge.Load, error) {
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, hedge.Load{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			timedOut(err)
			return 0, hedge.Load{}, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		ld, err := loadreport.Parse(resp.Header.Get(loadreport.Header))
		if err != nil {
			return resp.StatusCode, ld, fmt.Errorf("%s %s: %d without a report: %w", method, path, resp.StatusCode, err)
		}
		return resp.StatusCode, ld, nil
	}
	do := func(method, path, body string) (int, hedge.Load) {
		t.Helper()
		code, ld, err := get(method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		return code, ld
	}

	if code, ld := do(http.MethodGet, "/now", ""); code != http.StatusOK || ld != (hedge.Load{Workers: 2}) {
		t.Errorf("alone: %d with %+v, want 200, idle with 2 workers", code, ld)
	}
	for range 2 {
		wg.Go(func() {
			if code, _, err := get(http.MethodGet, "/hold", ""); err != nil || code != http.StatusOK {
				t.Errorf("held: %d, %v", code, err)
			}
		})
		await(t, started, "a held request to start")
	}
	if code, ld := do(http.MethodGet, "/now", ""); code != http.StatusServiceUnavailable || ld != (hedge.Load{Running: 2, Workers: 2, Done: 1}) {
		t.Errorf("refused: %d with %+v, want 503, 2 running of 2 workers, 1 done", code, ld)
	}
	msg := Claim{ID: NewID(), Ticket: 1, Sent: time.Now()}.Sign(testSecret)
	if code, ld := do(http.MethodPost, DefaultClaimPath, msg); code != http.StatusOK || ld != (hedge.Load{Running: 2, Workers: 2, Done: 1}) {
		t.Errorf("a claim: %d with %+v, want 200, 2 running of 2 workers, 1 done", code, ld)
	}
	release()
	wg.Wait()
	if code, ld := do(http.MethodGet, "/now", ""); code != http.StatusOK || ld != (hedge.Load{Workers: 2, Done: 3}) {
		t.Errorf("after: %d with %+v, want 200, idle, 3 done", code, ld)
	}
}
