package spare

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"testing"
)

// TestHandlerKeepsTheFinalStatusAfterEarlyHints: a handler that sends
// 103 Early Hints and then 404 answers 404, a copy as the primary does.
// A copy's answer is held back, so its 1xx is not sent ahead of it.
func TestHandlerKeepsTheFinalStatusAfterEarlyHints(t *testing.T) {
	l := newLimiter(t, Config{Workers: 1})
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("X-Final", "yes")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("no such item"))
	})))
	defer srv.Close()
	for _, attempt := range []string{"", "1"} {
		var hints []int
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
				hints = append(hints, code)
				return nil
			},
		}))
		if attempt != "" {
			req.Header.Set("Hedge-Attempt", attempt)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		kind := "primary"
		if attempt != "" {
			kind = "copy"
		}
		if resp.StatusCode != http.StatusNotFound || body != "no such item" || resp.Header.Get("X-Final") != "yes" || resp.Header.Get("Link") == "" {
			t.Errorf("%s: %d %q, header %v; want 404 \"no such item\" with Link and X-Final", kind, resp.StatusCode, body, resp.Header)
		}
		if want := map[string]int{"primary": 1, "copy": 0}[kind]; len(hints) != want {
			t.Errorf("%s: 1xx answers %v, want %d", kind, hints, want)
		}
	}
	srv.Client().CloseIdleConnections()
}

// TestHandlerSendsACopysSwitchingProtocols: 101 Switching Protocols is a
// final status. A copy that writes it commits (see Commit): the 101 goes
// at once, and the copy is no longer preemptible.
func TestHandlerSendsACopysSwitchingProtocols(t *testing.T) {
	l := newLimiter(t, Config{Workers: 1})
	committed := make(chan bool, 1)
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "example")
		w.WriteHeader(http.StatusSwitchingProtocols)
		committed <- !preemptible(r.Context())
	})))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Hedge-Attempt", "1")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "example")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "example" {
		t.Errorf("the copy answered %d %v, want 101 with its Upgrade header", resp.StatusCode, resp.Header)
	}
	if !<-committed {
		t.Error("the copy was still preemptible after its 101")
	}
}

// preemptible reports whether the copy that Run runs with ctx may still
// be preempted.
func preemptible(ctx context.Context) bool {
	r, _ := ctx.Value(runnerKey{}).(*runner)
	if r == nil {
		return false
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return r.preemptible && !r.preempted
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}
