package hedge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The reasons [DoFan] gives for a leaf that did not answer, in
// [FanResult.Errs]; a leaf whose own copies failed has its own error there
// instead.
var (
	// ErrNotNeeded is the error of a leaf cancelled because [FanOut.Need]
	// leaves had answered.
	ErrNotNeeded = errors.New("hedge: leaf cancelled: the fan-out had the leaves it needed (FanOut.Need)")
	// ErrLate is the error of a leaf cancelled because it had not
	// answered when the fan-out's answer was good enough
	// ([FanOut.GoodEnough]). A leaf never sent because that time came while
	// the canaries ran has an error of its own that matches [ErrLate]
	// (errors.Is).
	ErrLate = errors.New("hedge: leaf cancelled: no answer by the fan-out's good-enough time (FanOut.GoodEnough)")
	// ErrNotSentCanary is the error of a leaf that was never sent because
	// a canary failed ([FanOut.Canaries]).
	ErrNotSentCanary = errors.New("hedge: leaf not sent: a canary of the fan-out failed (FanOut.Canaries)")
	// ErrNotSentNeedMet is the error of a leaf that was never sent because
	// the canaries alone were the leaves the fan-out needed
	// ([FanOut.Canaries], [FanOut.Need]). It is no failure: the fan-out
	// answered.
	ErrNotSentNeedMet = errors.New("hedge: leaf not sent: the canaries were the leaves the fan-out needed (FanOut.Need)")
	// ErrFanOutFailed is the error of a leaf cancelled because the
	// fan-out had failed: so many leaves had failed that [FanOut.Need]
	// could no longer answer.
	ErrFanOutFailed = errors.New("hedge: leaf cancelled: too many other leaves of the fan-out failed for FanOut.Need to answer")
)

// errNotSentLate is the error of a leaf never sent because the fan-out's
// good-enough time came while its canaries ran. It matches [ErrLate].
var errNotSentLate error = notSentLate{}

type notSentLate struct{}

func (notSentLate) Error() string {
	return "hedge: leaf not sent: the fan-out's good-enough time came while its canaries ran (FanOut.GoodEnough)"
}

func (notSentLate) Unwrap() error { return ErrLate }

// errFanOutKey is [DoFan]'s error for a context that carries an idempotency
// key ([WithIdempotencyKey]), which every leaf would share although each
// is a request of its own. It matches [ErrInvalidConfig].
var errFanOutKey = invalidConfig{[]error{errors.New("hedge: DoFan's context carries an idempotency key, which every leaf would share: leaves are distinct requests, so give each its own key in the leaf function's request instead")}}

// FanResult is what [DoFan] returns: each leaf's value or the reason it has
// none, in leaf order.
type FanResult[T any] struct {
	// Values holds each leaf's value; a leaf that did not answer has T's
	// zero value.
	Values []T
	// Errs holds nil for each leaf that answered, and otherwise why it
	// did not: its own error (as Do would have returned it), or one of
	// [ErrNotNeeded], [ErrLate], [ErrNotSentCanary], [ErrNotSentNeedMet] and
	// [ErrFanOutFailed] (match them with errors.Is). A leaf never sent
	// because the caller's context ended first has the context's error.
	Errs []error
}

// FanError is [DoFan]'s error when fewer leaves answered than the fan-out
// needed. errors.Is and errors.As see through it to Cause and to every
// leaf's error.
type FanError struct {
	// Leaves holds each leaf's error, as [FanResult.Errs].
	Leaves []error
	// Answered is how many leaves answered, and Need how many the fan-out
	// needed.
	Answered, Need int
	// Cause is what ended the fan-out early, if anything but its leaves'
	// failures did: [ErrLate] for [FanOut.GoodEnough], [ErrNotSentCanary] for a
	// failed canary, or the caller's context's error.
	Cause error
}

func (e *FanError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hedge: fan-out: %d of %d leaves answered, %d needed", e.Answered, len(e.Leaves), e.Need)
	if e.Cause != nil {
		fmt.Fprintf(&b, " (%v)", e.Cause)
	}
	shown := 0
	for i, err := range e.Leaves {
		if err == nil || isCut(err) {
			continue
		}
		if shown == 3 {
			b.WriteString("; ...")
			break
		}
		fmt.Fprintf(&b, "; leaf %d: %v", i, err)
		shown++
	}
	return b.String()
}

// isCut reports whether err is one of the reasons [DoFan] gives for a leaf
// it cut, rather than the leaf's own error.
func isCut(err error) bool {
	return err == ErrNotNeeded || err == ErrLate || err == errNotSentLate || err == ErrNotSentCanary || err == ErrNotSentNeedMet || err == ErrFanOutFailed
}

// Unwrap returns Cause, if any, and each leaf's error.
func (e *FanError) Unwrap() []error {
	errs := make([]error, 0, len(e.Leaves)+1)
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	for _, err := range e.Leaves {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// leafState is a [DoFan] leaf's own part of its call: which leaf it is, the
// leaf function, and its outcome.
type leafState[T any] struct {
	fn  func(ctx context.Context, i int, a Attempt) (T, error)
	i   int
	v   T
	err error
	pnc *PanicError
	end time.Duration // when the call returned
}

// fanLeaf is a leaf of [DoFan]: its call and its own state, in one array
// for the whole fan-out.
type fanLeaf[T any] struct {
	call[T]
	own        leafState[T]
	sent, back bool  // the caller's goroutine sent it, and saw it return
	cut        error // why the fan-out cancelled it, if it ended before the leaf returned
}

// DoFan runs a fan-out request: n leaves (leaf(ctx, i, a) for i in [0,
// n)), each through h as Do runs a request, and returns their values in
// leaf order.
//
// The leaves share a budget and a cap on extra copies ([FanOut.Hedges],
// [FanOut.InFlight]) on top of the [Hedger]'s, so that a wide fan-out cannot
// spend the [Hedger]'s budget at once; and a sibling trigger
// ([FanOut.Straggle]): a leaf still running long after most of its
// siblings answered is a straggler, and its hedge is due then, whatever
// the [Hedger]'s delay says. The leaves are marked as one fan-out
// ([WithFanOut]), so that the spare-capacity rule does not take the
// request's own leaves for other work.
//
// [DoFan] returns once [FanOut.Need] leaves (by default all) have answered;
// or at [FanOut.GoodEnough] with what has answered; or as soon as so many
// leaves failed that Need cannot be met, or the caller's context ends.
// The leaves still running are then cancelled, and [DoFan] returns when
// they have returned: no goroutine it started outlives it. With
// [FanOut.Canaries], the first leaves go alone, and the rest only once they
// have all answered, if the fan-out still needs them.
//
// The error is nil when at least Need leaves answered, and otherwise a
// *FanError. Either way the [FanResult] says which leaves answered and why
// the others did not. An invalid FanOut, or a context that carries an
// idempotency key, is an error that matches [ErrInvalidConfig], before
// any leaf goes. A
// context marked [NotIdempotent] sends every leaf once, unhedged.
//
// On a [Hedger] with [Config.Shards], leaf i's copies go only to the
// servers of its shard ([FanOut.Shard]; by default i mod the number of
// shards), and [Attempt.Shard] names it. [Stats.Shards] counts each
// shard's leaves, hedges and stragglers.
//
// Each leaf runs on a goroutine of its own; everything else is as in Do,
// per leaf, in h's operation class op: a panic in any leaf is re-raised
// on the caller's goroutine as a *PanicError once every leaf has
// returned. [Stats.Fan] counts the fan-outs.
func DoFan[T any](ctx context.Context, h *Hedger, op string, n int, f FanOut, leaf func(ctx context.Context, i int, a Attempt) (T, error)) (FanResult[T], error) {
	if err := f.validate(n); err != nil {
		return FanResult[T]{}, err
	}
	if f.Shard != nil && h.shards == nil {
		return FanResult[T]{}, errFanShard
	}
	in, _ := ctx.Value(marksKey{}).(*marks)
	if in != nil && in.key != "" {
		return FanResult[T]{}, errFanOutKey
	}
	need := f.Need
	if need == 0 {
		need = n
	}
	res := FanResult[T]{Values: make([]T, n), Errs: make([]error, n)}
	st := h.op(op)
	st.fan.requests.Add(1)
	st.fan.leaves.Add(int64(n))
	if n == 0 {
		return res, nil
	}
	r := &fanRun[T]{h: h, st: st, n: n, need: need, canaries: f.Canaries, fn: leaf, lay: h.layout(&f, n)}
	r.marks.fan = &r.fo
	r.fo.call = true
	if in != nil {
		r.marks.write = in.write
	}
	r.start = h.now()
	if r.lay.sharded() {
		r.fo.dec.Reset(f.fanConfigShards(n, h.fanDefaults(r.lay, n)))
	} else {
		r.fo.dec.Reset(f.fanConfig(n, len(h.replicas)))
	}
	r.leaves = make([]fanLeaf[T], n)
	r.back = make(chan int, n)
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)
	var late <-chan time.Time
	if f.GoodEnough > 0 {
		t := time.NewTimer(f.GoodEnough)
		defer t.Stop()
		late = t.C
	}
	first := n
	if f.Canaries > 0 {
		first = f.Canaries
	}
	for i := range first {
		r.send(i)
	}
	for r.running > 0 && !r.ended {
		select {
		case i := <-r.back:
			r.returned(i)
		case <-late:
			r.stop(ErrLate, ErrLate)
		case <-ctx.Done():
			r.stop(nil, ctx.Err())
		}
	}
	// Reap: every leaf still running was cancelled, and returns.
	for r.running > 0 {
		r.returned(<-r.back)
	}
	return r.result(&res)
}

// fanRun is the state of one [DoFan] call. The caller's goroutine alone
// touches it, but for the leaves' calls, which run on their own.
type fanRun[T any] struct {
	h        *Hedger
	st       *opState
	fn       func(ctx context.Context, i int, a Attempt) (T, error)
	n, need  int
	canaries int
	lay      fanLayout // each leaf's shard, with Config.Shards
	fo       fanOut
	marks    marks
	leaves   []fanLeaf[T]
	back     chan int // leaves that returned
	ctx      context.Context
	cancel   context.CancelCauseFunc

	start    time.Duration
	running  int  // leaves sent that have not returned
	answered int  // leaves that answered, before the end or after
	failed   int  // leaves whose own copies failed
	ended    bool // the fan-out has ended: the leaves still running are cancelled
	cause    error
	unsent   error // the error of the leaves never sent, once ended
	pnc      *PanicError
}

// send starts leaf i on a goroutine of its own. A leaf whose shard is
// out of range fails at once: its return is on r.back, unsent.
func (r *fanRun[T]) send(i int) {
	l := &r.leaves[i]
	l.own.fn, l.own.i = r.fn, i
	l.leaf = &l.own
	l.sent = true
	r.running++
	shard := -1
	if r.lay.sharded() {
		if shard = r.lay.of(i); !r.h.validShard(shard) {
			l.own.err = shardError(r.h, shard, i)
			r.back <- i // buffered for every leaf
			return
		}
		r.st.shards[shard].leaves.Add(1)
	}
	l.begin(r.ctx, r.h, r.st, nil, &r.marks, shard)
	go l.run(r.back)
}

// shard returns leaf i's shard state, or nil without Config.Shards or
// for a leaf whose shard is out of range.
func (r *fanRun[T]) shard(i int) *shardState {
	if !r.lay.sharded() || !r.h.validShard(r.lay.of(i)) {
		return nil
	}
	return &r.st.shards[r.lay.of(i)]
}

// run runs the leaf's call on its goroutine and reports its return on
// back, whatever happens: a panic re-raised by the call, or the leaf's
// own goroutine exiting (runtime.Goexit in an attempt).
func (l *fanLeaf[T]) run(back chan<- int) {
	ok := false
	defer func() {
		if !ok {
			if p, isPanic := recover().(*PanicError); isPanic {
				l.own.pnc = p
			} else {
				l.own.err = ErrGoexit
			}
			l.own.end = l.h.now()
		}
		back <- l.own.i
	}()
	l.own.v, _, l.own.err = l.call.run()
	l.own.end = l.h.now()
	ok = true
}

// returned takes in the return of leaf i.
func (r *fanRun[T]) returned(i int) {
	l := &r.leaves[i]
	l.back = true
	r.running--
	switch {
	case l.own.pnc != nil:
		if r.pnc == nil {
			r.pnc = l.own.pnc
		}
		r.stop(ErrFanOutFailed, nil)
		return
	case l.own.err != nil:
		if l.cut != nil {
			return // cancelled by the end: its error is the cut
		}
		r.failed++
		if sh := r.shard(i); sh != nil {
			sh.failures.Add(1)
		}
		if i < r.canaries {
			r.stop(ErrFanOutFailed, ErrNotSentCanary)
		} else if r.failed > r.n-r.need {
			r.stop(ErrFanOutFailed, nil)
		}
		return
	}
	r.answered++
	if r.ended {
		return
	}
	if r.fo.dec.Answered(l.own.end, l.plan.Start) {
		// The sibling trigger starts: the leaves still running may be
		// stragglers earlier than their timers say.
		for j := range r.leaves {
			if lj := &r.leaves[j]; lj.sent && !lj.back {
				lj.advance()
			}
		}
	}
	if r.answered >= r.need {
		// The answer the request waited for last.
		if sh := r.shard(i); sh != nil {
			sh.stragglers.Add(1)
		}
		r.stop(ErrNotNeeded, nil)
		return
	}
	if i < r.canaries && r.answered == r.canaries {
		for j := r.canaries; j < r.n; j++ {
			r.send(j)
		}
	}
}

// stop ends the fan-out: the leaves still running are cancelled, and cut
// (nil: their own errors) is the error of those that do not answer after
// all; cause is what ended the request, for [FanError.Cause], or nil when
// its leaves did.
func (r *fanRun[T]) stop(cut, cause error) {
	if r.ended {
		return
	}
	r.ended, r.cause = true, cause
	// A leaf not sent yet waits for the canaries: the fan-out ended
	// before they all answered, or because they were all it needed.
	r.unsent = cmp.Or(cause, cut)
	switch r.unsent {
	case ErrNotNeeded:
		r.unsent = ErrNotSentNeedMet
	case ErrLate:
		r.unsent = errNotSentLate
	}
	for j := range r.leaves {
		if l := &r.leaves[j]; l.sent && !l.back {
			l.cut = cut
		}
	}
	r.cancel(cmp.Or(cause, cut, errFanEnded))
}

// errFanEnded is the cause of a fan-out's context when it ends for no
// other reason to give.
var errFanEnded = errors.New("hedge: the fan-out ended")

// advance brings the leaf's timer forward to when its next copy is now
// due (see decide.Policy.Due), if that is earlier. A leaf whose primary
// has not gone yet is left alone: its goroutine arms its timer when the
// primary goes, with the trigger already in force, and a timer armed
// here before that would be a second one.
func (l *fanLeaf[T]) advance() {
	c := &l.call
	c.mu.Lock()
	if c.launched > 0 && !c.decided && !c.held && c.plan.Copies == 1 {
		if at, _ := c.h.pol.Due(&c.plan, c.plan.Start); at != Never {
			c.h.timers.advance(&c.timer, at, &c.timerDue)
		}
	}
	c.mu.Unlock()
}

// result fills res and returns it with the fan-out's error, or re-raises
// a leaf's panic. Every leaf has returned.
func (r *fanRun[T]) result(res *FanResult[T]) (FanResult[T], error) {
	st := &r.st.fan
	st.record(r.fo.dec.Extra(), r.h.now()-r.start)
	if r.pnc != nil {
		panic(r.pnc)
	}
	notNeeded, unneeded, late := 0, 0, 0
	for i := range r.leaves {
		l := &r.leaves[i]
		switch {
		case !l.sent:
			res.Errs[i] = r.unsent
			if r.unsent == ErrNotSentNeedMet {
				unneeded++
			}
		case l.own.err == nil:
			res.Values[i] = l.own.v
		case l.cut != nil:
			res.Errs[i] = l.cut
			switch l.cut {
			case ErrNotNeeded:
				notNeeded++
			case ErrLate:
				late++
			}
		default:
			res.Errs[i] = l.own.err
		}
	}
	st.notNeeded.Add(int64(notNeeded))
	st.unneeded.Add(int64(unneeded))
	st.late.Add(int64(late))
	if r.answered >= r.need {
		return *res, nil
	}
	st.partial.Add(1)
	return *res, &FanError{Leaves: res.Errs, Answered: r.answered, Need: r.need, Cause: r.cause}
}
