package hedge

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// Attempt tells an attempt function which copy of the request it runs.
type Attempt struct {
	// Index is 0 for the primary, 1 for the first hedge, and so on.
	Index int
	// Replica is the replica chosen for this copy, in [0, Config.Replicas),
	// or -1 when the [Hedger] has no replicas and the function chooses.
	// Never the replica of another copy of the same request. With
	// [Config.Shards] it is the server's index, one of the request's
	// shard's: a transport keeps one list of server addresses and sends
	// the copy to addrs[a.Replica].
	Replica int
	// Shard is the shard this copy serves ([Config.Shards]): [DoShard]'s
	// shard, or the leaf's [FanOut.Shard]. It is -1 without Shards.
	Shard int
	// Key is the request's idempotency key, or "" (see
	// [WithIdempotencyKey]).
	Key string
	// Hedge is set when another copy of the same request was running
	// when this copy started: the copy races it, and a server may run it
	// at low priority (package spare). It is false for the primary, and
	// for a copy sent when no other copy of the request was running: a
	// failover (the first copy never reached a server, [ErrNotSent]) or a
	// copy sent at once after the only running copy failed with a
	// retryable error. Such a copy is the request's only one: it stands
	// for the primary, and transports must not mark it as a hedge.
	Hedge bool
}

// Do runs attempt, and more copies of it if it is slow or fails, and
// returns the first successful result.
//
// op is the operation class ("GetItem"): delay estimates and stats are kept
// per class. Use a small fixed set of names; beyond [Config.MaxOps] they all
// share [OtherOp].
//
// The primary copy starts at once. If it has not succeeded after the
// delay, and the budget, [Config.MaxAttempts], [Config.MaxHedgesInFlight]
// and the caller's deadline allow, a hedge copy starts on another
// replica, and so on up to MaxAttempts copies. A copy that fails with a
// retryable error starts the next copy at once instead of waiting for
// the delay. The first copy to succeed wins: the contexts of all others
// are cancelled, and Do returns once they have returned (or at once with
// [Config.ReapInBackground]). A non-retryable error, or the caller's
// context ending, ends the call with that error. If every copy fails, the error wraps each copy's error, so
// errors.Is and errors.As work on any of them.
//
// Each copy gets its own context, derived from ctx and cancelled when the
// copy loses or when Do returns; the function must honour it. Do never
// extends ctx's deadline. A panic in any copy is re-raised on the caller's
// goroutine as a *PanicError, after the other copies were cancelled and
// reaped.
//
// When no hedge fires, the primary runs on the caller's goroutine, no
// goroutine is started, and a call costs one small allocation, for the
// primary's context, as long as the function does not ask for its Done
// channel (which makes the context.WithCancel it stands for, its holder
// and its channel: four more). See BENCHMARKS.md.
//
// On a [Hedger] with [Config.Shards], Do sends nothing and returns an
// error that matches [ErrInvalidConfig]: use [DoShard] or [DoFan].
func Do[T any](ctx context.Context, h *Hedger, op string, attempt func(ctx context.Context, a Attempt) (T, error)) (T, error) {
	if h.shards != nil {
		var zero T
		return zero, errDoShards
	}
	v, _, err := newCall(ctx, h, op, attempt, -1).run()
	return v, err
}

// DoHeld is Do for results that stay tied to the winning copy's context
// after the call, such as an HTTP response whose body is yet to be read.
//
// The winner's context is not cancelled when its function returns; it stays
// alive until the caller calls release (always non-nil; call it once the
// result is no longer used, on every path). Copies that succeed after
// another won are handed to discard, which must free them (close the body);
// discard may be nil when results hold nothing. Everything else is as in
// Do; like Do, it refuses a [Hedger] with [Config.Shards].
func DoHeld[T any](ctx context.Context, h *Hedger, op string, attempt func(ctx context.Context, a Attempt) (T, error), discard func(T)) (v T, release func(), err error) {
	if h.shards != nil {
		return v, noRelease, errDoShards
	}
	c := newCall(ctx, h, op, attempt, -1)
	c.keep, c.discard = true, discard
	return c.run()
}

func noRelease() {}

// newCall starts a call of h's operation class op that runs attempt, for
// shard (-1: any replica).
func newCall[T any](ctx context.Context, h *Hedger, op string, attempt func(ctx context.Context, a Attempt) (T, error), shard int) *call[T] {
	st := h.op(op)
	// The state of a call that nothing can touch any more once it
	// returned is used again (see reusable): on the fast path it costs no
	// allocation.
	c, _ := h.calls.Get().(*call[T])
	if c == nil {
		c = new(call[T])
	}
	m, _ := ctx.Value(marksKey{}).(*marks)
	c.begin(ctx, h, st, attempt, m, shard)
	return c
}

// begin starts c, a call of h's operation class st whose copies run fn
// with ctx as their parent, marked by m (nil for none), on the servers
// of shard (-1: any replica).
func (c *call[T]) begin(ctx context.Context, h *Hedger, st *opState, fn func(ctx context.Context, a Attempt) (T, error), m *marks, shard int) {
	st.requests.Add(1)
	// A pointer that holds the value already is not written: a reused
	// call (see reset) mostly serves the same Hedger, class and live
	// settings, and a pointer written while the collector marks costs a
	// write barrier.
	if c.h != h {
		c.h = h
	}
	if c.st != st {
		c.st = st
	}
	c.parent, c.fn, c.winner, c.timer.slot, c.shard = ctx, fn, -1, -1, shard
	if c.timer.t == nil {
		c.timer.t = c // once for the call's life: reset keeps it
	}
	once := false
	if c.fan != nil {
		c.fan = nil
	}
	if m != nil {
		c.key, c.fan = m.key, m.fan
		if m.write && m.key == "" {
			st.unhedgeable.Add(1)
			once = true
		}
	}
	deadline := Never
	if d, ok := ctx.Deadline(); ok {
		deadline = max(d.Sub(h.epoch), 0)
	}
	if l := h.liveFor(st); c.plan.Live != l {
		c.plan.Live = l
	}
	h.pol.Begin(&c.plan, h.now(), st.est, deadline, once, nil)
	switch {
	case c.fan != nil && c.fan.call:
		c.plan.Fan = &c.fan.dec
	case c.plan.Fan != nil:
		c.plan.Fan = nil
	}
}

// call is the state of one Do call: callState, and the copies' own.
type call[T any] struct {
	callState[T]
	copies [HardMaxAttempts]copyState // guarded by mu
}

// callState is a call's state but for its copies'. mu guards everything
// below it.
type callState[T any] struct {
	h       *Hedger
	st      *opState
	parent  context.Context
	fn      func(context.Context, Attempt) (T, error)
	leaf    *leafState[T] // DoFan's: the leaf this call is, or nil
	shard   int           // the shard whose servers serve the call, or -1 for any
	key     string
	fan     *fanOut     // the fan-out of WithFanOut, or nil
	keep    bool        // DoHeld: the winner's context outlives the call
	discard func(T)     // DoHeld: frees a result that lost
	plan    decide.Plan // the Policy's state for this call; times since the Hedger's epoch
	ahead   int64       // this Hedger's requests in flight on the primary's replica when it went
	leftAt  int64       // copies that had left that replica then
	// When that replica's report was fresh then: the requests ahead of
	// the primary by it, and its count of answers (decide.Reported).
	repAhead  int64
	repDoneAt int64
	byRep     bool
	// timer is the call's timer in the Hedger's timer queue: its at and
	// slot are guarded by the queue's lock, its armed by mu (timerItem).
	timer timerItem
	// timerDue is set, under the timer queue's lock, when the queue took
	// the call's timer to fire it: fire may run after the call returned.
	timerDue bool

	mu       sync.Mutex
	launched int  // copies started (plan.Copies also counts Shadow's virtual ones)
	running  int  // copies whose function has not returned
	held     bool // a pushback holds the next copy back until the timer
	// placedProbe is set while the replica Place picked for the next copy
	// is the probe of a replica on probation (see probationFailures).
	placedProbe bool
	decided     bool
	decidedAt   time.Duration
	winner      int // index of the winning copy, or -1
	val         T
	errs        []error // of failed copies, in the order they failed
	pnc         *PanicError
	done        chan struct{} // made by a waiter, closed when it may go
	closed      bool
	returned    bool // the caller has taken the outcome
}

type copyState struct {
	own     *copyCtx           // the copy's context, if Do made it by newCopyCtx
	cancel  context.CancelFunc // else its cancel; nil for a lone copy
	start   time.Duration
	replica int32
	hedge   bool // holds a MaxHedgesInFlight slot
	fanSlot bool // holds a slot of its fan-out's cap (FanOut.InFlight)
	done    bool // the copy's function has returned
	probe   bool // the probe of a replica on probation
	// failover marks a copy sent in place of one that never reached its
	// server ([ErrNotSent]): the request itself, sent again, not a hedge.
	failover bool
}

// stop cancels the copy's context, if Do made one for it.
func (cs *copyState) stop() {
	if cs.own != nil {
		cs.own.cancel()
	} else if cs.cancel != nil {
		cs.cancel()
	}
}

// stopFunc returns stop as a function for [DoHeld]'s release.
func (cs *copyState) stopFunc() func() {
	switch {
	case cs.own != nil:
		return cs.own.cancel
	case cs.cancel != nil:
		return cs.cancel
	}
	return noRelease
}

// run starts the primary, waits for the outcome and returns it, with
// [DoHeld]'s release.
func (c *call[T]) run() (T, func(), error) {
	c.mu.Lock()
	ctx, a := c.launch(0, c.plan.Start, -1, false)
	// Copies due now (a zero delay) go at once, as far as the Policy
	// allows; later ones on the timer. Arm it only now, under the lock:
	// it must find the primary launched.
	c.h.pol.Schedule(&c.plan, c.plan.Start, c)
	c.mu.Unlock()
	held := false // complete kept c.mu for the wait
	if c.h.bgReap {
		go c.runCopy(ctx, a, false)
	} else {
		held = c.runCopy(ctx, a, true)
	}
	if !held {
		c.mu.Lock()
	}
	c.waitLocked()
	return c.result()
}

// pick returns the replica for copy i at now, by the [Hedger]'s Picker,
// leaving out those in skip as if they held a copy, and whether the copy
// is the probe of a replica on probation (see probationFailures), which
// the copy must give back (probation.ended) if it does not go. c.mu is
// held.
func (c *call[T]) pick(i int, now time.Duration, skip ...int) (replica int, probe bool) {
	var buf [HardMaxAttempts + decide.MaxCandidates]int
	held := buf[:i]
	for j := range i {
		held[j] = int(c.copies[j].replica)
	}
	held = append(held, skip...)
	h := c.h
	// Copies are routed by the [Hedger]'s own view, reports or not: a
	// report is fresh for few of the replicas, and its count of every
	// client's requests cannot be weighed against another replica's count
	// of this [Hedger]'s alone (Place reads the chosen replicas' reports).
	load := h.loadFn
	if c.plan.Holdout {
		load = h.unhedgedLoad
	}
	if !h.prob.any() {
		return h.pickIn(c.shard, held, load), false
	}
	return c.pickAround(held, now, load)
}

// pickAround is pick while some replica is on probation: those out of
// the picks, or whose probe is out, are left out as if they held a copy,
// unless that leaves none.
//
// With [Config.Shards], only the servers of the call's shard are
// candidates.
func (c *call[T]) pickAround(held []int, now time.Duration, load func(int) int) (int, bool) {
	h := c.h
	cand := h.candidates(c.shard)
	n := len(h.replicas)
	if cand != nil {
		n = len(cand)
	}
	ex := slices.Clone(held)
	for k := range n {
		r := k
		if cand != nil {
			r = cand[k]
		}
		if h.prob.excluded(r, now) && !slices.Contains(held, r) {
			ex = append(ex, r)
		}
	}
	for len(ex) < n {
		r := h.pickIn(c.shard, ex, load)
		if r < 0 {
			break
		}
		if probe, ok := h.prob.takeProbe(r, now); ok {
			return r, probe
		}
		ex = append(ex, r) // another copy took its probe just now
	}
	// Every replica is held or out: a copy goes to one anyway.
	return h.pickIn(c.shard, held, load), false
}

// launch prepares copy i, sent at now: its replica (replica, if not -1,
// else one picked now; probe if it is a probation's probe), context and
// bookkeeping. c.mu is held.
func (c *call[T]) launch(i int, now time.Duration, replica int, probe bool) (context.Context, Attempt) {
	// A copy is a hedge only if another is still running: one sent after
	// every earlier copy returned stands alone (a failover, or a retry).
	a := Attempt{Index: i, Replica: -1, Shard: c.shard, Key: c.key, Hedge: c.running > 0}
	if c.h.replicas != nil {
		if replica < 0 {
			replica, probe = c.pick(i, now)
		}
		a.Replica = replica
		c.h.reps[replica].copies.Add(1)
		n := c.h.replicas[replica].Add(1)
		fo := &c.h.fanOuts[replica]
		switch {
		case n == 1:
			// Stored only if they change: a store is an atomic exchange
			// (and the pointer's a write barrier while the collector
			// marks), and a replica mostly serves calls of no fan-out.
			if fo.fan.Load() != c.fan {
				fo.fan.Store(c.fan)
			}
			if pure := c.fan != nil; fo.pure.Load() != pure {
				fo.pure.Store(pure)
			}
		case fo.fan.Load() != c.fan && fo.pure.Load():
			fo.pure.Store(false)
		}
		sent := c.h.sent[replica].Add(1)
		if i == 0 {
			c.ahead, c.leftAt, c.byRep = n-1, c.h.left[replica].Load(), false
			load := int(n - 1)
			if rep := c.h.reports[replica].Load(); rep != nil && c.h.pol.Fresh(rep.At, now) {
				// The server's report says how many requests were
				// ahead of the primary, whoever sent them.
				load = rep.Ahead(int(sent - 1))
				c.repAhead, c.repDoneAt, c.byRep = int64(load), rep.Done, true
			}
			c.h.pol.Placed(load, c.fan != nil && fo.pure.Load() && fo.fan.Load() == c.fan)
		}
	}
	ctx, cancel, own := c.parent, context.CancelFunc(nil), (*copyCtx)(nil)
	switch {
	case c.h.attemptTO > 0:
		ctx, cancel = context.WithTimeout(c.parent, c.h.attemptTO)
	case c.plan.Single():
		// A lone copy is never cancelled by Do: it can use the caller's
		// context as it is.
	default:
		// WithCancel, made only if the copy watches its context.
		own = newCopyCtx(c.parent)
		ctx = own
	}
	// Field by field: each copy's slot is launched once and is zero
	// until then (reset clears the first of a reused call), so that a
	// pointer not set costs no write barrier.
	cs := &c.copies[i]
	if own != nil || cs.own != nil {
		cs.own = own
	}
	if cancel != nil || cs.cancel != nil {
		cs.cancel = cancel
	}
	cs.replica, cs.start, cs.probe = int32(a.Replica), now, probe
	cs.hedge, cs.fanSlot, cs.done, cs.failover = false, false, false, false
	c.launched++
	c.running++
	return ctx, a
}

// runCopy runs one copy and reports its outcome. A panic that arrives after
// the caller has returned (possible only with ReapInBackground) has nobody
// to be re-raised to, so it is raised here, like any goroutine's panic.
//
// hold is set for the primary on the caller's goroutine, which waits for
// the outcome next: when nothing is left to do outside the lock, complete
// keeps c.mu for that wait, and runCopy reports it (held), so that a fast
// call takes the lock once fewer.
func (c *call[T]) runCopy(ctx context.Context, a Attempt, hold bool) (held bool) {
	returned := false
	defer func() {
		if !returned {
			c.exited(a)
		}
	}()
	v, p, err := c.invoke(ctx, a)
	returned = true
	late, lost, held := c.complete(a.Index, v, err, p, hold)
	if lost && c.discard != nil {
		c.discard(v)
	}
	if late {
		panic(p)
	}
	return held
}

// exited runs on a goroutine that is unwinding because the attempt
// function called runtime.Goexit (t.FailNow does), which recover cannot
// see. The copy is completed with [ErrGoexit], which ends the call, so that
// the caller does not wait forever for a copy that will never report. If
// the copy ran on the caller's own goroutine, that goroutine is ending and
// will not return from Do: it still waits for the other copies, so that
// nothing the call started outlives it.
func (c *call[T]) exited(a Attempt) {
	var zero T
	c.complete(a.Index, zero, ErrGoexit, nil, false)
	if a.Index == 0 && !c.h.bgReap {
		c.wait()
		c.returned = true
		c.mu.Unlock()
	}
}

// ErrGoexit ends a call whose attempt function called runtime.Goexit, as
// t.FailNow, t.Fatal and t.SkipNow do. Those must be called from the test's
// own goroutine: inside an attempt, report with t.Error and return an
// error instead.
var ErrGoexit = errors.New("hedge: the attempt function called runtime.Goexit (t.FailNow, t.Fatal or t.SkipNow inside an attempt?); return an error instead")

// invoke runs the copy's function, and returns its panic as p if it
// panicked.
func (c *call[T]) invoke(ctx context.Context, a Attempt) (v T, p *PanicError, err error) {
	defer func() {
		if r := recover(); r != nil {
			p = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	if c.leaf != nil {
		v, err = c.leaf.fn(ctx, c.leaf.i, a)
	} else {
		v, err = c.fn(ctx, a)
	}
	return v, nil, err
}

// complete records the outcome of copy i. It reports whether p is a panic
// that the caller can no longer see, and whether v is a success that lost.
// With hold, it returns with c.mu still held when neither is the case
// (held).
func (c *call[T]) complete(i int, v T, err error, p *PanicError, hold bool) (late, lost, held bool) {
	h, st := c.h, c.st
	now := h.now()
	c.mu.Lock()
	defer func() {
		if !held {
			c.mu.Unlock()
		}
	}()
	c.running--
	cs := &c.copies[i]
	cs.done = true
	ran := now - cs.start
	if cs.hedge {
		h.pol.Done()
	}
	if cs.fanSlot {
		c.plan.Fan.Done()
	}
	if cs.replica >= 0 {
		h.replicas[cs.replica].Add(-1)
		c.replicaOutcome(cs, ran, now, err, p)
		if !c.decided || err == nil {
			// The replica answered: a copy cancelled because the call
			// was decided is no evidence of its progress.
			h.left[cs.replica].Add(1)
			h.ghost[cs.replica].Store(0)
			if h.lost[cs.replica].Load() != 0 {
				h.lost[cs.replica].Store(0)
			}
		} else if c.winner >= 0 && c.winner != i {
			h.lost[cs.replica].Add(1)
			// Cancelled because another copy won: its replica may be
			// stuck, so the picker counts the copy as load there until
			// the replica answers something, or for a while.
			if g := h.pol.Ghost(c.plan.Delay); g > 0 {
				h.ghost[cs.replica].Store(int64(decide.AddSat(now, g)))
			}
		}
	}
	if i > 0 && p == nil && err == nil && !cs.failover {
		st.hedge.Record(int64(ran))
	}
	wasDecided := c.decided
	switch {
	case p != nil:
		if c.pnc == nil {
			c.pnc = p
		}
		if c.h.onEvent != nil {
			c.event(Event{Kind: CopyPanicked, Copy: i, Replica: int(cs.replica), Panic: p}, now)
		}
		c.decide(-1, now)
	case wasDecided:
	case err == nil:
		c.val = v
		c.decide(i, now)
		if i > 0 && !c.copies[0].done {
			// A hedge won while the primary was still running: a call
			// the hedge rescued (not one that replaced a failed primary).
			st.rescued.Add(1)
		}
		if i > 0 && !cs.failover && c.h.onEvent != nil {
			c.event(Event{Kind: HedgeWon, Copy: i, Replica: int(cs.replica)}, now)
		}
	default:
		c.errs = append(c.errs, &CopyError{Index: i, Err: err})
		switch {
		case err == ErrGoexit:
			c.decide(-1, now)
		case errors.Is(err, errPushback):
			h.pol.Failed(&c.plan)
			c.decide(-1, now)
		case c.parent.Err() != nil:
			c.decide(-1, now)
		case errors.Is(err, ErrNotSent):
			// No server saw the copy: the request goes again at once, to
			// another replica, if it may go at all.
			c.failover(now)
		case !h.retryable(err):
			c.decide(-1, now)
		case errors.As(err, new(pushbackAfter)):
			// The server asks for a pause before the next copy, or for
			// none: copies still running go on.
			h.pol.Failed(&c.plan)
			var pa pushbackAfter
			errors.As(err, &pa)
			c.h.timers.remove(&c.timer)
			c.held = false
			if at := h.pol.Hold(&c.plan, now, pa.after); at != Never {
				c.held = true
				c.h.timers.add(&c.timer, at)
			}
		case c.plan.Single():
		default:
			// A throttle debits each copy that failed in a way another
			// copy could fix, as gRPC's does: not for final errors,
			// which say nothing about the servers' health.
			h.pol.Failed(&c.plan)
			// A fast failure is evidence enough: the next copy goes now.
			h.pol.Try(&c.plan, now, true, c)
		}
		if c.running == 0 && !c.held {
			c.decide(-1, now)
		}
	}
	if i == 0 {
		c.observePrimary(now, err, p, wasDecided)
		if wasDecided && err == nil && p == nil && c.winner > 0 {
			// A primary that ran on to success after a hedge won: the
			// hedge saved at least the difference.
			st.saved.Add(int64(now - c.decidedAt))
		}
	}
	if wasDecided {
		// This copy was still running when another decided the call.
		st.wasted.Add(int64(ran))
	}
	c.wake()
	if !(c.keep && c.winner == i) {
		cs.stop()
	}
	late, lost = p != nil && c.returned, wasDecided && err == nil && p == nil
	return late, lost, hold && !late && !lost
}

// replicaOutcome records what copy cs, which ran for ran and returned at
// now, says about its replica: its stats, and its probation (see
// probationFailures). c.mu is held; c.decided is as it was before the
// copy returned.
func (c *call[T]) replicaOutcome(cs *copyState, ran, now time.Duration, err error, p *PanicError) {
	h, r := c.h, int(cs.replica)
	rs := &h.reps[r]
	switch {
	case p == nil && err == nil:
		rs.succeeded(now, ran)
		h.prob.answered(r)
		return
	case p != nil || c.decided || c.parent.Err() != nil:
		// Cancelled because the call was decided or the caller gave up,
		// or a panic of the caller's own code: nothing about the replica.
	case errors.Is(err, errPushback) || errors.As(err, new(pushbackAfter)):
		// The server asks for less: alive, and answering.
		rs.errors.Add(1)
		h.prob.answered(r)
		return
	case errors.Is(err, ErrNotSent) || h.retryable(err):
		rs.errors.Add(1)
		h.prob.failed(r, now, cs.probe)
		return
	default:
		// A final error is an answer.
		rs.errors.Add(1)
		h.prob.answered(r)
		return
	}
	if cs.probe {
		h.prob.ended(r)
	}
}

// failover sends the copy that replaces one that never reached its
// server (see [ErrNotSent]), if the Policy lets the request go again, and
// otherwise fails the call if nothing else runs. c.mu is held.
//
// With [Config.Shards], the copy goes only to another server of the
// call's shard, and none goes when the shard has no other.
func (c *call[T]) failover(now time.Duration) {
	if c.plan.Mode == decide.Off {
		return
	}
	replica, probe := -1, false
	if c.shard >= 0 {
		if replica, probe = c.pick(c.launched, now); replica < 0 {
			return
		}
	}
	if c.h.pol.Failover(&c.plan, now) != decide.Allowed {
		if probe {
			c.h.prob.ended(replica)
		}
		return
	}
	ctx, a := c.launch(c.launched, now, replica, probe)
	c.copies[a.Index].failover = true
	c.st.failovers.Add(1)
	go c.runCopy(ctx, a, false)
}

// Place is decide.Runtime.Place: the replica the next copy would go to, picked
// now, and its load (see place). A probe of a replica on probation is
// remembered, to be given back if the copy does not go. c.mu is held.
func (c *call[T]) Place(now time.Duration) (replica, load int, byReport bool) {
	if c.h.replicas == nil {
		return -1, -1, false
	}
	replica, load, byReport = c.place(now)
	if byReport {
		c.st.byReport.Add(1)
	} else {
		c.st.byOwnView.Add(1)
	}
	return replica, load, byReport
}

// Evidence is decide.Runtime.Evidence: what the [Hedger] sees of the
// primary's replica (see decide.Behind), or decide.EvidenceNone when it
// does not pick replicas.
// c.mu is held.
func (c *call[T]) Evidence() decide.Evidence {
	if c.h.replicas == nil {
		return decide.EvidenceNone
	}
	r := c.copies[0].replica
	ev := decide.Behind(c.ahead, c.h.left[r].Load()-c.leftAt)
	if c.byRep {
		ev = decide.Reported(ev, int(c.repAhead), c.repDoneAt, c.h.reports[r].Load().Done)
	}
	return ev
}

// Launch is decide.Runtime.Launch: it starts the admitted hedge on replica (-1:
// one picked now) in its own goroutine or, in Shadow mode, counts it.
// c.mu is held.
func (c *call[T]) Launch(now time.Duration, replica int, g decide.Grant) bool {
	probe := c.placedProbe
	c.placedProbe = false
	st := c.st
	if g.Shadow() {
		if probe {
			c.h.prob.ended(replica) // the probe does not go
		}
		st.shadowHedges.Add(1)
		if c.h.onEvent != nil {
			c.event(Event{Kind: HedgeSent, Shadow: true, Copy: c.plan.Copies - 1, Replica: -1}, now)
		}
		return true
	}
	if replica < 0 && c.shard >= 0 {
		// A shard's servers may all hold a copy already.
		if replica, probe = c.pick(c.launched, now); replica < 0 {
			return false
		}
	}
	ctx, a := c.launch(c.launched, now, replica, probe)
	c.copies[a.Index].hedge = g.HoldsSlot()
	c.copies[a.Index].fanSlot = g.HoldsFanSlot()
	st.hedges.Add(1)
	if a.Replica >= 0 {
		c.h.reps[a.Replica].hedges.Add(1)
	}
	if c.shard >= 0 {
		st.shards[c.shard].hedges.Add(1)
	}
	if c.h.onEvent != nil {
		c.event(Event{Kind: HedgeSent, Copy: a.Index, Replica: a.Replica}, now)
	}
	go c.runCopy(ctx, a, false)
	return true
}

// Arm is decide.Runtime.Arm: the call's timer, in the [Hedger]'s timer queue.
// c.mu is held.
func (c *call[T]) Arm(at time.Duration) { c.h.timers.add(&c.timer, at) }

// Refused is decide.Runtime.Refused: it counts the refusal in the operation's
// stats, reports it to [Config.OnEvent], and gives back the probe of a
// replica on probation that placed was for. c.mu is held.
func (c *call[T]) Refused(now time.Duration, why Refusal, placed int) {
	if c.placedProbe {
		c.placedProbe = false
		c.h.prob.ended(placed) // the probe does not go
	}
	c.st.refused[why].Add(1)
	if c.h.onEvent != nil {
		c.event(Event{Kind: HedgeRefused, Refusal: why, Copy: -1, Replica: -1}, now)
	}
}

// event reports e to [Config.OnEvent], filling in the call's operation
// class and the time since it started. Callers check that OnEvent is set
// first, so that an unset hook does not even build the Event. c.mu is
// held.
func (c *call[T]) event(e Event, now time.Duration) {
	e.Op, e.Elapsed = c.st.name, now-c.plan.Start
	c.h.onEvent(e)
}

// observePrimary feeds the primary's own latency to the stats and the delay
// estimator, as the Policy's decide.Plan.PrimarySample says.
func (c *call[T]) observePrimary(now time.Duration, err error, p *PanicError, wasDecided bool) {
	if p != nil {
		return
	}
	hedgeWon := Never
	if wasDecided && c.winner > 0 {
		hedgeWon = c.decidedAt
	}
	sample, censored, ok := c.plan.PrimarySample(now, err == nil, hedgeWon)
	if !ok {
		return
	}
	st := c.st
	if censored {
		st.censored.Add(1)
	}
	if !c.alone() {
		// outcome records a primary that won alone, for both.
		st.primary.Record(int64(sample))
	}
	st.est.Observe(now, sample)
}

// alone reports whether the call was decided by its primary's success
// with no other copy sent: its latency is then the primary's, and outcome
// records it once, in opState.alone, for both. c.mu is held.
func (c *call[T]) alone() bool { return c.decided && c.winner == 0 && c.launched == 1 }

// decide fixes the outcome (winner -1 for an error) and cancels every other
// copy. The winner is recorded before the cancels, so that a loser seeing
// its context end can never be taken for the outcome. c.mu is held.
func (c *call[T]) decide(winner int, now time.Duration) {
	if c.decided {
		return
	}
	c.decided = true
	c.decidedAt = now
	c.winner = winner
	c.h.timers.remove(&c.timer)
	for j := range c.launched {
		if j != winner {
			c.copies[j].stop()
		}
	}
}

// wake lets a waiting caller go if it may. c.mu is held.
func (c *call[T]) wake() {
	if c.done != nil && !c.closed && c.mayGo() {
		c.closed = true
		close(c.done)
	}
}

// mayGo reports whether the caller may return. c.mu is held.
func (c *call[T]) mayGo() bool {
	return c.decided && (c.running == 0 || c.h.bgReap)
}

// wait blocks until the caller may return, and returns with c.mu held.
func (c *call[T]) wait() {
	c.mu.Lock()
	c.waitLocked()
}

// waitLocked is wait for a caller that holds c.mu already.
func (c *call[T]) waitLocked() {
	if c.mayGo() {
		return
	}
	c.done = make(chan struct{})
	c.mu.Unlock()
	select {
	case <-c.done:
		c.mu.Lock()
		return
	case <-c.parent.Done():
	}
	// The caller's context ended. Copies see it and return on their own;
	// but with ReapInBackground (whose point is returning early), or when
	// no copy runs because a pushback holds the next one back, nobody
	// else would end the call.
	c.mu.Lock()
	if !c.decided && (c.h.bgReap || c.running == 0) {
		c.errs = append(c.errs, c.parent.Err())
		c.decide(-1, c.h.now())
	}
	if c.mayGo() {
		return
	}
	c.mu.Unlock()
	<-c.done
	c.mu.Lock()
}

// result turns the outcome into Do's return values (with [DoHeld]'s
// release) and records the call's stats. The caller may return: c.decided
// is true and no copy will change winner, val, errs or pnc any more.
// c.mu is held, and released on return; c may be used again by then.
func (c *call[T]) result() (v T, release func(), err error) {
	c.returned = true
	if p := c.pnc; p != nil {
		c.freeWinner()
		panic(p)
	}
	v, err = c.outcome()
	release = noRelease
	if c.winner >= 0 && c.keep {
		release = c.copies[c.winner].stopFunc()
	}
	reuse := c.reusable()
	c.mu.Unlock()
	if reuse {
		c.reset()
		c.h.calls.Put(c)
	}
	return v, release, err
}

// reset readies c, which launched one copy and which nothing else
// touches any more (reusable), for another call of its [Hedger]: every
// field of callState as begin expects it, that is zero but for h, st and
// plan, which begin sets afresh (TestCallReset checks it), and the first
// copy's state zero. It drops what the caller's call held (its context,
// function and result), so that a pooled call keeps none of it alive.
//
// It writes each field rather than assigning a zero callState: while the
// garbage collector marks, a whole-struct assignment runs a write barrier
// over every pointer slot of the struct, and that was a tenth of a fast
// call (BENCHMARKS.md, "The decision's cost"). A pointer that is nil
// already is not written at all.
func (c *call[T]) reset() {
	var zero T
	cs := &c.callState
	cs.parent, cs.fn, cs.val = nil, nil, zero
	if cs.key != "" {
		cs.key = ""
	}
	if cs.fan != nil {
		cs.fan = nil
	}
	if cs.leaf != nil {
		cs.leaf = nil
	}
	if cs.discard != nil {
		cs.discard = nil
	}
	if cs.errs != nil {
		cs.errs = nil
	}
	if cs.pnc != nil {
		cs.pnc = nil
	}
	if cs.done != nil {
		cs.done = nil
	}
	cs.shard, cs.keep = 0, false
	cs.ahead, cs.leftAt, cs.repAhead, cs.repDoneAt, cs.byRep = 0, 0, 0, 0, false
	cs.timer.at, cs.timer.slot, cs.timer.armed, cs.timerDue = 0, 0, false, false
	cs.launched, cs.running, cs.held, cs.placedProbe = 0, 0, false, false
	cs.decided, cs.decidedAt, cs.winner = false, 0, 0
	cs.closed, cs.returned = false, false
	cp := &c.copies[0]
	if cp.own != nil {
		cp.own = nil
	}
	if cp.cancel != nil {
		cp.cancel = nil
	}
	cp.start, cp.replica = 0, 0
	cp.hedge, cp.fanSlot, cp.done, cp.probe, cp.failover = false, false, false, false, false
}

// reusable reports whether nothing can touch c once the caller returns,
// so that another call may use it: the primary alone ran, on the caller's
// goroutine, and the timer queue never took the call's timer to fire it
// (fire would then run late, on whatever call c had become). A leaf of
// [DoFan] is never reused: it lives in its fan-out's array. c.mu is held.
func (c *call[T]) reusable() bool {
	return c.launched == 1 && !c.h.bgReap && !c.timerDue && c.leaf == nil
}

// outcome records the call's stats and returns its value or error. c.mu
// is held.
func (c *call[T]) outcome() (T, error) {
	h, st := c.h, c.st
	// What the caller waited: until the decision, and then for the losers
	// to return unless they are reaped in the background. A call that
	// launched one copy returns at the decision.
	end := c.decidedAt
	if c.launched > 1 && !h.bgReap {
		end = max(h.now(), end)
	}
	if c.alone() {
		// The primary's latency too: observePrimary left it to this.
		st.alone.Record(int64(end - c.plan.Start))
	} else {
		st.latency.Record(int64(end - c.plan.Start))
	}
	if c.plan.Holdout {
		st.holdout.Record(int64(end - c.plan.Start))
	}
	if c.winner >= 0 {
		w := &c.copies[c.winner]
		switch {
		case c.alone():
			// Counted by the record in st.alone: see opState.stats.
		case c.winner == 0 || w.failover:
			st.primaryWins.Add(1)
		default:
			st.hedgeWins.Add(1)
			if w.replica >= 0 {
				h.reps[w.replica].hedgeWins.Add(1)
			}
			if c.shard >= 0 {
				st.shards[c.shard].hedgeWins.Add(1)
			}
		}
		h.pol.Succeeded(&c.plan, c.decidedAt, c.winner > 0 && !w.failover)
		return c.val, nil
	}
	if c.leaf == nil || context.Cause(c.parent) != ErrNotNeeded {
		// A leaf of [DoFan] cancelled because its fan-out had the leaves
		// it needed did not fail: [FanStats.NotNeeded] counts it.
		st.failures.Add(1)
		if c.shard >= 0 && c.leaf == nil {
			// DoShard's; DoFan counts its leaves' own failures.
			st.shards[c.shard].failures.Add(1)
		}
	}
	var zero T
	if len(c.errs) == 1 {
		if ce, ok := c.errs[0].(*CopyError); ok {
			return zero, ce.Err
		}
		return zero, c.errs[0]
	}
	return zero, &AttemptsError{Errs: c.errs}
}

// freeWinner releases c.mu and, for [DoHeld], frees a winner that the caller
// will never see because a copy panicked after the winner was chosen: its
// result goes to discard and its context is cancelled.
func (c *call[T]) freeWinner() {
	var val T
	var winner copyState
	held := c.keep && c.winner >= 0
	if held {
		val, winner = c.val, c.copies[c.winner]
		c.val = *new(T)
	}
	c.mu.Unlock()
	if !held {
		return
	}
	if c.discard != nil {
		c.discard(val)
	}
	winner.stop()
}

// due marks the call's timer as taken by the timer queue, to be fired.
// The queue's lock is held.
func (c *call[T]) due() { c.timerDue = true }

// fire runs when the delay since the last copy has passed: the timer was
// due at at. How late it fired is recorded ([Stats.TimerLag]).
func (c *call[T]) fire(at time.Duration) {
	now := c.h.now()
	c.st.timerLag.Record(int64(now - at))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	if c.decided {
		return
	}
	if c.h.pol.Fire(&c.plan, now, c) != decide.Allowed && c.running == 0 {
		// Only a copy held back by a pushback was left, and it may not
		// go: the call has failed.
		c.decide(-1, now)
		c.wake()
	}
}
