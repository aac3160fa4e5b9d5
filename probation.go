package hedge

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// A replica that fails every copy it gets (one that refuses connections,
// or answers every request with an error at once) has nothing in flight,
// so a picker that prefers the less loaded replica prefers it: a black
// hole. The [Hedger] puts such a replica on probation, as outlier detection
// in a load balancer ejects a host:
//
//   - probationFailures consecutive failed copies on a replica (retryable
//     errors and ErrNotSent, not the caller's context ending, not copies
//     cancelled because another won, not pushbacks, which say the server is
//     alive) take it out of every pick, primaries included, for
//     probationTime;
//   - when that has passed, the replica gets one copy at a time, a probe:
//     a probe that succeeds (or gets any answer that is not a retryable
//     failure) ends the probation; one that fails takes the replica out
//     again, for twice as long as the last time, up to maxProbationTime;
//   - at most half the replicas (at least one, never all) are on probation
//     at once, so that a fault of the clients' own cannot empty the pool;
//     when every replica a copy could go to is out, it goes to one anyway.
//
// The time a replica is out is wall time in the live engine; the
// simulator's servers never fail, so it has no probation.
const (
	// probationFailures is how many consecutive failed copies put a
	// replica on probation (the package doc's "Replicas that fail").
	probationFailures = 3
	// probationTime is how long a replica is out of the picks the first
	// time.
	probationTime = time.Second
	// maxProbationTime bounds the doubling of probationTime.
	maxProbationTime = 30 * time.Second
)

// ErrNotSent is matched (errors.Is) by the error of a copy that provably
// never reached a server: its connection was refused or never made, or its
// server's name did not resolve, before any byte of the request was
// written. Such a copy cost no server anything and no server can have
// acted on it, so Do replaces it at once with a copy to another replica,
// outside the budget, the in-flight cap and the spare-capacity and payoff
// rules (it is not a bet on slowness but the request itself, sent again):
// in modes On and Shadow (a held-out request fails over too, as an
// unhedged client's failover would), within MaxAttempts and the caller's
// deadline, never in mode Off. Such replacements are counted in
// [Stats.Failovers]. Transports mark their dial errors with [NotSent].
var ErrNotSent = errors.New("hedge: the request never reached a server")

// NotSent marks err as the failure of a copy that never reached a server
// (see [ErrNotSent]). Mark only errors from before the request was written:
// a copy marked wrongly may run twice. errors.Is and errors.As see through
// the mark to err.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return notSent{err}
}

type notSent struct{ error }

func (e notSent) Unwrap() error        { return e.error }
func (e notSent) Is(target error) bool { return target == ErrNotSent }

// probation is the state of the replicas' probation (see
// probationFailures): one entry per replica, all atomics, so that the
// common case (no replica out, a copy that succeeded on a replica with no
// failures) costs one or two atomic loads.
type probation struct {
	fails  []atomic.Int32 // consecutive failed copies
	until  []atomic.Int64 // out of the picks until then (Hedger time); 0: not on probation
	streak []atomic.Int32 // probations in a row, which set the next one's length
	probe  []atomic.Bool  // a probe copy is out
	out    atomic.Int32   // replicas on probation (until != 0)
	max    int32          // most replicas on probation at once
}

func newProbation(n int) *probation {
	return &probation{
		fails:  make([]atomic.Int32, n),
		until:  make([]atomic.Int64, n),
		streak: make([]atomic.Int32, n),
		probe:  make([]atomic.Bool, n),
		max:    int32(max(1, n/2)),
	}
}

// any reports whether some replica is on probation.
func (p *probation) any() bool { return p.out.Load() > 0 }

// excluded reports whether replica r may not take a copy at now: it is
// out, or on probation with its probe out.
func (p *probation) excluded(r int, now time.Duration) bool {
	u := p.until[r].Load()
	return u != 0 && (int64(now) < u || p.probe[r].Load())
}

// takeProbe claims replica r's probe if r is on probation and may take
// one now: it reports whether the copy sent there is the probe, and ok
// false when r may not take the copy after all (another took the probe).
func (p *probation) takeProbe(r int, now time.Duration) (probe, ok bool) {
	u := p.until[r].Load()
	if u == 0 {
		return false, true
	}
	if int64(now) < u || !p.probe[r].CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// answered records a copy on replica r that got an answer other than a
// retryable failure: whether it was the probe or a copy sent before the
// probation began, the replica is back.
func (p *probation) answered(r int) {
	if p.fails[r].Load() != 0 {
		p.fails[r].Store(0)
	}
	if p.until[r].Load() == 0 {
		return
	}
	if p.until[r].Swap(0) != 0 {
		p.out.Add(-1)
	}
	p.streak[r].Store(0)
	p.probe[r].Store(false)
}

// failed records a copy on replica r that failed at now; probe marks the
// probation's probe.
func (p *probation) failed(r int, now time.Duration, probe bool) {
	if probe {
		p.eject(r, now)
		p.probe[r].Store(false)
		return
	}
	if p.fails[r].Add(1) < probationFailures || p.until[r].Load() != 0 {
		return
	}
	for {
		n := p.out.Load()
		if n >= p.max {
			return // enough replicas are out already
		}
		if p.out.CompareAndSwap(n, n+1) {
			break
		}
	}
	if !p.until[r].CompareAndSwap(0, 1) {
		p.out.Add(-1) // another copy's failure put it out first
		return
	}
	p.eject(r, now)
}

// eject takes replica r, on probation, out of the picks from now on for
// the length its streak of probations sets.
func (p *probation) eject(r int, now time.Duration) {
	k := p.streak[r].Add(1) - 1
	d := maxProbationTime
	if k < 16 {
		d = min(probationTime<<k, maxProbationTime)
	}
	p.until[r].Store(max(int64(decide.AddSat(now, d)), 1))
}

// ended is called for a probe copy that neither failed nor got an
// answer (cancelled because another copy won, or the caller gave up): the
// next copy may probe instead.
func (p *probation) ended(r int) { p.probe[r].Store(false) }
