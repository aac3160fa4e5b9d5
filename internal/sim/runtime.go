package sim

import (
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// hedgeRT is the engine as the decide.Runtime of the request the driver
// (decide.Policy's Schedule, Fire) is deciding for: slot and r, at now (e.now
// as a Duration). It is the engine itself, so that handing it to the
// driver costs no allocation.
type hedgeRT engine

// drive sets the request the engine's decide.Runtime acts for.
func (e *engine) drive(slot int32, r *request, now time.Duration) *hedgeRT {
	e.cur, e.curR, e.curNow = slot, r, now
	if e.multi {
		e.vbase = int(r.client) * e.nq
		if e.reports {
			e.vpol = e.pols[r.client]
		}
	}
	return (*hedgeRT)(e)
}

// Place picks the server the copy would go to and returns it with its
// load, or -1, -1 when no server is eligible. With Config.LoadReports the
// choice is decide.Policy.Place's, as the live engine's is: the picker's
// next server while each is busy by its fresh report where the client's
// own view saw room.
func (h *hedgeRT) Place(time.Duration) (int, int, bool) {
	e := (*engine)(h)
	if e.reports {
		return e.vpol.Place(toDuration(e.now), h.pick, h.view)
	}
	q := e.place(e.curR)
	if q < 0 {
		return -1, -1, false
	}
	return int(q), e.loadOf(int(q)), false
}

// pick is the picker decide.Policy.Place asks for candidates.
func (h *hedgeRT) pick(skip []int) int {
	e := (*engine)(h)
	return int(e.placeSkip(e.curR, skip))
}

// view is what the client of the request knows of queue q's load, as
// decide.Policy.Place reads it: the queue's last report to it, the
// copies it sent there since, and its own view.
func (h *hedgeRT) view(q int) (decide.Report, int, int) {
	e := (*engine)(h)
	if checkPlace != nil {
		checkPlace(e, q)
	}
	v := &e.views[e.vbase+q] // the client's, set by placeSkip
	return e.report(v), int(v.sent), e.load(q)
}

// Evidence is what the client sees of the primary's queue (decide.Behind).
func (h *hedgeRT) Evidence() decide.Evidence { return (*engine)(h).evidence(h.curR) }

// Launch places the admitted copy on server q (-1: one placed now) and
// starts it, or counts a Shadow copy.
func (h *hedgeRT) Launch(_ time.Duration, q int, g decide.Grant) bool {
	e, slot, r := (*engine)(h), h.cur, h.curR
	if g.Shadow() {
		if r.measured {
			e.shadow++
		}
		return true
	}
	if q < 0 {
		if q = int(e.place(r)); q < 0 {
			return false
		}
	}
	if e.idleOnly && e.qs[q].busy > 0 {
		// The server answers "no spare capacity" at once: the copy is
		// spent, and the driver gives back what it took.
		if r.measured {
			e.refusedByServer++
		}
		return false
	}
	e.addCopyAt(slot, r, int32(q))
	r.held[r.n-1] = g.HoldsSlot()
	if g.HoldsFanSlot() {
		r.fanHeld |= 1 << (r.n - 1)
	}
	if checkFanCopy != nil && r.parent >= 0 {
		checkFanCopy(e, r)
	}
	e.emit(TraceEvent{Request: int(r.idx), Copy: int(r.n - 1), At: e.now})
	e.kick(int32(q))
	return true
}

// Refused counts a refusal for the request.
func (h *hedgeRT) Refused(_ time.Duration, why hedge.Refusal, _ int) {
	(*engine)(h).refuse(h.curR, why)
}

// Arm queues a hedge event at at. It is offset from e.now rather than
// converted back from at, so that the event time is exactly e.now +
// delay.
func (h *hedgeRT) Arm(at time.Duration) {
	e, r := (*engine)(h), h.curR
	e.arm(h.cur, r, e.now+e.delayUnits(at-h.curNow))
}

// arm queues the hedge event of the request in slot at t. It supersedes
// the request's earlier timer, if any: each timer carries the count of
// timers armed for the request, and only the latest fires (onHedge).
// Without Config.FanCall a request has one timer at a time, and the
// count changes nothing; with it, a straggler's timer brought forward
// (straggle) leaves a later one in the queue, which must not send a
// second copy. The count wraps at 256, and a stale timer is never more
// than a few timers behind. Marking the request done (finish, subDone)
// bumps the count too, which makes its timer stale.
func (e *engine) arm(slot int32, r *request, t float64) {
	r.arm++
	if e.fanCall {
		e.armT[slot] = t
	}
	e.schedule(event{t: t, a: slot, gen: r.gen, tag: evTag{kind: evHedge, k: r.arm}})
}

// evidence is what the client sees of r's primary's queue (decide.Behind).
func (e *engine) evidence(r *request) decide.Evidence {
	left := e.qs[r.copies[0].q].left
	if e.multi {
		left = e.viewOf(r.client, r.copies[0].q).left
	}
	ev := decide.Behind(int64(r.ahead), int64(left-r.leftAt))
	if r.byRep {
		ev = decide.Reported(ev, int(r.repAhead), int64(r.repLeftAt), int64(e.viewOf(r.client, r.copies[0].q).repLeft))
	}
	return ev
}

// delayUnits is fromDuration, remembering the last conversion: a delay is
// converted for every request, and it changes rarely (never for a Fixed
// one), while a division is not cheap.
func (e *engine) delayUnits(d time.Duration) float64 {
	if d != e.memoD {
		e.memoD, e.memoF = d, fromDuration(d)
	}
	return e.memoF
}

// refuse counts a refusal of the Policy for r.
func (e *engine) refuse(r *request, why hedge.Refusal) {
	if !decide.Counted(why) {
		return // not refusals the library counts either
	}
	if r.measured && int(why) < len(e.refused) {
		e.refused[why]++
	}
	e.emit(TraceEvent{Request: int(r.idx), Copy: -1, At: e.now, Refused: why})
}

// onHedge runs when the delay since the last copy of a unit has passed. It
// is kept small enough to be inlined into the event loop (its parameters
// are three fields rather than the event for that): most hedge timers
// find their request finished (four in five in
// BenchmarkRunNoiseHedgeFixed), and those cost no call. k is the timer's
// count (request.arm): a timer that a later one superseded does nothing,
// nor does one of a request that is done, for marking a request done
// bumps the count.
func (e *engine) onHedge(slot int32, gen uint32, k uint8) {
	if r := &e.slots[slot]; r.gen == gen && r.arm == k {
		e.hedgeDue(slot, r)
	}
}

// hedgeDue asks for the copy of r that is due now, and schedules the next.
func (e *engine) hedgeDue(slot int32, r *request) {
	if e.fanCall {
		e.armT[slot] = noTimer // fired; Fire arms the next, if any
	}
	now := toDuration(e.now)
	e.polOf(r.client).Fire(&r.plan, now, e.drive(slot, r, now))
}

// checkPlace, when a test sets it, is called with the queue each hedge
// decision with Config.LoadReports looks at, before it reads the queue's
// report. It is nil outside the package's tests.
var checkPlace func(e *engine, q int)

// checkFanCopy, when a test sets it, is called whenever a further copy of
// a fan-out's sub-request goes, once it is placed. It is nil outside the
// package's tests.
var checkFanCopy func(e *engine, r *request)
