package dedup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxRequestBody bounds the request bodies read to fingerprint
	// a keyed request.
	DefaultMaxRequestBody = 1 << 20
	// DefaultMaxStoredBody bounds the response bodies stored for replay.
	DefaultMaxStoredBody = 64 << 10
)

// DefaultStoredHeaders are the response headers stored with an outcome
// and replayed: those that describe the body, the resource the write made,
// or when to come back (Retry-After, Link). Set-Cookie and other
// per-response or credential headers are left out on purpose.
var DefaultStoredHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Location", "Content-Location", "ETag", "Last-Modified", "Cache-Control", "Expires", "Vary",
	"Retry-After", "Link",
}

// DefaultKeep is the default of Config.Keep: it keeps the responses that
// say the write was done (2xx) or redirect to its result (3xx), and
// nothing else. A 4xx refused the request without doing it (bad input,
// no or expired credentials, a rate limit, a timeout, a conflict), and a
// 5xx is taken to mean the write did not happen: a retry with the same
// key runs the handler again, with its fresh credentials, after its
// Retry-After, rather than being answered the refusal for the TTL.
func DefaultKeep(status int) bool { return status >= 200 && status < 400 }

// cleanupTimeout bounds the store calls made after the request's context
// has ended (storing the outcome, releasing a claim).
const cleanupTimeout = 5 * time.Second

// Config configures the HTTP middleware. The zero value deduplicates with
// an in-memory store and the defaults.
type Config struct {
	// Store keeps the claims and outcomes. Nil means a new MemoryStore
	// with default bounds, which deduplicates the copies that reach this
	// process only.
	Store Store
	// Options sets the lease, the TTL of outcomes and the polling pause
	// of waiting copies; see Options.
	Options
	// MaxKeyLen bounds the key. Zero means DefaultMaxKeyLen.
	MaxKeyLen int
	// MaxRequestBody bounds the body of a keyed request, which is read
	// whole to fingerprint it; a longer one is refused with 413. Zero
	// means DefaultMaxRequestBody.
	MaxRequestBody int64
	// MaxStoredBody bounds the response body stored for replay. A longer
	// response is sent to the client that ran the handler, and only a
	// marker is stored: later copies get 409. Zero means
	// DefaultMaxStoredBody.
	MaxStoredBody int
	// StoredHeaders names the response headers stored and replayed. Nil
	// means DefaultStoredHeaders.
	StoredHeaders []string
	// Scope returns the namespace of a request's key, such as the
	// authenticated account, so that two clients picking the same key do
	// not share an outcome. Nil means DefaultScope: a hash of the
	// credentials the request carries (Authorization, Cookie, the TLS
	// client certificate), not the Host. A Scope that returns a constant
	// makes one namespace for all.
	Scope func(*http.Request) string
	// RequireKey refuses a request without an idempotency key with 400
	// Bad Request, unless its method is safe (GET, HEAD, OPTIONS,
	// TRACE), as the IETF draft on the Idempotency-Key header lets a
	// resource require one. False lets requests without a key pass
	// through untouched.
	RequireKey bool
	// Keep reports whether a response with this status is stored and
	// replayed. A response that is not kept releases the claim, so that a
	// retry runs the handler again. Nil means DefaultKeep: 2xx and 3xx
	// only. A Keep that keeps a refusal makes every retry for the TTL
	// get it; never keep 401, 403, 408 or 429, which a retry is meant to
	// get past.
	Keep func(status int) bool
}

// Handler is the HTTP middleware: it runs its handler once per
// idempotency key and replays the outcome to every later copy. Make one
// with New; it is safe for concurrent use.
type Handler struct {
	next      http.Handler
	c         *Coordinator
	maxKey    int
	maxReq    int64
	maxStored int
	headers   []string
	scope     func(*http.Request) string
	keep      func(int) bool
	require   bool
}

// New returns the middleware over next. The error lists every mistake in
// cfg.
func New(next http.Handler, cfg Config) (*Handler, error) {
	var errs []error
	if next == nil {
		errs = append(errs, errors.New("dedup: the next http.Handler is nil"))
	}
	if cfg.MaxKeyLen < 0 || cfg.MaxRequestBody < 0 || cfg.MaxStoredBody < 0 {
		errs = append(errs, errors.New("dedup: MaxKeyLen, MaxRequestBody and MaxStoredBody must not be negative; zero means the default"))
	}
	store := cfg.Store
	if store == nil {
		store = NewMemoryStore(MemoryOptions{})
	}
	c, err := NewCoordinator(store, cfg.Options)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := &Handler{
		next:      next,
		c:         c,
		maxKey:    cfg.MaxKeyLen,
		maxReq:    cfg.MaxRequestBody,
		maxStored: cfg.MaxStoredBody,
		headers:   cfg.StoredHeaders,
		scope:     cfg.Scope,
		keep:      cfg.Keep,
		require:   cfg.RequireKey,
	}
	if h.maxKey == 0 {
		h.maxKey = DefaultMaxKeyLen
	}
	if h.maxReq == 0 {
		h.maxReq = DefaultMaxRequestBody
	}
	if h.maxStored == 0 {
		h.maxStored = DefaultMaxStoredBody
	}
	if h.headers == nil {
		h.headers = DefaultStoredHeaders
	}
	if h.keep == nil {
		h.keep = DefaultKeep
	}
	if h.scope == nil {
		h.scope = DefaultScope
	}
	return h, nil
}

// Coordinator returns the middleware's Coordinator.
func (h *Handler) Coordinator() *Coordinator { return h.c }

// ServeHTTP implements http.Handler; the package doc describes what it
// does.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, err := KeyFromHeader(r.Header, h.maxKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if key == "" {
		if h.require && !safeMethod(r.Method) {
			http.Error(w, "dedup: this resource requires an "+HeaderKey+" header: send a unique key per operation, such as a UUID, and the same key with every retry", http.StatusBadRequest)
			return
		}
		h.next.ServeHTTP(w, r)
		return
	}
	body, err := readBody(r, h.maxReq)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), status)
		return
	}
	fp := FingerprintOf([]byte(r.Method), []byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body)
	storeKey := ScopedKey(h.scope(r), key)
	cl, err := h.c.Acquire(r.Context(), storeKey, fp)
	if err != nil {
		refuse(w, err)
		return
	}
	if !cl.Won {
		replay(w, cl.Existing.Outcome)
		return
	}
	h.run(w, r, cl, body)
}

// run runs the handler under the claim, renewing its lease meanwhile, and
// answers. The handler runs once: if the claim was lost while it ran, the
// outcome stored by the copy that took over is replayed instead of its
// response (see Coordinator.Settle).
func (h *Handler) run(w http.ResponseWriter, r *http.Request, cl Claim, body []byte) {
	ctx := r.Context()
	rec := &recorder{w: w, max: h.maxStored, header: w.Header().Clone()}
	finished := false
	stop := h.c.KeepAlive(ctx, cl)
	defer func() {
		stop()
		if !finished {
			// The handler panicked (or called runtime.Goexit): its work
			// is unknown, most likely unfinished, so the claim is
			// released for a retry. The panic goes on to net/http.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			_ = h.c.Release(cctx, cl)
		}
	}()
	r2 := r.WithContext(WithClaim(ctx, cl))
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r2.ContentLength = int64(len(body))
	h.next.ServeHTTP(rec, r2)
	finished = true
	stop()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	status := rec.statusCode()
	// A handler that returned completed its work, whether or not its
	// client is still there and whether or not it wrote a response (an
	// implicit 200): its claim is kept unless Keep rejects the status.
	if !h.keep(status) {
		// Not kept: the claim is given up. If it was lost while the
		// handler ran (the handler may be answering that loss), the copy
		// that took over has the committed outcome: answer with it.
		if final, replayed := h.c.Yield(cctx, cl); replayed && !rec.passthrough {
			replay(w, final)
			return
		}
		rec.flush()
		return
	}
	out := Outcome{Status: status, Header: http.Header{}}
	for _, name := range h.headers {
		if vs := rec.header.Values(name); len(vs) > 0 {
			out.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if rec.passthrough {
		out.TooLarge = true
	} else {
		out.Body = rec.buf.Bytes()
	}
	final, replayed, _ := h.c.Settle(cctx, cl, out)
	if replayed && !rec.passthrough {
		// The claim was lost while the handler ran, and another copy's
		// outcome is the committed one: answer with it.
		replay(w, final)
		return
	}
	// Stored, or the store failed after the handler ran: the client is
	// told what happened either way; in the second case the claim ends
	// with its lease.
	rec.flush()
}

// safeMethod reports the methods that RequireKey lets through without a
// key: those that do not write (RFC 9110, section 9.2.1).
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// refuse answers a request that cannot run.
func refuse(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrFingerprintMismatch):
		http.Error(w, err.Error()+": use a new key for a different request", http.StatusUnprocessableEntity)
	case errors.Is(err, ErrStoreUnavailable):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default: // ErrInProgress
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error()+": retry with the same key later", http.StatusConflict)
	}
}

// replay answers with a stored outcome.
func replay(w http.ResponseWriter, out Outcome) {
	w.Header().Set(HeaderReplayed, "true")
	if out.TooLarge {
		http.Error(w, ErrOutcomeTooLarge.Error(), http.StatusConflict)
		return
	}
	for k, vs := range out.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out.Body)))
	w.WriteHeader(out.Status)
	_, _ = w.Write(out.Body)
}

var errBodyTooLarge = errors.New("dedup: the request body of a keyed request is too large to fingerprint")

// readBody reads the whole request body, up to max bytes.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("dedup: reading the request body: %w", err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w (over %d bytes)", errBodyTooLarge, max)
	}
	return b, nil
}

// recorder buffers the handler's response until the outcome is stored,
// up to max bytes of body; beyond that it sends what it has and passes the
// rest through (passthrough), and only a marker is stored.
type recorder struct {
	w           http.ResponseWriter
	max         int
	header      http.Header
	status      int
	wrote       bool // WriteHeader or Write was called
	buf         bytes.Buffer
	passthrough bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.wrote {
		return
	}
	if code >= 100 && code < 200 {
		return // informational responses are not stored
	}
	r.wrote = true
	r.status = code
}

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if r.passthrough {
		return r.w.Write(p)
	}
	if r.buf.Len()+len(p) <= r.max {
		return r.buf.Write(p)
	}
	r.passthrough = true
	r.writeHeader()
	if _, err := r.w.Write(r.buf.Bytes()); err != nil {
		return 0, err
	}
	r.buf.Reset()
	return r.w.Write(p)
}

// writeHeader sends the recorded header and status.
func (r *recorder) writeHeader() {
	dst := r.w.Header()
	for k := range dst {
		delete(dst, k)
	}
	for k, vs := range r.header {
		dst[k] = vs
	}
	r.w.WriteHeader(r.statusCode())
}

// flush sends the buffered response, if it was not passed through.
func (r *recorder) flush() {
	if r.passthrough {
		return
	}
	r.writeHeader()
	if r.buf.Len() > 0 {
		_, _ = r.w.Write(r.buf.Bytes())
	}
}

// Flush sends buffered data only once the response is passed through:
// until then it must stay unsent in case the claim is lost.
func (r *recorder) Flush() {
	if r.passthrough {
		_ = http.NewResponseController(r.w).Flush()
	}
}

// Hijack is refused: a hijacked connection has no outcome to store.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("dedup: a keyed request cannot hijack the connection")
}
