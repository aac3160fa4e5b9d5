package loadreport_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

func TestHandlerInvalidConfig(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		name    string
		next    http.Handler
		workers int
		want    string
	}{
		{"no workers", ok, 0, "workers is 0"},
		{"negative workers", ok, -3, "workers is -3"},
		{"nil next", nil, 4, "next handler is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := loadreport.Handler(c.next, c.workers)
			if h != nil || !errors.Is(err, loadreport.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Handler: %v, %v; want nil and an ErrInvalidConfig saying %q", h, err, c.want)
			}
		})
	}
}

// report GETs url and returns the status and the report its answer
// carries.
func report(t *testing.T, c *http.Client, url string) (int, hedge.Load) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	l, err := loadreport.Parse(resp.Header.Get(loadreport.Header))
	if err != nil {
		t.Fatalf("GET %s: %d with %s %q: %v", url, resp.StatusCode, loadreport.Header, resp.Header.Get(loadreport.Header), err)
	}
	return resp.StatusCode, l
}

// Handler reports the requests in flight besides the one answered, the
// excess over workers as queued, and the requests answered.
func TestHandlerCountsTheOthers(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	h, err := loadreport.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			<-release
		}
	}), 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()

	if _, l := report(t, c, srv.URL+"/now"); l != (hedge.Load{Workers: 2}) {
		t.Fatalf("alone: %+v, want idle with 2 workers", l)
	}
	const held = 3
	var wg sync.WaitGroup
	for range held {
		wg.Go(func() {
			if code, _ := report(t, c, srv.URL+"/hold"); code != http.StatusOK {
				t.Errorf("held request: %d", code)
			}
		})
	}
	for range held {
		<-started
	}
	if _, l := report(t, c, srv.URL+"/now"); l != (hedge.Load{Running: 2, Queued: 1, Workers: 2, Done: 1}) {
		t.Errorf("beside %d requests in flight: %+v, want 2 running, 1 queued, 1 done", held, l)
	}
	close(release)
	wg.Wait()
	if _, l := report(t, c, srv.URL+"/now"); l != (hedge.Load{Workers: 2, Done: 2 + held}) {
		t.Errorf("after: %+v, want idle, %d done", l, 2+held)
	}
}

// Every response carries a report, however the handler writes it, set
// before its status; flushing and hijacking still work through the
// writer.
func TestHandlerReportsOnEveryResponse(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/nothing", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "body") })
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		io.WriteString(w, "rest")
	})
	mux.HandleFunc("/controller", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
	})
	mux.HandleFunc("/early", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
	})
	h, err := loadreport.Handler(mux, 4)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	for _, p := range []struct {
		path string
		code int
	}{
		{"/nothing", 200}, {"/status", 418}, {"/error", 503}, {"/write", 200},
		{"/flush", 200}, {"/controller", 200}, {"/early", 201}, {"/not-found", 404},
	} {
		if code, l := report(t, c, srv.URL+p.path); code != p.code || l.Workers != 4 {
			t.Errorf("%s: %d with %+v, want %d with a report of 4 workers", p.path, code, l, p.code)
		}
	}
}

// A handler that hijacks the connection through http.ResponseController
// reaches the server's writer.
func TestWriterHijacks(t *testing.T) {
	h, err := loadreport.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		buf.Flush()
	}), 1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(bufio.NewReader(resp.Body))
	if string(b) != "hijacked" {
		t.Fatalf("got %q, want the hijacker's answer", b)
	}
}

// The Writer reads the load once, when the status is about to be
// written, not before.
func TestWriterReadsTheLoadOnce(t *testing.T) {
	calls := 0
	rec := httptest.NewRecorder()
	w := loadreport.NewWriter(rec, func() hedge.Load { calls++; return hedge.Load{Running: calls, Workers: 1} })
	w.Header().Set("X-Before", "1")
	if calls != 0 {
		t.Fatalf("the load was read %d times before anything was written", calls)
	}
	w.WriteHeader(http.StatusEarlyHints)
	if calls != 0 {
		t.Fatalf("an informational status read the load")
	}
	w.WriteHeader(http.StatusAccepted)
	w.Write([]byte("x"))
	w.Flush()
	w.Finish()
	if calls != 1 {
		t.Fatalf("the load was read %d times, want once", calls)
	}
	if w.Unwrap() != rec {
		t.Fatal("Unwrap does not return the writer wrapped")
	}
	l, err := loadreport.Parse(rec.Header().Get(loadreport.Header)) // the recorder took the 103 for the final status
	if err != nil || l != (hedge.Load{Running: 1, Workers: 1}) {
		t.Fatalf("the recorded report: %+v, %v", l, err)
	}
}

// A file served through the Handler reaches net/http's ReadFrom (its
// sendfile path) with the report set, and arrives whole.
func TestWriterReadFrom(t *testing.T) {
	var _ io.ReaderFrom = (*loadreport.Writer)(nil)
	body := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var usedReadFrom bool
	h, err := loadreport.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		_, usedReadFrom = w.(io.ReaderFrom)
		if _, err := io.Copy(w, f); err != nil {
			t.Error(err)
		}
	}), 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body {
		t.Fatalf("read %d bytes of %d, %v", len(got), len(body), err)
	}
	if !usedReadFrom {
		t.Error("the handler's writer is not an io.ReaderFrom")
	}
	if l, err := loadreport.Parse(resp.Header.Get(loadreport.Header)); err != nil || l.Workers != 2 {
		t.Fatalf("report %q: %+v, %v", resp.Header.Get(loadreport.Header), l, err)
	}
	// With a ReaderFrom below it, the Writer hands the copy to it.
	rf := &readerFromRecorder{ResponseRecorder: httptest.NewRecorder()}
	if n, err := loadreport.NewWriter(rf, func() hedge.Load { return hedge.Load{Workers: 1} }).ReadFrom(strings.NewReader("xyz")); n != 3 || err != nil || !rf.called || rf.Body.String() != "xyz" {
		t.Fatalf("ReadFrom into a ReaderFrom: %d, %v, called %v, %q", n, err, rf.called, rf.Body.String())
	}
	// Without a ReaderFrom below it, the Writer copies.
	rec := httptest.NewRecorder()
	w := loadreport.NewWriter(struct{ http.ResponseWriter }{rec}, func() hedge.Load { return hedge.Load{Workers: 3} })
	if n, err := w.ReadFrom(strings.NewReader("abc")); n != 3 || err != nil || rec.Body.String() != "abc" {
		t.Fatalf("ReadFrom into a plain writer: %d, %v, %q", n, err, rec.Body.String())
	}
	if l, _ := loadreport.Parse(rec.Header().Get(loadreport.Header)); l.Workers != 3 {
		t.Fatalf("no report on a plain writer: %q", rec.Header().Get(loadreport.Header))
	}
}

// readerFromRecorder is a ResponseRecorder with a ReadFrom of its own,
// which records that it was called.
type readerFromRecorder struct {
	*httptest.ResponseRecorder
	called bool
}

func (r *readerFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.called = true
	return io.Copy(r.ResponseRecorder, src)
}

func BenchmarkHandler(b *testing.B) {
	h, err := loadreport.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 8)
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
