package lab

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

// A POST from a page on another origin is refused with 403 before it
// takes a simulation slot: a browser sends a no-cors POST of a text body
// without asking first, so only the headers it adds (Sec-Fetch-Site,
// Origin) tell the lab's own page from another site's. Tools that send
// neither, such as curl, are let through.
func TestAdviseRefusesCrossSitePosts(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	slots := 0
	s.testHook = func(context.Context) { slots++ }
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		name    string
		headers map[string]string
		refused bool
	}{
		{"no headers", nil, false},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL}, false},
		{"typed by the user", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"origin of the lab", map[string]string{"Origin": ts.URL}, false},
		{"cross site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true},
		{"same site, another port", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, true},
		{"another origin, older browser", map[string]string{"Origin": "https://evil.example"}, true},
		{"opaque origin", map[string]string{"Origin": "null"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := slots
			req, err := http.NewRequest("POST", ts.URL+"/api/advise?percentiles=95", bytes.NewReader(slowTail(2000)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "text/plain")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			code, _, b := readResponse(t, resp, err)
			switch {
			case c.refused && (code != http.StatusForbidden || slots != before):
				t.Errorf("status %d, %d slots taken: want 403 and none: %.200s", code, slots-before, b)
			case c.refused:
				if msg := errorOf(t, b); !strings.Contains(msg, "another site") || !strings.Contains(msg, host) {
					t.Errorf("refusal %q should say the request came from another site and where the lab's page is (%s)", msg, host)
				}
			case code != http.StatusOK:
				t.Errorf("status %d, want 200: %.200s", code, b)
			}
		})
	}
}

// The lab's time limit stops the analysis itself, not only the waits
// between simulations: with no load and no queueing estimate, nothing
// simulates, and the analysis must still stop with a 503. The hook
// returns once the request's deadline has passed, so the analysis starts
// after it on any schedule.
func TestAdviseTimeout(t *testing.T) {
	s, ts := newTestServer(t, Options{Timeout: 1})
	s.testHook = func(ctx context.Context) { <-ctx.Done() }
	code, _, b := post(t, ts, "percentiles=90,95,99", slowTail(5000))
	if code != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, b), "analysis took longer than the lab's limit") {
		t.Errorf("status %d: %.200s", code, b)
	}
}
