package spare

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
	"github.com/tailcut/hedge/loadreport"
)

// MaxBuffer is the most of a copy's answer that Handler holds back; a
// larger answer is sent as it comes, and the copy stops being
// preemptible.
const MaxBuffer = 1 << 20

// Handler runs next through l: a request marked as a hedge copy
// (hedgehttp.AttemptHeader, "Hedge-Attempt: N" with N >= 1) at low
// priority, any other as a primary (see Limiter).
//
// A copy without a request body is a Copy: its answer is held back until
// its handler returns, so that if a primary preempts it (the request's
// context is cancelled, with cause ErrPreempted), nothing of it has been
// sent and the handler runs again later from the start. An answer larger
// than MaxBuffer, or one the handler flushes, is sent as it comes, and the
// copy then runs to the end (see Commit); so is one whose status is 101
// Switching Protocols, which cannot be taken back. A held-back copy's
// informational answers (1xx, such as 103 Early Hints) are dropped, not
// sent ahead of an answer that may never come from this run; its final
// status is kept. A copy with a body, which cannot be read twice, is a
// CopyOnce. The handler must return soon after its context is cancelled,
// as it should for any cancelled request: one that does not holds its
// worker, and the primary waits for it.
//
// A primary refused with ErrQueueFull is answered 503 Service
// Unavailable with "Retry-After: 1". A copy refused, with ErrQueueFull
// (the copies' queue is full) or with ErrNoSpare (a CopyOnce that found
// no worker to spare, or a Copy whose answer would have had to commit
// beyond Config.MaxUnpreemptible), is answered as a tied
// server answers a spare copy that found no free worker: 409 Conflict with
// "Tied-Dropped: no-spare" (tied.DroppedHeader), and nothing of its
// handler's answer. hedgehttp then sends no further copy of the request,
// and its other copies, the primary among them, go on.
//
// Every response carries the Limiter's load report
// (loadreport.Header, "Endpoint-Load-Metrics"), set just before its
// status is written, so that clients whose transport reads it
// (hedgehttp.Transport) see the server's load rather than their own
// requests' alone: the Limiter's Load, less the request answered while
// it holds a worker. A copy's answer held back until its handler returned
// is sent after its worker is released, and reports the load then.
func Handler(l *Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// holding is set while the request holds a worker: its report
		// is of the others. Only this request's handler, which writes
		// the answer, reads and sets it.
		holding := false
		rw := loadreport.NewWriter(w, func() hedge.Load {
			ld := l.Load()
			if holding {
				ld.Running = max(0, ld.Running-1)
			}
			return ld
		})
		kind := Primary
		if wire.AttemptIndex(r) > 0 {
			kind = Copy
			if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
				kind = CopyOnce
			}
		}
		var bw *bufWriter
		err := l.Run(r.Context(), kind, func(ctx context.Context) error {
			holding = true
			defer func() { holding = false }()
			if kind != Copy {
				next.ServeHTTP(rw, r.WithContext(ctx))
				return nil
			}
			bw = &bufWriter{w: rw, ctx: ctx, h: http.Header{}}
			next.ServeHTTP(bw, r.WithContext(ctx))
			return nil
		})
		switch {
		case errors.Is(err, ErrNoSpare), errors.Is(err, ErrQueueFull) && kind != Primary:
			// A copy turned away, for want of a worker it may hold or
			// of room in the copies' queue, is answered alike: a 503
			// with Retry-After would make hedgehttp end the whole
			// request, its primary included.
			// Nothing of the copy was sent (bw dropped it): the answer
			// of a tied server's spare copy that found no free worker.
			rw.Header().Set(wire.TiedDroppedHeader, wire.DroppedNoSpare)
			http.Error(rw, "no spare capacity: no worker to spare for this hedge copy; its primary has the request", http.StatusConflict)
		case errors.Is(err, ErrQueueFull):
			rw.Header().Set("Retry-After", "1")
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		case err == nil && bw != nil:
			bw.finish() // the last run's answer
		}
		rw.Finish()
	})
}

// bufWriter holds a copy's answer back until its handler returns, or
// until it commits to sending it (Commit).
type bufWriter struct {
	w      http.ResponseWriter
	ctx    context.Context
	h      http.Header
	code   int
	buf    bytes.Buffer
	direct bool // committed: writes go to w
	dead   bool // preempted before it could commit: writes are dropped
}

func (b *bufWriter) Header() http.Header {
	if b.direct {
		return b.w.Header()
	}
	return b.h
}

// WriteHeader holds the copy's final status back. An informational
// status (1xx other than 101) is dropped: sent now, it would go ahead of
// an answer that this run may never give. 101 Switching Protocols is
// final and cannot be taken back: it commits the copy, and goes at once.
func (b *bufWriter) WriteHeader(code int) {
	switch {
	case b.direct:
		b.w.WriteHeader(code)
	case b.dead || b.code != 0:
		// After the final status: superfluous, as in net/http.
	case code == http.StatusSwitchingProtocols:
		b.code = code
		b.commit()
	case code >= 100 && code <= 199:
	default:
		b.code = code
	}
}

func (b *bufWriter) Write(p []byte) (int, error) {
	switch {
	case b.direct:
		return b.w.Write(p)
	case b.dead:
		return 0, context.Cause(b.ctx)
	}
	if b.code == 0 {
		b.code = http.StatusOK
	}
	if b.buf.Len()+len(p) > MaxBuffer {
		if !b.commit() {
			return 0, context.Cause(b.ctx)
		}
		return b.w.Write(p)
	}
	return b.buf.Write(p)
}

// Flush sends what the copy wrote so far, committing it.
func (b *bufWriter) Flush() {
	if !b.direct && !b.commit() {
		return
	}
	if f, ok := b.w.(http.Flusher); ok {
		f.Flush()
	}
}

// commit makes the copy unpreemptible and sends what it holds, or
// reports false if a primary preempted it first or Commit refused it
// (ErrNoSpare): its context then says why.
func (b *bufWriter) commit() bool {
	if !Commit(b.ctx) {
		b.dead = true
		return false
	}
	b.send()
	b.direct = true
	return true
}

// send writes the held answer to w.
func (b *bufWriter) send() {
	for k, v := range b.h {
		b.w.Header()[k] = v
	}
	if b.code != 0 {
		b.w.WriteHeader(b.code)
	}
	if b.buf.Len() > 0 {
		_, _ = b.w.Write(b.buf.Bytes())
		b.buf.Reset()
	}
}

// finish sends the answer of a copy that ran to the end.
func (b *bufWriter) finish() {
	if !b.direct && !b.dead {
		b.send()
	}
}
