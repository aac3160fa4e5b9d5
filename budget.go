package hedge

import (
	"errors"
	"fmt"
	"math"

	"github.com/tailcut/hedge/internal/decide"
)

// tokenScale turns fractional tokens into integers, as gRPC's retry
// throttle does, so that the bucket is exact and lock-free.
const tokenScale = decide.TokenScale

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
	t decide.Budget // the bucket itself, which the decision spends from directly
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
	b := &Budget{}
	b.t.Credit, b.t.Max = scaled(ratio), scaled(burst)
	b.t.Level.Store(b.t.Max)
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
	b := &Budget{}
	b.t.Throttle, b.t.Credit, b.t.Max = true, scaled(tokenRatio), scaled(maxTokens)
	b.t.Level.Store(b.t.Max)
	return b, nil
}

func scaled(x float64) int64 { return int64(math.Round(x * tokenScale)) }

// dec is the bucket the decision spends from, nil for a nil Budget
// (unlimited).
func (b *Budget) dec() *decide.Budget {
	if b == nil {
		return nil
	}
	return &b.t
}

// Tokens returns the tokens in the bucket now.
func (b *Budget) Tokens() float64 {
	if b == nil {
		return math.Inf(1)
	}
	return float64(b.t.Level.Load()) / tokenScale
}

// String describes the budget.
func (b *Budget) String() string {
	switch {
	case b == nil:
		return "unlimited"
	case b.t.Throttle:
		return fmt.Sprintf("throttle(maxTokens=%g, tokenRatio=%g)", float64(b.t.Max)/tokenScale, float64(b.t.Credit)/tokenScale)
	default:
		return fmt.Sprintf("ratio(%g, burst=%g)", float64(b.t.Credit)/tokenScale, float64(b.t.Max)/tokenScale)
	}
}

// twin returns a full bucket with the same parameters, or nil for nil.
func (b *Budget) twin() *Budget {
	if b == nil {
		return nil
	}
	t := &Budget{}
	t.t.Throttle, t.t.Credit, t.t.Max = b.t.Throttle, b.t.Credit, b.t.Max
	t.t.Level.Store(t.t.Max)
	return t
}
