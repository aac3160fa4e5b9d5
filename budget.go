package hedge

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// tokenScale turns fractional tokens into integers, as gRPC's retry
// throttle does, so that the bucket is exact and lock-free.
const tokenScale = 1000

// Budget limits how many hedges may be sent relative to requests. It is a
// token bucket with no clock: it is deterministic, and the same values drive
// the live engine and the simulator.
//
// Two kinds exist:
//
//   - NewBudget(ratio, burst): each request credits ratio tokens, each hedge
//     spends one, and the bucket holds at most burst. Over any long stretch
//     hedges stay below ratio x requests + burst. This is the shape of
//     Finagle's backup-request budget. It starts full.
//   - NewThrottle(maxTokens, tokenRatio): gRPC's retryThrottling (gRFC A6).
//     Each successful request credits tokenRatio, each failed one debits 1,
//     and hedges are allowed only while the bucket holds more than
//     maxTokens/2. Hedges themselves spend nothing. It starts full. Do
//     debits each copy that fails with a retryable error before the call is
//     decided (not final errors, nor the caller's own context ending), and
//     credits each call that succeeds.
//
// The zero Budget is not usable: it holds no tokens, so New refuses it.
//
// An empty bucket means "no hedge", never an error. A nil *Budget allows
// every hedge. Methods are safe for concurrent use and never block: they
// update one atomic integer with compare-and-swap.
type Budget struct {
	throttle bool
	credit   int64 // per request (ratio kind) or per success (throttle kind)
	max      int64
	tokens   atomic.Int64
}

// NewBudget returns a ratio budget: at most ratio hedges per request over
// time, with bursts of up to burst hedges. ratio must be in (0, 1] and burst
// at least 1.
func NewBudget(ratio, burst float64) (*Budget, error) {
	var errs []error
	switch {
	case math.IsNaN(ratio) || ratio <= 0 || ratio > 1:
		errs = append(errs, fmt.Errorf("hedge: budget ratio %v is outside (0, 1]: use e.g. 0.05 to allow hedges on 5%% of requests", ratio))
	case ratio < 1.0/tokenScale:
		errs = append(errs, fmt.Errorf("hedge: budget ratio %v is below the bucket's resolution of %v: use a ratio of at least %v", ratio, 1.0/tokenScale, 1.0/tokenScale))
	}
	if math.IsNaN(burst) || burst < 1 || burst > 1e9 {
		errs = append(errs, fmt.Errorf("hedge: budget burst %v: use at least 1 token (10 is a good start) and at most 1e9", burst))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b := &Budget{credit: scaled(ratio), max: scaled(burst)}
	b.tokens.Store(b.max)
	return b, nil
}

// NewThrottle returns a budget with gRPC A6 retryThrottling semantics.
// maxTokens must be in (0, 1000] and tokenRatio in (0, maxTokens].
func NewThrottle(maxTokens, tokenRatio float64) (*Budget, error) {
	var errs []error
	if math.IsNaN(maxTokens) || maxTokens <= 0 || maxTokens > 1000 {
		errs = append(errs, fmt.Errorf("hedge: throttle maxTokens %v is outside (0, 1000] (the gRPC limit): use e.g. 10", maxTokens))
	} else if maxTokens < 1.0/tokenScale {
		errs = append(errs, fmt.Errorf("hedge: throttle maxTokens %v is below the bucket's resolution of %v: use e.g. 10", maxTokens, 1.0/tokenScale))
	}
	// tokenRatio is checked against maxTokens only when maxTokens is valid,
	// so that one mistake is not reported twice.
	if math.IsNaN(tokenRatio) || tokenRatio < 1.0/tokenScale || (len(errs) == 0 && tokenRatio > maxTokens) {
		errs = append(errs, fmt.Errorf("hedge: throttle tokenRatio %v is outside [0.001, maxTokens]: use e.g. 0.1", tokenRatio))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b := &Budget{throttle: true, credit: scaled(tokenRatio), max: scaled(maxTokens)}
	b.tokens.Store(b.max)
	return b, nil
}

func scaled(x float64) int64 { return int64(math.Round(x * tokenScale)) }

// add moves the bucket by delta, staying within [0, max].
func (b *Budget) add(delta int64) {
	for {
		t := b.tokens.Load()
		n := min(max(t+delta, 0), b.max)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// onRequest credits the bucket for one request (ratio kind only).
func (b *Budget) onRequest() {
	if b != nil && !b.throttle {
		b.add(b.credit)
	}
}

// onSuccess records a successful request (throttle kind only: it credits
// tokenRatio).
func (b *Budget) onSuccess() {
	if b != nil && b.throttle {
		b.add(b.credit)
	}
}

// onFailure records a failed request (throttle kind only: it debits one
// token).
func (b *Budget) onFailure() {
	if b != nil && b.throttle {
		b.add(-tokenScale)
	}
}

// tryHedge reports whether one hedge may be sent now, and for the ratio kind
// spends its token. A nil Budget always allows.
func (b *Budget) tryHedge() bool {
	if b == nil {
		return true
	}
	if b.throttle {
		return b.tokens.Load() > b.max/2
	}
	for {
		t := b.tokens.Load()
		if t < tokenScale {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-tokenScale) {
			return true
		}
	}
}

// refund returns the token of a hedge that tryHedge allowed but that was
// not sent after all (ratio kind only).
func (b *Budget) refund() {
	if b != nil && !b.throttle {
		b.add(tokenScale)
	}
}

// Tokens returns the tokens in the bucket now.
func (b *Budget) Tokens() float64 {
	if b == nil {
		return math.Inf(1)
	}
	return float64(b.tokens.Load()) / tokenScale
}

// String describes the budget.
func (b *Budget) String() string {
	switch {
	case b == nil:
		return "unlimited"
	case b.throttle:
		return fmt.Sprintf("throttle(maxTokens=%g, tokenRatio=%g)", float64(b.max)/tokenScale, float64(b.credit)/tokenScale)
	default:
		return fmt.Sprintf("ratio(%g, burst=%g)", float64(b.credit)/tokenScale, float64(b.max)/tokenScale)
	}
}

// twin returns a full bucket with the same parameters, or nil for nil.
func (b *Budget) twin() *Budget {
	if b == nil {
		return nil
	}
	t := &Budget{throttle: b.throttle, credit: b.credit, max: b.max}
	t.tokens.Store(t.max)
	return t
}

// bucket is a *Budget as the decision spends it (decide.Bucket).
type bucket struct{ b *Budget }

func (k bucket) OnRequest()     { k.b.onRequest() }
func (k bucket) OnSuccess()     { k.b.onSuccess() }
func (k bucket) OnFailure()     { k.b.onFailure() }
func (k bucket) TryHedge() bool { return k.b.tryHedge() }
func (k bucket) Refund()        { k.b.refund() }
