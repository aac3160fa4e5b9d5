package loadreport

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/tailcut/hedge"
)

// Handler returns net/http middleware for a server that has no queue of
// the toolkit's (spare.Limiter and tied.Server report their own): it
// counts the requests in flight through it and those answered, and sets
// Header on every response, before its status is written, to the load of
// the others: Running the requests in flight besides the one answered, up
// to workers; Queued those beyond workers; Workers workers; and Done the
// requests answered since the handler was made. workers is the requests
// the server runs at once without slowing down. Handler does not limit
// anything: a server that runs more than workers requests at once reports
// the excess as queued, which is what it is to a client choosing where to
// send a copy.
//
// The error, for workers below 1 or a nil next, matches ErrInvalidConfig.
func Handler(next http.Handler, workers int) (http.Handler, error) {
	if next == nil {
		return nil, fmt.Errorf("%w: the next handler is nil: pass the handler whose responses should carry reports", ErrInvalidConfig)
	}
	if workers < 1 {
		return nil, fmt.Errorf("%w: workers is %d: pass the requests the server runs at once without slowing down (at least 1)", ErrInvalidConfig, workers)
	}
	c := &counter{next: next, workers: workers}
	c.loadFn = c.load
	return c, nil
}

// counter is Handler's middleware.
type counter struct {
	next     http.Handler
	workers  int
	loadFn   func() hedge.Load // c.load, made once
	inFlight atomic.Int64
	done     atomic.Int64
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.inFlight.Add(1)
	defer func() {
		c.inFlight.Add(-1)
		c.done.Add(1)
	}()
	rw := NewWriter(w, c.loadFn)
	c.next.ServeHTTP(rw, r)
	rw.Finish()
}

// load is the load of the requests in flight other than the one
// answered.
func (c *counter) load() hedge.Load {
	others := max(0, int(c.inFlight.Load())-1)
	return hedge.Load{
		Running: min(others, c.workers),
		Queued:  max(0, others-c.workers),
		Workers: c.workers,
		Done:    c.done.Load(),
	}
}

// Writer is an http.ResponseWriter that sets Header on its response, to
// the load that a function returns, just before the status is written: at
// the first WriteHeader with a final status (1xx other than 101 are
// informational, and pass without a report), Write or Flush, or at Finish
// if the handler wrote nothing. Server middleware wraps the handler's
// writer in one (Handler, spare.Handler and tied.Server.Handler do), so
// that the load is read as the answer leaves, not when the request
// arrived.
//
// It implements http.Flusher, io.ReaderFrom and Unwrap, so that
// http.ServeContent and io.Copy keep net/http's sendfile path and
// http.ResponseController
// reaches the writer it wraps for Flush, Hijack, SetReadDeadline,
// SetWriteDeadline and EnableFullDuplex. Like any ResponseWriter, it is
// not safe for concurrent use.
type Writer struct {
	w    http.ResponseWriter
	load func() hedge.Load
	sent bool // the report is set
}

// NewWriter returns a Writer that writes to w, with the report of load,
// which it calls once, when the status is about to be written.
func NewWriter(w http.ResponseWriter, load func() hedge.Load) *Writer {
	return &Writer{w: w, load: load}
}

// report sets the report, once.
func (w *Writer) report() {
	if !w.sent {
		w.sent = true
		Set(w.w.Header(), w.load())
	}
}

// Header returns the header map of the writer it wraps.
func (w *Writer) Header() http.Header { return w.w.Header() }

// WriteHeader sets the report, unless code is informational (1xx other
// than 101 Switching Protocols), and writes the status.
func (w *Writer) WriteHeader(code int) {
	if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
		w.report()
	}
	w.w.WriteHeader(code)
}

// Write sets the report if the status is not yet written, and writes p.
func (w *Writer) Write(p []byte) (int, error) {
	w.report()
	return w.w.Write(p)
}

// ReadFrom sets the report if the status is not yet written, and copies
// r to the writer it wraps, through that writer's own ReadFrom when it
// has one: net/http's sends a file with sendfile, which a wrapper
// without ReadFrom would turn into a copy through a buffer.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	w.report()
	if rf, ok := w.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.w, r)
}

// Flush sets the report if the status is not yet written, and flushes
// the writer it wraps, if it can.
func (w *Writer) Flush() { _ = w.FlushError() }

// FlushError is Flush, returning the error of the writer it wraps
// (http.ErrNotSupported if it cannot flush): http.ResponseController
// calls it.
func (w *Writer) FlushError() error {
	w.report()
	return http.NewResponseController(w.w).Flush()
}

// Unwrap returns the writer it wraps, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.w }

// Finish sets the report if nothing set it yet: middleware calls it
// when the handler returns, so that a response with nothing written (an
// implicit 200 with no body) carries one too.
func (w *Writer) Finish() { w.report() }
