package try

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/bench"
	"github.com/tailcut/hedge/hedgehttp"
)

// maxResponseBody is how much of a response body is read (and dropped)
// before the request counts as complete.
const maxResponseBody = 64 << 20

// Error kinds of a request, as counted in ArmResult.Errors.
const (
	kindOK        = ""
	kindTimeout   = "timeout"
	kindStatus5xx = "status 5xx"
	kindStatus429 = "status 429"
	kindRedirect  = "redirect refused"
	kindConnect   = "connection"
	kindBody      = "body"
	kindOther     = "other"
)

// record is what one request did.
type record struct {
	arm      int
	intended time.Duration // since the start
	latency  time.Duration // from the intended start to the end of the body
	status   int
	kind     string
	hedges   int  // hedge copies sent
	hedgeWon bool // a hedge copy answered first
	winner   int  // replica of the copy that answered, -1 if none
	copies   []copyRec
}

// copyRec is one copy of a request, as the transport under hedgehttp saw
// it.
type copyRec struct {
	replica, index int
	dur            time.Duration // until its response headers, or its error
	resp           *http.Response
	failed         bool
}

// trace collects the copies of one request.
type trace struct {
	mu     sync.Mutex
	copies []copyRec
}

type traceKey struct{}

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
	if tr, ok := req.Context().Value(traceKey{}).(*trace); ok {
		idx, known := c.replicas[originOf(req.URL).hostport]
		if !known {
			idx = -1
		}
		tr.mu.Lock()
		tr.copies = append(tr.copies, copyRec{replica: idx, index: hedgehttp.AttemptIndex(req), dur: time.Since(start), resp: resp, failed: err != nil})
		tr.mu.Unlock()
	}
	return resp, err
}

// armClient is the client of one arm.
type armClient struct {
	arm    Arm
	client *http.Client
	base   *http.Transport
	hedger *hedge.Hedger
}

// runner is one Run.
type runner struct {
	o        Options
	origins  map[origin]bool
	hosts    []string // host:port of each replica, in normal form
	firstURL string   // the base URL requests are addressed to
	arms     []armClient
	secret   map[string]bool
	start    time.Time
	total    time.Duration // ramp + warmup + duration
	measure  time.Duration // ramp + warmup: where measuring starts

	mu      sync.Mutex
	records []record

	inFlight atomic.Int64
	sent     atomic.Int64
	failures atomic.Int64
	bo       backoff
}

// Run sends the load o describes to the replicas, each request through
// the client of an arm chosen at random, until Duration has been measured
// or ctx ends, and returns what it measured. When ctx ends early the
// result holds what was measured until then (Result.Interrupted) and the
// error is ctx's. A run stopped because the service kept failing returns
// its result and an error matching ErrServiceFailing. Options mistakes
// return nil and an error matching ErrInvalid (or a more precise error of
// the package) before anything is sent.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &runner{o: o, origins: map[origin]bool{}, secret: map[string]bool{}}
	r.measure = o.Ramp + o.Warmup
	r.total = r.measure + o.Duration
	for _, s := range o.SecretHeaders {
		r.secret[http.CanonicalHeaderKey(s)] = true
	}
	replicaIdx := map[string]int{}
	for i, s := range o.Replicas {
		or, _ := parseOrigin(s) // Validate checked
		r.origins[or] = true
		r.hosts = append(r.hosts, or.hostport)
		replicaIdx[or.hostport] = i
	}
	r.firstURL = strings.TrimSuffix(o.Replicas[0], "/")
	for _, a := range o.Arms {
		ac, err := r.newArmClient(a, replicaIdx)
		if err != nil {
			r.closeClients()
			return nil, err
		}
		r.arms = append(r.arms, ac)
	}
	defer r.closeClients()
	r.bo.factor = 1

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.start = time.Now()
	stopProgress := r.progress(runCtx)
	stopErr := r.dispatch(runCtx)
	stopProgress()
	elapsed := time.Since(r.start)
	res := r.result(elapsed, ctx.Err() != nil, stopErr)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, stopErr
}

// newArmClient builds the hedged client of one arm: its own Hedger and
// connection pool, hedgehttp over a counting transport.
func (r *runner) newArmClient(a Arm, replicaIdx map[string]int) (armClient, error) {
	cfg, err := a.Config()
	if err != nil {
		return armClient{}, fmt.Errorf("%w: arm %s: %v", ErrInvalid, a.Name, err)
	}
	cfg.Replicas = len(r.o.Replicas)
	h, err := hedge.New(cfg)
	if err != nil {
		return armClient{}, fmt.Errorf("%w: arm %s: %v", ErrInvalid, a.Name, err)
	}
	base := &http.Transport{
		Proxy:                 nil, // only the replicas, never a proxy from the environment
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   min(r.o.MaxInFlight, 512),
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	ht, err := hedgehttp.New(&countingTransport{base: base, replicas: replicaIdx}, h, hedgehttp.Config{
		Replicas:         r.o.Replicas,
		HedgeKeyedWrites: r.o.AllowWrites,
	})
	if err != nil {
		base.CloseIdleConnections()
		return armClient{}, fmt.Errorf("%w: arm %s: %v", ErrInvalid, a.Name, err)
	}
	client := &http.Client{Transport: ht, CheckRedirect: r.checkRedirect}
	return armClient{arm: a, client: client, base: base, hedger: h}, nil
}

func (r *runner) closeClients() {
	for _, a := range r.arms {
		a.base.CloseIdleConnections()
	}
}

// checkRedirect follows a redirect only to one of the replicas, and at
// most 5.
func (r *runner) checkRedirect(req *http.Request, via []*http.Request) error {
	if !r.origins[originOf(req.URL)] {
		return fmt.Errorf("%w: to %s://%s", ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 5 {
		return errors.New("try: stopped after 5 redirects")
	}
	return nil
}

// dispatch paces the arrivals until the end, ctx's end, or a failing
// service, and waits for every request it started.
func (r *runner) dispatch(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, r.o.MaxInFlight)
	rng := mrand.New(mrand.NewPCG(r.o.Seed, 0x7472792d61726d73)) // arm assignment
	pacer := bench.Pacer{Start: r.start}
	at := time.Duration(0)
	for i := 0; ; i++ {
		factor, pause, failing := r.bo.state(pacer.Now())
		if failing {
			return ErrServiceFailing
		}
		at = max(at, pause)
		if at >= r.total {
			return nil
		}
		if !r.sleepUntil(ctx, &pacer, at) {
			return nil
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		arm := rng.IntN(len(r.arms))
		tgt := &r.o.Targets[i%len(r.o.Targets)]
		wg.Add(1)
		r.inFlight.Add(1)
		r.sent.Add(1)
		go func(arm int, tgt *Target, intended time.Duration) {
			defer func() { <-sem; r.inFlight.Add(-1); wg.Done() }()
			r.one(ctx, arm, tgt, intended)
		}(arm, tgt, at)
		at += r.gap(at, factor)
	}
}

// sleepUntil waits until at (since the start), or ctx's end (false).
func (r *runner) sleepUntil(ctx context.Context, p *bench.Pacer, at time.Duration) bool {
	if d := at - p.Now() - 20*time.Millisecond; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	p.Wait(at)
	return ctx.Err() == nil
}

// gap returns the time from an arrival at t to the next: the linear ramp
// to Rate over Ramp, times the back-off factor.
func (r *runner) gap(t time.Duration, factor float64) time.Duration {
	rate := r.o.Rate * factor
	ramp := r.o.Ramp.Seconds()
	ts := t.Seconds()
	if ramp <= 0 || ts >= ramp {
		return time.Duration(float64(time.Second) / rate)
	}
	// Within the ramp the rate is rate*s/ramp: the next arrival is where
	// its integral from t reaches 1.
	next := math.Sqrt(ts*ts + 2*ramp/rate)
	if next > ramp {
		done := rate * (ramp*ramp - ts*ts) / (2 * ramp)
		next = ramp + (1-done)/rate
	}
	return time.Duration((next - ts) * float64(time.Second))
}

// one sends one request through an arm's client and records it.
func (r *runner) one(runCtx context.Context, arm int, tgt *Target, intended time.Duration) {
	ctx, cancel := context.WithDeadline(runCtx, r.start.Add(intended+r.o.Timeout))
	defer cancel()
	tr := &trace{}
	ctx = context.WithValue(ctx, traceKey{}, tr)
	var body io.Reader
	if tgt.Body != nil {
		body = bytes.NewReader(tgt.Body)
	}
	req, err := http.NewRequestWithContext(ctx, tgt.method(), r.firstURL+tgt.Path, body)
	if err != nil {
		r.add(record{arm: arm, intended: intended, latency: time.Since(r.start) - intended, kind: kindOther, winner: -1})
		return
	}
	for name, vs := range r.o.Header {
		req.Header[http.CanonicalHeaderKey(name)] = slices.Clone(vs)
	}
	for name, vs := range tgt.Header {
		req.Header[http.CanonicalHeaderKey(name)] = slices.Clone(vs)
	}
	if !safeMethod(tgt.method()) && r.o.IdempotencyHeader != "" {
		req.Header.Set(r.o.IdempotencyHeader, newKey())
	}
	resp, err := r.arms[arm].client.Do(req)
	rec := record{arm: arm, intended: intended, winner: -1}
	var retryAfter time.Duration
	if err == nil {
		rec.status = resp.StatusCode
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
		_, berr := io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
		resp.Body.Close()
		switch {
		case berr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			rec.kind = kindTimeout
		case berr != nil:
			rec.kind = kindBody
		case resp.StatusCode == http.StatusTooManyRequests:
			rec.kind = kindStatus429
		case resp.StatusCode >= 500:
			rec.kind = kindStatus5xx
		}
	} else {
		switch {
		case errors.Is(err, ErrRedirectRefused):
			rec.kind = kindRedirect
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			rec.kind = kindTimeout
		case isConnErr(err):
			rec.kind = kindConnect
		default:
			rec.kind = kindOther
		}
	}
	rec.latency = time.Since(r.start) - intended
	if runCtx.Err() != nil {
		return // interrupted: not a measurement
	}
	tr.mu.Lock()
	rec.copies = tr.copies
	tr.mu.Unlock()
	for _, c := range rec.copies {
		if c.index > 0 {
			rec.hedges++
		}
		if resp != nil && c.resp == resp {
			rec.winner = c.replica
			rec.hedgeWon = c.index > 0
		}
	}
	for i := range rec.copies {
		rec.copies[i].resp = nil // keep no response alive
	}
	pushback := rec.status == http.StatusTooManyRequests || (rec.status >= 500 && retryAfter > 0)
	r.bo.observe(time.Since(r.start), rec.kind != kindOK, pushback, retryAfter)
	if rec.kind != kindOK {
		r.failures.Add(1)
	}
	r.add(rec)
}

func (r *runner) add(rec record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

// newKey returns a fresh random idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parseRetryAfter reads a Retry-After of seconds or an HTTP date; 0 when
// absent or unreadable.
func parseRetryAfter(s string) time.Duration {
	if s == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 {
		return max(time.Duration(n)*time.Second, time.Millisecond)
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(time.Until(t), time.Millisecond)
	}
	return time.Millisecond
}

func isConnErr(err error) bool {
	var ne *net.OpError
	if errors.As(err, &ne) {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "connection")
}

// progress prints a line every ProgressEvery until the returned function
// is called.
func (r *runner) progress(ctx context.Context) (stop func()) {
	if r.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.o.ProgressEvery)
		defer t.Stop()
		lastSent, lastAt := int64(0), time.Duration(0)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Since(r.start)
			sent := r.sent.Load()
			rate := float64(sent-lastSent) / (now - lastAt).Seconds()
			lastSent, lastAt = sent, now
			fmt.Fprintf(r.o.Progress, "try: %s of %s  %.0f req/s", now.Round(100*time.Millisecond), r.total, rate)
			if f, _, _ := r.bo.state(now); f < 1 {
				fmt.Fprintf(r.o.Progress, " (backed off to x%.2f)", f)
			}
			fmt.Fprintf(r.o.Progress, "  in flight %d  errors %d  p99 (last 5s):", r.inFlight.Load(), r.failures.Load())
			for i, p := range r.recentP99(now, 5*time.Second) {
				fmt.Fprintf(r.o.Progress, " %s %s", r.arms[i].arm.Name, fmtDur(p))
			}
			fmt.Fprintln(r.o.Progress)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// recentP99 returns each arm's p99 over requests sent in the last span.
func (r *runner) recentP99(now, span time.Duration) []time.Duration {
	lat := make([][]int64, len(r.arms))
	r.mu.Lock()
	for i := len(r.records) - 1; i >= 0; i-- {
		rec := &r.records[i]
		if rec.intended < now-span-r.o.Timeout {
			break
		}
		if rec.intended >= now-span && rec.kind != kindRedirect {
			lat[rec.arm] = append(lat[rec.arm], int64(rec.latency))
		}
	}
	r.mu.Unlock()
	out := make([]time.Duration, len(lat))
	for i, l := range lat {
		slices.Sort(l)
		out[i] = time.Duration(bench.Quantile(l, 0.99))
	}
	return out
}

// BackoffEvent is one change of the load made by the back-off.
type BackoffEvent struct {
	// At is the time since the start.
	At time.Duration `json:"at_ns"`
	// Factor is the share of --rate sent from then on.
	Factor float64 `json:"factor"`
	// Pause is how long nothing was sent (a Retry-After), if at all.
	Pause time.Duration `json:"pause_ns,omitempty"`
	// Reason says why.
	Reason string `json:"reason"`
}

// Back-off constants.
const (
	minFactor    = 1.0 / 64
	maxPause     = 5 * time.Second
	window       = time.Second
	errShare     = 0.2 // errors in a window that cut the rate
	failingLimit = 5   // windows at the lowest rate with most requests failing
)

// backoff lowers the rate when the service pushes back (429, or a 5xx
// with Retry-After, each honoured up to maxPause) or fails (errShare of a
// window's requests), halving it at most once a window; two calm windows
// in a row raise it by half again, up to the full rate. A service failing
// at the lowest rate for failingLimit windows stops the run.
type backoff struct {
	mu               sync.Mutex
	factor           float64
	pauseUntil       time.Duration
	lastCut          time.Duration
	cut              bool
	winStart         time.Duration
	n, errs, pushes  int
	calm, failing    int
	events           []BackoffEvent
	failed           bool
	pushbackRequests int
}

func (b *backoff) observe(now time.Duration, failed, pushback bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	b.n++
	if failed {
		b.errs++
	}
	if pushback {
		b.pushes++
		b.pushbackRequests++
		reason := "pushback (429, or a 5xx with Retry-After)"
		pause := min(retryAfter, maxPause)
		if retryAfter > 0 {
			reason += fmt.Sprintf("; Retry-After %v honoured", pause.Round(time.Millisecond))
		}
		b.cutRate(now, pause, reason)
	}
}

func (b *backoff) cutRate(now, pause time.Duration, reason string) {
	if b.cut && now-b.lastCut < window {
		return
	}
	b.cut, b.lastCut = true, now
	b.factor = max(b.factor/2, minFactor)
	if pause > 0 {
		b.pauseUntil = max(b.pauseUntil, now+pause)
	}
	b.calm = 0
	b.events = append(b.events, BackoffEvent{At: now, Factor: b.factor, Pause: pause, Reason: reason})
}

// roll closes the window if it is over.
func (b *backoff) roll(now time.Duration) {
	if now-b.winStart < window {
		return
	}
	if b.n > 0 {
		share := float64(b.errs) / float64(b.n)
		switch {
		case b.n >= 10 && share >= errShare:
			b.cutRate(now, 0, fmt.Sprintf("errors: %d of %d requests in a second", b.errs, b.n))
		case b.pushes == 0 && share < errShare/4:
			b.calm++
			if b.calm >= 2 && b.factor < 1 {
				b.factor = min(1, b.factor*1.5)
				b.calm = 0
				b.events = append(b.events, BackoffEvent{At: now, Factor: b.factor, Reason: "calm: raising the rate again"})
			}
		default:
			b.calm = 0
		}
		if b.factor <= minFactor && share >= 0.5 {
			b.failing++
			b.failed = b.failing >= failingLimit
		} else {
			b.failing = 0
		}
	}
	b.winStart, b.n, b.errs, b.pushes = now, 0, 0, 0
}

// state returns the current factor, the end of any pause, and whether the
// service is failing at the lowest rate.
func (b *backoff) state(now time.Duration) (float64, time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	return b.factor, b.pauseUntil, b.failed
}
