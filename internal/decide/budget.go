package decide

import "sync/atomic"

// TokenScale turns fractional tokens into integers, as gRPC's retry
// throttle does, so that a Budget is exact and lock-free: a hedge spends
// TokenScale.
const TokenScale = 1000

// Budget is the token bucket hedges spend from: the state of a
// hedge.Budget, whose doc says what its two kinds do. It is a concrete
// type, not an interface, because the Policy calls it on every request
// (OnRequest, OnSuccess): a direct call that the compiler can inline
// costs less than a call through an interface, on both clocks.
//
// A nil *Budget allows every hedge. Its methods are safe for concurrent
// use and never block: they update one atomic integer, with a
// compare-and-swap only when the level changes.
type Budget struct {
	// Throttle selects gRPC's retry throttle (credited by successes,
	// debited by failures, open above half full) over the ratio kind
	// (credited by requests, spent by hedges).
	Throttle bool
	// Credit is what a request (ratio) or a success (throttle) adds.
	Credit int64
	// Max is the most the bucket holds, in TokenScale units.
	Max int64
	// Level is what the bucket holds now, in TokenScale units.
	Level atomic.Int64
}

// add moves the level by delta, within [0, Max]. A full bucket credited
// again is left alone without a write.
func (b *Budget) add(delta int64) {
	for {
		t := b.Level.Load()
		n := min(max(t+delta, 0), b.Max)
		if n == t || b.Level.CompareAndSwap(t, n) {
			return
		}
	}
}

// OnRequest credits the ratio kind for one request.
func (b *Budget) OnRequest() {
	if b != nil && !b.Throttle {
		b.add(b.Credit)
	}
}

// OnSuccess credits the throttle kind for one successful request.
func (b *Budget) OnSuccess() {
	if b != nil && b.Throttle {
		b.add(b.Credit)
	}
}

// OnFailure debits the throttle kind one token for a failed copy.
func (b *Budget) OnFailure() {
	if b != nil && b.Throttle {
		b.add(-TokenScale)
	}
}

// TryHedge reports whether one hedge may go now, and for the ratio kind
// spends its token.
func (b *Budget) TryHedge() bool {
	if b == nil {
		return true
	}
	if b.Throttle {
		return b.Level.Load() > b.Max/2
	}
	for {
		t := b.Level.Load()
		if t < TokenScale {
			return false
		}
		if b.Level.CompareAndSwap(t, t-TokenScale) {
			return true
		}
	}
}

// Refund gives back the token of a hedge that TryHedge allowed but that
// did not go after all (ratio kind only).
func (b *Budget) Refund() {
	if b != nil && !b.Throttle {
		b.add(TokenScale)
	}
}
