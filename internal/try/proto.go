package try

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// The protocols of a run, as Result.Protocol names them.
const (
	ProtocolHTTP  = "http"
	ProtocolGRPC  = "grpc"
	ProtocolRedis = "redis"
)

// protocol is what differs between an HTTP, a gRPC and a Redis run: how
// an arm's client is made, and how it sends one request. Everything else
// (pacing, arm assignment, back-off, timing, the bootstrap and the
// verdicts) is the engine's, the same for all.
type protocol interface {
	// newClient returns the client of one arm, hedging with a Hedger of
	// its own made from cfg (Replicas not yet set), over connections of
	// its own.
	newClient(cfg hedge.Config) (sender, error)
	// requests returns how many distinct requests are sent in turn, and
	// how many of them use each method.
	requests() (int, map[string]int)
	// close releases what the protocol itself holds (not the clients).
	close()
}

// sender is one arm's client.
type sender interface {
	// send sends the run's request i (the distinct requests taken in
	// turn) and says how it went. Each copy is recorded in the trace ctx
	// carries (traceKey), the copy that answered marked won. ctx ends at
	// the request's timeout.
	send(ctx context.Context, i int) outcome
	// close releases the client's connections, once every send returned.
	close()
	// hedger is the arm's Hedger, whose Stats say why hedges were not sent.
	hedger() *hedge.Hedger
}

// outcome is how one request went.
type outcome struct {
	// status is the answer's status ("200", "OK", "NOT_FOUND", "nil"),
	// empty when there was no answer.
	status string
	// kind is kindOK or the kind of error.
	kind string
	// answered marks a request whose latency counts: an answer of any
	// status, or a timeout.
	answered bool
	// pushback marks a service asking for less load; retryAfter is how
	// long it asked for nothing (0: not said).
	pushback   bool
	retryAfter time.Duration
}

// record is what one request did.
type record struct {
	arm      int
	intended time.Duration // since the start
	latency  time.Duration // from the intended start to the end of the answer
	lag      time.Duration // from the intended start to the request's start
	status   string
	kind     string
	answered bool
	hedges   int  // hedge copies sent
	hedgeWon bool // a hedge copy answered first
	winner   int  // replica of the copy that answered, -1 if none
	copies   []copyRec
}

// copyRec is one copy of a request, as seen below the hedging client.
type copyRec struct {
	replica, index int
	dur            time.Duration // until its answer (response headers for HTTP), or its error
	resp           *http.Response
	failed         bool // no answer: an error without one, or cancelled
	ok             bool // a successful answer, one that may win
	won            bool // the answer the request returned
	start          time.Time
	done           bool
}

// trace collects the copies of one request.
type trace struct {
	mu     sync.Mutex
	copies []copyRec
}

type traceKey struct{}

// traceOf returns the trace ctx carries, or nil.
func traceOf(ctx context.Context) *trace {
	tr, _ := ctx.Value(traceKey{}).(*trace)
	return tr
}

// add records a finished copy.
func (t *trace) add(c copyRec) {
	c.done = true
	t.mu.Lock()
	t.copies = append(t.copies, c)
	t.mu.Unlock()
}

// begin records a copy as it starts, its index the number of copies begun
// before it, and returns its slot for end.
func (t *trace) begin(replica int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.copies = append(t.copies, copyRec{replica: replica, index: len(t.copies), start: time.Now()})
	return len(t.copies) - 1
}

// end records the end of the copy in slot.
func (t *trace) end(slot int, failed, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &t.copies[slot]
	c.dur, c.failed, c.ok, c.done = time.Since(c.start), failed, ok, true
}

// markFirstOK marks as won the copy that finished first with a successful
// answer (copies added by add are in the order they finished; those of
// begin and end are ordered by their ends).
func (t *trace) markFirstOK() {
	t.mu.Lock()
	defer t.mu.Unlock()
	best := -1
	for i, c := range t.copies {
		if !c.done || !c.ok {
			continue
		}
		if best < 0 || (!c.start.IsZero() && c.start.Add(c.dur).Before(t.copies[best].start.Add(t.copies[best].dur))) {
			best = i
		}
	}
	if best >= 0 {
		t.copies[best].won = true
	}
}

// snapshot returns the copies as they are now, a copy still running
// counted until now and as failed (a loser the client reaps in the
// background, after the request returned).
func (t *trace) snapshot() []copyRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.copies)
	for i := range out {
		out[i].resp = nil // keep no response alive
		if !out[i].done {
			out[i].dur, out[i].failed = time.Since(out[i].start), true
		}
	}
	return out
}

// httpProto sends the targets to HTTP replicas through hedgehttp.
type httpProto struct {
	o          *Options
	origins    map[origin]bool
	replicaIdx map[string]int // host:port in normal form: index
	firstURL   string         // the base URL requests are addressed to
}

func newHTTP(o *Options) *httpProto {
	p := &httpProto{o: o, origins: map[origin]bool{}, replicaIdx: map[string]int{}}
	for i, s := range o.Replicas {
		or, _ := parseOrigin(s) // Validate checked
		p.origins[or] = true
		p.replicaIdx[or.hostport] = i
	}
	p.firstURL = strings.TrimSuffix(o.Replicas[0], "/")
	return p
}

func (p *httpProto) requests() (int, map[string]int) {
	m := map[string]int{}
	for _, t := range p.o.Targets {
		m[t.method()]++
	}
	return len(p.o.Targets), m
}

func (p *httpProto) close() {}

// countingTransport records each copy of a request in the request's trace
// and passes it on.
type countingTransport struct {
	base     http.RoundTripper
	replicas map[string]int // host:port in normal form: index
}

// RoundTrip sends one copy through the base transport and records it.
func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.base.RoundTrip(req)
	if tr := traceOf(req.Context()); tr != nil {
		idx, known := c.replicas[originOf(req.URL).hostport]
		if !known {
			idx = -1
		}
		tr.add(copyRec{replica: idx, index: hedgehttp.AttemptIndex(req), dur: time.Since(start), resp: resp, failed: err != nil})
	}
	return resp, err
}

// httpClient is the client of one arm: hedgehttp with its own Hedger and
// connection pool, over a counting transport.
type httpClient struct {
	p      *httpProto
	h      *hedge.Hedger
	client *http.Client
	base   *http.Transport
}

func (p *httpProto) newClient(cfg hedge.Config) (sender, error) {
	cfg.Replicas = len(p.o.Replicas)
	h, err := hedge.New(cfg)
	if err != nil {
		return nil, err
	}
	base := &http.Transport{
		Proxy:                 nil, // only the replicas, never a proxy from the environment
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   min(p.o.MaxInFlight, 512),
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if p.o.hooks.dial != nil {
		base.DialContext = p.o.hooks.dial
	}
	ht, err := hedgehttp.New(&countingTransport{base: base, replicas: p.replicaIdx}, h, hedgehttp.Config{
		Replicas:         p.o.Replicas,
		HedgeKeyedWrites: p.o.AllowWrites,
	})
	if err != nil {
		base.CloseIdleConnections()
		return nil, err
	}
	client := &http.Client{Transport: ht, CheckRedirect: p.checkRedirect}
	return &httpClient{p: p, h: h, client: client, base: base}, nil
}

func (c *httpClient) close() { c.base.CloseIdleConnections() }

func (c *httpClient) hedger() *hedge.Hedger { return c.h }

// checkRedirect follows a redirect only to one of the replicas, and at
// most 5.
func (p *httpProto) checkRedirect(req *http.Request, via []*http.Request) error {
	if !p.origins[originOf(req.URL)] {
		return fmt.Errorf("%w: to %s://%s", ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	return nil
}

// send sends target i and reads the body to its end.
func (c *httpClient) send(ctx context.Context, i int) outcome {
	o := c.p.o
	tgt := &o.Targets[i%len(o.Targets)]
	var body io.Reader
	if tgt.Body != nil {
		body = bytes.NewReader(tgt.Body)
	}
	req, err := http.NewRequestWithContext(ctx, tgt.method(), c.p.firstURL+tgt.Path, body)
	if err != nil {
		return outcome{kind: kindOther}
	}
	for name, vs := range o.Header {
		req.Header[http.CanonicalHeaderKey(name)] = slices.Clone(vs)
	}
	for name, vs := range tgt.Header {
		req.Header[http.CanonicalHeaderKey(name)] = slices.Clone(vs)
	}
	if !safeMethod(tgt.method()) && o.IdempotencyHeader != "" {
		req.Header.Set(o.IdempotencyHeader, newKey())
	}
	resp, err := c.client.Do(req)
	var out outcome
	if err == nil {
		out.status = fmt.Sprint(resp.StatusCode)
		retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"))
		_, berr := io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
		resp.Body.Close()
		switch {
		case berr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			out.kind = kindTimeout
		case berr != nil:
			out.kind = kindBody
		case resp.StatusCode == http.StatusTooManyRequests:
			out.kind = kindStatus429
		case resp.StatusCode >= 500:
			out.kind = kindStatus5xx
		}
		out.pushback = resp.StatusCode == http.StatusTooManyRequests || (resp.StatusCode >= 500 && retryAfter > 0)
		if out.pushback {
			out.retryAfter = retryAfter
		}
	} else {
		switch {
		case errors.Is(err, ErrRedirectRefused):
			out.kind = kindRedirect
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			out.kind = kindTimeout
		case isConnErr(err):
			out.kind = kindConnect
		default:
			out.kind = kindOther
		}
	}
	switch out.kind {
	case kindOK, kindTimeout, kindStatus5xx, kindStatus429:
		out.answered = true
	}
	if tr := traceOf(ctx); tr != nil && resp != nil {
		tr.mu.Lock()
		for k := range tr.copies {
			if tr.copies[k].resp == resp {
				tr.copies[k].won = true
			}
		}
		tr.mu.Unlock()
	}
	return out
}
