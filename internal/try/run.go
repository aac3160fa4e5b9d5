package try

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

	"github.com/tailcut/hedge/internal/bench"
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

// armClient is the client of one arm.
type armClient struct {
	arm    Arm
	client sender
}

// runner is one Run.
type runner struct {
	o       Options
	proto   protocol
	kind    string // ProtocolHTTP, ProtocolGRPC or ProtocolRedis
	arms    []armClient
	secret  map[string]bool
	start   time.Time
	total   time.Duration // ramp + warmup + duration
	measure time.Duration // ramp + warmup: where measuring starts

	mu      sync.Mutex
	records []record

	// atMeasure is each arm's Hedger when the measured span began (see
	// ArmResult.NotSent and DelayAtStart).
	atMeasure []hedgerState

	inFlight atomic.Int64
	sent     atomic.Int64
	dropped  atomic.Int64
	drops    []drop // under mu
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
// the package) before anything is sent; for gRPC, so do a method whose
// descriptors cannot be had (ErrDescriptors: nothing but the reflection
// stream was sent), a streaming method (ErrStreaming) and a request
// message that does not parse (ErrTargets).
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &runner{o: o, secret: map[string]bool{}}
	r.measure = o.Ramp + o.Warmup
	r.total = r.measure + o.Duration
	for _, s := range o.SecretHeaders {
		r.secret[http.CanonicalHeaderKey(s)] = true
	}
	var err error
	if r.proto, r.kind, err = newProtocol(ctx, &r.o); err != nil {
		return nil, err
	}
	defer r.proto.close()
	for _, a := range o.Arms {
		cfg, err := a.Config()
		var c sender
		if err == nil {
			c, err = r.proto.newClient(cfg)
		}
		if err != nil {
			r.closeClients()
			return nil, fmt.Errorf("%w: arm %s: %v", ErrInvalid, a.Name, err)
		}
		r.arms = append(r.arms, armClient{arm: a, client: c})
	}
	defer r.closeClients()
	r.bo.pushbackReason = pushbackReasons[r.kind]
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

// newProtocol returns the protocol of the options, checked: for gRPC,
// with the method's descriptors found (from the descriptor set, or by
// reflection from the first replica) and the request messages parsed.
func newProtocol(ctx context.Context, o *Options) (protocol, string, error) {
	switch {
	case o.GRPC != nil:
		p, err := newGRPC(ctx, o)
		return p, ProtocolGRPC, err
	case o.Redis != nil:
		p, err := newRedis(o)
		return p, ProtocolRedis, err
	}
	return newHTTP(o), ProtocolHTTP, nil
}

func (r *runner) closeClients() {
	for _, a := range r.arms {
		a.client.close()
	}
}

// dispatch paces the arrivals until the end, ctx's end, or a failing
// service, and waits for every request it started.
//
// An arrival is sent at its intended time, or up to one gap (the time to
// the next arrival) later: it waits that long at most for a slot under
// MaxInFlight, and the dispatcher may reach it that late. Past that it is
// dropped and counted (dropInFlight, dropLate), never sent with the next
// ones in a burst: so no span holds more requests than the rate allows,
// plus one.
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
		if r.atMeasure == nil && at >= r.measure {
			for _, a := range r.arms {
				r.atMeasure = append(r.atMeasure, stateOf(a.client.hedger()))
			}
		}
		if !r.sleepUntil(ctx, &pacer, at) {
			return nil
		}
		gap := r.gap(at, factor)
		arm := rng.IntN(len(r.arms))
		switch why, lag := r.admit(ctx, &pacer, sem, at, gap); why {
		case admitted:
			wg.Add(1)
			r.inFlight.Add(1)
			r.sent.Add(1)
			go func(arm, i int, intended time.Duration) {
				defer func() { <-sem; r.inFlight.Add(-1); wg.Done() }()
				r.one(ctx, arm, i, intended)
			}(arm, i, at)
		case stopped:
			return nil
		default:
			r.dropped.Add(1)
			r.mu.Lock()
			r.drops = append(r.drops, drop{intended: at, lag: lag, why: why})
			r.mu.Unlock()
		}
		at += gap
	}
}

// Why an arrival was not sent (admit).
const (
	admitted     = ""
	stopped      = "stopped"
	dropInFlight = "in_flight" // no slot came free within a gap
	dropLate     = "late"      // the dispatcher reached it more than a gap late
)

// drop is an arrival that was not sent: its intended time, how late the
// dispatcher was when it gave up on it, and why.
type drop struct {
	intended, lag time.Duration
	why           string
}

// admit takes a slot for the arrival intended at at, if it can be had
// within late of at, and returns admitted; otherwise dropLate (the
// dispatcher came to it too late), dropInFlight (no slot came free in
// time, the slot holders still in flight) or stopped (ctx ended), with
// how late it was then.
func (r *runner) admit(ctx context.Context, p *bench.Pacer, sem chan struct{}, at, late time.Duration) (string, time.Duration) {
	lag := p.Now() - at
	if lag > late {
		return dropLate, lag
	}
	select {
	case sem <- struct{}{}:
		return admitted, lag
	default:
	}
	t := time.NewTimer(late - lag)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
	case <-t.C:
		return dropInFlight, p.Now() - at
	case <-ctx.Done():
		return stopped, 0
	}
	if lag = p.Now() - at; lag > late {
		<-sem // the slot came free, but too late to send without a burst
		return dropInFlight, lag
	}
	return admitted, lag
}

// sleepUntil waits until at (since the start), or ctx's end (false).
func (r *runner) sleepUntil(ctx context.Context, p *bench.Pacer, at time.Duration) bool {
	d := at - p.Now()
	if !r.o.hooks.timerPacing {
		d -= 20 * time.Millisecond
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	if !r.o.hooks.timerPacing {
		p.Wait(at)
	}
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
func (r *runner) one(runCtx context.Context, arm, i int, intended time.Duration) {
	lag := time.Since(r.start) - intended
	ctx, cancel := context.WithDeadline(runCtx, r.start.Add(intended+r.o.Timeout))
	defer cancel()
	tr := &trace{}
	ctx = context.WithValue(ctx, traceKey{}, tr)
	out := r.arms[arm].client.send(ctx, i)
	rec := record{arm: arm, intended: intended, lag: lag, winner: -1, status: out.status, kind: out.kind, answered: out.answered}
	rec.latency = time.Since(r.start) - intended
	if runCtx.Err() != nil {
		return // interrupted: not a measurement
	}
	rec.copies = tr.snapshot()
	for _, c := range rec.copies {
		if c.index > 0 {
			rec.hedges++
		}
		if c.won {
			rec.winner = c.replica
			rec.hedgeWon = c.index > 0
		}
	}
	r.bo.observe(time.Since(r.start), rec.kind != kindOK, out.pushback, out.retryAfter)
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
			fmt.Fprintf(r.o.Progress, "hedge try: %s of %s  %.0f req/s", now.Round(100*time.Millisecond), r.total, rate)
			if f, _, _ := r.bo.state(now); f < 1 {
				fmt.Fprintf(r.o.Progress, " (backed off to x%.2f)", f)
			}
			fmt.Fprintf(r.o.Progress, "  in flight %d  errors %d", r.inFlight.Load(), r.failures.Load())
			if n := r.dropped.Load(); n > 0 {
				fmt.Fprintf(r.o.Progress, "  dropped %d", n)
			}
			fmt.Fprint(r.o.Progress, "  p99 (last 5s):")
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
	pushbackReason   string // what counts as pushback, for the events
}

// pushbackReasons say, per protocol, what counts as pushback.
var pushbackReasons = map[string]string{
	ProtocolHTTP:  "pushback (429, or a 5xx with Retry-After)",
	ProtocolGRPC:  "pushback (RESOURCE_EXHAUSTED, or UNAVAILABLE with grpc-retry-pushback-ms)",
	ProtocolRedis: "pushback",
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
		reason := b.pushbackReason
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
