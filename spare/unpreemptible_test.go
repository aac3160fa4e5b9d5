package spare

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge/tied"
)

// TestUnpreemptibleCopiesLeaveWorkersToPrimaries: copies that cannot be
// preempted hold at most MaxUnpreemptible workers (by default half), and
// a CopyOnce never waits. With two workers and one held by a CopyOnce, a
// second CopyOnce and a Copy that asks to commit are refused, so that
// the other worker stays for a primary, which runs at once.
func TestUnpreemptibleCopiesLeaveWorkersToPrimaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 2})
		var rec recorder
		hold := make(chan struct{})
		ctx := context.Background()
		go l.Run(ctx, CopyOnce, func(context.Context) error { rec.add("once 1"); <-hold; return nil })
		synctest.Wait()

		second := make(chan error, 1)
		go func() {
			second <- l.Run(ctx, CopyOnce, func(context.Context) error { rec.add("once 2"); <-hold; return nil })
		}()
		synctest.Wait()
		select {
		case err := <-second:
			if !errors.Is(err, ErrNoSpare) {
				t.Errorf("a second copy-once: %v, want ErrNoSpare", err)
			}
		default:
			t.Error("a second copy-once took the last worker")
		}

		var cause error
		committing := make(chan error, 1)
		go func() {
			committing <- l.Run(ctx, Copy, func(ctx context.Context) error {
				if Commit(ctx) {
					t.Error("Commit let a second copy hold a worker to the end")
					<-hold
				}
				cause = context.Cause(ctx)
				return nil
			})
		}()
		synctest.Wait()
		select {
		case err := <-committing:
			if !errors.Is(err, ErrNoSpare) || !errors.Is(cause, ErrNoSpare) {
				t.Errorf("a copy refused its commit: Run %v, its context's cause %v; want ErrNoSpare", err, cause)
			}
		default:
			t.Error("a copy that asks to commit waits")
		}

		go l.Run(ctx, Primary, func(context.Context) error { rec.add("primary"); return nil })
		synctest.Wait()
		if got := strings.Join(rec.get(), ", "); got != "once 1, primary" {
			t.Errorf("ran %s, want the first copy-once and, at once, the primary", got)
		}
		if s := l.Stats(); s.Unpreemptible != 1 || s.Refused != 2 || s.Running != 1 {
			t.Errorf("stats %+v: want the first copy-once alone holding a worker, 2 refused", s)
		}
		close(hold)
		synctest.Wait()
		if s := l.Stats(); s.Unpreemptible != 0 || s.Running != 0 {
			t.Errorf("stats %+v after the copy-once ended", s)
		}
	})
}

// TestHandlerRefusesCopiesThatCannotBePreempted runs a real HTTP server
// with two workers, one held by a copy with a request body. A second
// copy with a body, and a copy whose answer outgrows the buffer, are
// answered 409 with "Tied-Dropped: no-spare", nothing of the answer sent;
// a primary is answered at once on the other worker.
func TestHandlerRefusesCopiesThatCannotBePreempted(t *testing.T) {
	l := newLimiter(t, Config{Workers: 2})
	started, hold := make(chan struct{}), make(chan struct{})
	big := strings.Repeat("x", MaxBuffer+1)
	srv := httptest.NewServer(Handler(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			close(started)
			<-hold
		case "/big":
			w.Header().Set("X-Big", "yes")
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	c := srv.Client()
	send := func(path, attempt, body string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body = http.NoBody
		}
		if attempt != "" {
			req.Header.Set("Hedge-Attempt", attempt)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readBody(t, resp)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		send("/hold", "1", "a body")
	}()
	<-started
	for _, tc := range []struct{ name, path, body string }{{"a copy with a body", "/once", "a body"}, {"a copy with a big answer", "/big", ""}} {
		resp, body := send(tc.path, "1", tc.body)
		if !errors.Is(tied.DroppedError(resp), tied.ErrNoSpare) || resp.Header.Get("X-Big") != "" || strings.Contains(body, "x") {
			t.Errorf("%s: %d, %s %q, %d bytes; want 409 no-spare and nothing of the answer", tc.name, resp.StatusCode, tied.DroppedHeader, resp.Header.Get(tied.DroppedHeader), len(body))
		}
	}
	if resp, body := send("/primary", "", ""); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("the primary: %d %q, want 200 ok", resp.StatusCode, body)
	}
	close(hold)
	<-done
	if s := l.Stats(); s.Refused != 2 || s.Preempted != 0 {
		t.Errorf("stats %+v", s)
	}
	c.CloseIdleConnections()
}
