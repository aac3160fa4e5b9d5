package decide

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Live is what a running Hedger's settings change for the requests of an
// operation class, over the Policy's own (see hedge.Hedger.SetLive). A
// request carries it in its Plan (Plan.Live), read once when it begins, so
// that a change applies to requests that begin after it. A nil Live, or a
// zero field, keeps the Policy's.
type Live struct {
	// Mode is the most the request may do: the request runs in the more
	// cautious of the Policy's mode and this one (On < Shadow < Off).
	// On leaves the Policy's mode alone.
	Mode Mode
	// MaxAttempts is the most copies of one request, 1 to the engine's
	// hard limit; 0 keeps the Policy's.
	MaxAttempts int
	// Budget and Shadow replace the Policy's budget and its Shadow twin;
	// both nil keep the Policy's.
	Budget, Shadow *Budget
	// Rate caps the hedges sent per second (RefusedRate); nil for no cap.
	Rate *Rate

	stopped atomic.Bool // Stop was called
}

// Stop turns the requests that began with l to mode Off for their
// further copies: a copy not sent yet is refused (RefusedMode), as it
// would be for a request that began in Off. Package hedge calls it when
// new live settings turn every class off, so that a kill switch also
// stops the hedges of requests in flight.
func (l *Live) Stop() { l.stopped.Store(true) }

// stop reports whether Stop was called on l.
func (l *Live) stop() bool { return l != nil && l.stopped.Load() }

// maxAttempts is the most copies of a request under l and p.
func (l *Live) maxAttempts(p *Policy) int {
	if l != nil && l.MaxAttempts > 0 {
		return l.MaxAttempts
	}
	return p.maxAttempts
}

// Rate is a token bucket on time: at most PerSecond hedges in any second,
// on average, with bursts of at most max(1, PerSecond). It takes time as an
// argument, measured from the Policy's origin, and never reads a clock.
// Time going backwards is taken as no time passing. It is safe for
// concurrent use.
type Rate struct {
	perSecond float64
	burst     float64

	mu     sync.Mutex
	tokens float64
	at     time.Duration // when tokens was last brought up to date
	seen   bool
}

// NewRate returns a cap of perSecond hedges per second (positive), full.
// from, if not nil, is the cap it replaces: the new one starts with no
// more tokens than from had, so that a change never allows a burst the
// old cap would have refused.
func NewRate(perSecond float64, from *Rate) *Rate {
	r := &Rate{perSecond: perSecond, burst: max(1, perSecond)}
	r.tokens = r.burst
	if from != nil {
		from.mu.Lock()
		r.tokens, r.at, r.seen = min(r.burst, from.tokens), from.at, from.seen
		from.mu.Unlock()
	}
	return r
}

// PerSecond returns the cap.
func (r *Rate) PerSecond() float64 { return r.perSecond }

// take spends one token at now, if there is one.
func (r *Rate) take(now time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen {
		r.at, r.seen = now, true
	}
	if now > r.at {
		r.tokens = math.Min(r.burst, r.tokens+(now-r.at).Seconds()*r.perSecond)
		r.at = now
	}
	if r.tokens < 1-1e-9 { // a token made of float sums that missed 1 by a rounding error
		return false
	}
	r.tokens--
	return true
}

// give returns a token that take spent for a copy that did not go.
func (r *Rate) give() {
	r.mu.Lock()
	r.tokens = math.Min(r.burst, r.tokens+1)
	r.mu.Unlock()
}

// rate is l's cap on hedges per second, or nil.
func (l *Live) rate() *Rate {
	if l == nil {
		return nil
	}
	return l.Rate
}
