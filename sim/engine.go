package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// Copy states.
const (
	cWaiting uint8 = iota + 1
	cRunning
	cDone
	cCancelled
)

// copyRec is one copy (attempt) of a request. Its state is kept in the
// request (request.state and held), which makes the record 16 bytes.
type copyRec struct {
	size float64 // work it needs
	q    int32   // queue it was placed on
	srv  int32   // server running it, while cRunning
}

// request is a slot in the engine's request table: a plain request, or one
// sub-request of a fan-out request. Slots are reused; gen tells a reused
// slot from the request an old event or queue entry refers to.
//
// A request is 176 bytes, the fields every request touches (up to the
// second copy) in the first 128. With the copies' states in copyRec it was
// 208, and the hedging benchmarks ran 5% slower.
type request struct {
	arrival  float64
	size     float64 // size of the primary copy: the extra-work denominator
	work     float64 // work processed on all copies so far
	parent   int32   // fan-out parent, or -1
	idx      int32   // arrival index of the request (of its parent, for a sub-request)
	gen      uint32
	n        uint8 // copies placed
	live     uint8 // copies waiting or running
	ran      uint8 // copies that started service
	done     bool  // a copy finished (or the parent no longer needs it)
	measured bool
	state    [MaxAttempts]uint8 // copy k's state (cWaiting, ...)
	held     [MaxAttempts]bool  // copy k holds one of the Policy's in-flight slots until it ends
	plan     decide.Plan        // the library's decision state, for hedging strategies
	copies   [MaxAttempts]copyRec
	// For the library's evidence (decide.Behind), at the end: only the
	// default strategy reads them.
	ahead  int32  // copies on the primary's queue when it was placed
	leftAt uint32 // the queue's completed count then
}

// qent is a queue entry. Cancelled copies are not removed from their queue
// (the queue's busy count drops at once); the entry is skipped when popped.
type qent struct {
	slot int32
	gen  uint32
	k    uint8
}

// fifo is a growable ring buffer of queue entries.
type fifo struct {
	buf  []qent // length a power of two
	head int
	n    int
	busy int    // live copies waiting here or in service from here: the routing load
	left uint32 // copies completed here, modulo 2^32 (for decide.Behind)
	// ghostUntil: a copy was cancelled here because another copy of its
	// request won, and this queue has completed nothing since. The
	// library's picker counts it as one more copy in flight until the
	// replica shows progress or until then (see hedge.Picker), so that
	// cancelling a stuck copy does not make a stalled server look idle.
	ghostUntil float64
}

func (f *fifo) push(x qent) {
	if f.n == len(f.buf) {
		nb := make([]qent, max(8, 2*len(f.buf)))
		for i := range f.n {
			nb[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = x
	f.n++
}

func (f *fifo) pop() qent {
	x := f.buf[f.head]
	f.head = (f.head + 1) & (len(f.buf) - 1)
	f.n--
	return x
}

// server is one service slot. Its current copy has rem work left as of
// time last, and progresses at speed.
type server struct {
	rem, last, speed float64
	cur              int32 // slot of the copy in service, or -1
	q                int32 // the queue it serves
	k                uint8
	stalled          bool
}

// psEnt is a copy in service on a processor-sharing server: it finishes
// when the server's virtual time reaches fv.
type psEnt struct {
	fv   float64
	slot int32
	gen  uint32
	k    uint8
}

// psServer is the processor-sharing state of a server. Each of its n
// copies in service has received v units of work per copy since the
// server's virtual time began; v grows at speed/n. Copies are in a binary
// min-heap on fv; a cancelled copy's entry stays until it reaches the top.
type psServer struct {
	v, last float64
	n       int
	h       []psEnt
}

// parentRec is a fan-out request.
type parentRec struct {
	arrival  float64
	got      int32 // sub-requests finished
	alive    int32 // sub-request slots not yet freed
	measured bool
	done     bool
}

type subRef struct {
	slot int32
	gen  uint32
}

// engine is the state of one run. A Simulator keeps one and reuses its
// buffers from run to run.
type engine struct {
	c      Config
	now    float64
	rA     rng        // arrival times and request sizes (common to all strategies)
	rS     rng        // stall processes (common to all strategies)
	rM     rng        // routing, fresh copy sizes, tie breaks
	rMRand *rand.Rand // rM as a math/rand/v2 generator, for decide.Policy.Begin's rollout draws
	ev     eventHeap
	dep    depTree // each server's next completion
	// The request the engine's decide.Runtime (hedgeRT) acts for.
	cur                  int32
	curR                 *request
	curNow               time.Duration
	timers               timerFIFO // hedge timers in time order (see timerFIFO)
	srv                  []server
	qs                   []fifo
	idle                 []int32 // idle servers, Pool routing only
	pool                 bool
	ps                   bool       // processor-sharing servers
	pss                  []psServer // their state, with ps
	psfv                 []float64  // with ps: the finishing virtual time of copy k of slot s, at s*MaxAttempts+k
	slow                 bool       // the correlated world's slowdown is on
	slowF                float64    // speed factor of the slowdown in force (1 when off)
	slots                []request
	free                 []int32
	par                  []parentRec
	pfree                []int32
	subs                 []subRef // Fanout entries per parent
	sz                   sizer
	picker               decide.Picker
	load                 func(int) int // the routing load: loadPlain, or loadGhost with the library's ghosts
	loadPlain, loadGhost func(int) int

	hedges      bool
	ghosts      bool // count cancelled losers as load until progress (the library's picker)
	tied        bool
	tiedSample  bool // Tied with two-choice routing: copies on two-choice's sampled pair
	cancel      bool
	pol         *decide.Policy // the library's decision, for hedging strategies
	est         decide.Estimator
	live        decide.Estimator          // est, fed with latencies (a no-op for a fixed delay)
	feedPrimary bool                      // feed live the primary's latency (the library's rule)
	need        int32                     // fan-out sub-requests needed
	refused     [decide.NumRefusals]int64 // refusals by hedge.Refusal, of measured units
	shadow      int64                     // copies Shadow mode would have sent, of measured units
	memoD       time.Duration             // the last delay converted by delayUnits
	memoF       float64                   // and its value in time units
	traceFn     func(TraceEvent)          // Simulator.Trace, during RunScript
	doneFn      func(Completion)          // Simulator.Done
	script      []ScriptedRequest         // RunScript's requests, or nil

	lambda    float64
	nextArr   float64
	arrived   int
	pending   int // measured slots not yet freed + measured parents not done
	stallMean [2]float64
	slowSpeed float64
	slowMean  [2]float64 // correlated world: mean time normal, slowed

	measuring          bool
	lastT              float64
	tStart, tEnd       float64
	nRunning, nStalled int
	busyInt, stallInt  float64

	lat, unitLat      []float64
	units, hedged     int64
	multiRan          int64
	workSum, sizeSum  float64
	delaySum          float64
	delayN            int64
	events            int64
	ctx               context.Context // checked every ctxEvery events
	err               error           // ctx's error, when it stopped the run
	maxAtt            uint8
	serversN          int
	leastLoaded, full bool
}

func (e *engine) init(c Config) {
	e.c = c
	e.now = 0
	e.rA = seedRNG(c.Seed, 0xA)
	e.rS = seedRNG(c.Seed, 0x5)
	e.rM = seedRNG(c.Seed, 0x3)
	e.rMRand = rand.New(&e.rM) // anew each run: an engine value may have been copied
	e.ev.reset()
	e.dep.reset(c.Servers)
	e.timers.reset()
	e.serversN = c.Servers
	e.pool = c.Routing == Pool
	e.ps = c.Discipline == PS
	e.leastLoaded = c.Routing == LeastLoaded
	e.picker = decide.Picker{Random: c.Routing == Random}
	if e.loadPlain == nil {
		e.loadPlain = func(i int) int { return e.qs[i].busy }
		e.loadGhost = func(i int) int {
			f := &e.qs[i]
			if e.now < f.ghostUntil {
				return f.busy + 1
			}
			return f.busy
		}
	}
	nq := c.Servers
	if e.pool {
		nq = 1
	}
	e.srv = resize(e.srv, c.Servers)
	e.qs = resize(e.qs, nq)
	for i := range e.qs {
		e.qs[i].head, e.qs[i].n, e.qs[i].busy, e.qs[i].left, e.qs[i].ghostUntil = 0, 0, 0, 0, 0
	}
	e.idle = e.idle[:0]
	for i := range e.srv {
		q := int32(i)
		if e.pool {
			q = 0
			e.idle = append(e.idle, int32(i))
		}
		e.srv[i] = server{cur: -1, q: q, speed: 1}
	}
	e.slow, e.slowF = false, 1
	if e.ps {
		e.pss = resize(e.pss, c.Servers)
		for i := range e.pss {
			e.pss[i] = psServer{h: e.pss[i].h[:0]}
		}
	}
	e.slots = e.slots[:0]
	e.free = e.free[:0]
	e.par = e.par[:0]
	e.pfree = e.pfree[:0]
	e.subs = e.subs[:0]
	e.sz = newSizer(c)

	e.hedges = c.Strategy.Hedges() && c.MaxAttempts > 1
	e.tied = c.Strategy.IsTied()
	e.tiedSample = c.Strategy == Tied && c.Routing == TwoChoice
	e.cancel = !c.NoCancel
	e.maxAtt = uint8(c.MaxAttempts)
	e.pol, e.est, e.live = nil, nil, nil
	if h, ok := c.HedgeConfig(); ok && e.hedges {
		pol, err := decide.FromConfig(h)
		if err != nil {
			panic(err) // unreachable after Validate
		}
		e.pol = pol
		e.est = pol.NewEstimator()
		e.live = e.est
		e.hedges = pol.MaxAttempts() > 1
	}
	// The library's picker counts a cancelled loser as load for a while
	// (decide.Policy.Ghost); the study's presets do not.
	e.ghosts = e.pol != nil && e.pol.Ghost(time.Millisecond) > 0
	e.load = e.loadPlain
	if e.ghosts {
		e.load = e.loadGhost
	}
	e.feedPrimary = c.feedPrimary()
	e.refused = [decide.NumRefusals]int64{}
	e.shadow = 0
	e.need = int32(c.Fanout)
	if c.FanoutNeed > 0 {
		e.need = int32(c.FanoutNeed)
	}

	e.lambda = c.Load * float64(c.Servers) / float64(c.Fanout)
	e.nextArr = e.rA.ExpFloat64() / e.lambda
	e.arrived = 0
	e.pending = 0

	e.measuring = false
	e.lastT, e.tStart, e.tEnd = 0, 0, 0
	e.nRunning, e.nStalled = 0, 0
	e.busyInt, e.stallInt = 0, 0
	nm := c.Requests - c.Warmup
	if cap(e.lat) < nm {
		e.lat = make([]float64, 0, nm)
	}
	e.lat = e.lat[:0]
	e.unitLat = e.unitLat[:0]
	e.units, e.hedged, e.multiRan = 0, 0, 0
	e.workSum, e.sizeSum = 0, 0
	e.delaySum, e.delayN = 0, 0
	e.events = 0

	if c.World.HasStalls() && c.StallShare > 0 {
		e.stallMean[1] = c.StallMean
		e.stallMean[0] = c.StallMean * (1 - c.StallShare) / c.StallShare
		e.slowSpeed = 1 / c.StallSlowdown
		for i := range e.srv {
			s := &e.srv[i]
			// Start in the stationary state: stalled with probability
			// StallShare, with an exponential (memoryless) residual.
			if e.rS.Float64() < c.StallShare {
				s.stalled = true
				s.speed = e.slowSpeed
				e.nStalled++
			}
			e.ev.push(event{t: e.rS.ExpFloat64() * e.stallMean[b2i(s.stalled)], a: int32(i), tag: evTag{kind: evStall}})
		}
	}
	if c.World == Correlated && c.SlowFor > 0 {
		// One slowdown, scheduled.
		e.ev.push(event{t: c.SlowAt, tag: evTag{kind: evSlow}})
	} else if c.World == Correlated && c.SlowShare > 0 {
		e.slowMean[1] = c.SlowMean
		e.slowMean[0] = c.SlowMean * (1 - c.SlowShare) / c.SlowShare
		// Stationary start, as for stalls.
		if e.rS.Float64() < c.SlowShare {
			e.slow, e.slowF = true, 1/c.SlowFactor
			for i := range e.srv {
				e.srv[i].speed = e.slowF
			}
		}
		e.ev.push(event{t: e.rS.ExpFloat64() * e.slowMean[b2i(e.slow)], tag: evTag{kind: evSlow}})
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ctxEvery is how many events a run processes between checks of its
// context: a power of two, so that the check costs a mask and a branch
// per event; at a few million events per second a cancelled run stops
// within about a millisecond.
const ctxEvery = 1 << 12

// run is the event loop. The next event is the earliest of the next
// arrival, the next completion, the heap's head and the timer queue's
// head; ties go in that order. Every ctxEvery events it checks e.ctx and
// stops, with e.err set, once the context has ended.
func (e *engine) run() {
	for (e.arrived <= e.c.Requests && e.nextArr < math.MaxFloat64) || e.pending > 0 {
		e.events++
		if e.events&(ctxEvery-1) == 0 {
			if e.err = e.ctx.Err(); e.err != nil {
				return
			}
		}
		t := e.nextArr
		src := 0
		s, ts := e.dep.min()
		if ts < t {
			t, src = ts, 1
		}
		if e.ev.len() > 0 && e.ev.minT() < t {
			t, src = e.ev.minT(), 2
		}
		if e.timers.len() > 0 && e.timers.minT() < t {
			src = 3
		}
		var ev event
		switch src {
		case 0:
			e.advance(e.nextArr)
			e.arrive()
			continue
		case 1:
			e.advance(ts)
			e.onComplete(s)
			continue
		case 2:
			ev = e.ev.pop()
		default:
			ev = e.timers.pop()
		}
		e.advance(ev.t)
		switch ev.tag.kind {
		case evHedge:
			e.onHedge(ev.a, ev.gen)
		case evStall:
			e.onStall(ev.a)
		case evSlow:
			e.onSlow()
		case evTiedCancel:
			r := &e.slots[ev.a]
			if r.gen == ev.gen && r.state[ev.tag.k] == cWaiting {
				e.cancelWaiting(r, ev.tag.k)
			}
		}
	}
}

// schedule queues a timer event: in the timer queue when that keeps it
// ordered, else in the heap.
func (e *engine) schedule(ev event) {
	if e.timers.accepts(ev.t) {
		e.timers.push(ev)
		return
	}
	e.ev.push(ev)
}

// advance moves the clock, integrating busy and stalled server-time over
// the measurement window.
func (e *engine) advance(t float64) {
	if e.measuring {
		dt := t - e.lastT
		e.busyInt += dt * float64(e.nRunning)
		e.stallInt += dt * float64(e.nStalled)
		e.lastT = t
	}
	e.now = t
}

func (e *engine) arrive() {
	idx := e.arrived
	e.arrived++
	if idx == e.c.Warmup {
		e.measuring = true
		e.lastT, e.tStart = e.now, e.now
	}
	if idx == e.c.Requests {
		e.measuring = false
		e.tEnd = e.now
	}
	measured := idx >= e.c.Warmup && idx < e.c.Requests
	if e.c.Fanout == 1 {
		e.newUnit(-1, measured)
	} else {
		e.newParent(measured)
	}
	switch {
	case e.script == nil:
		e.nextArr = e.now + e.rA.ExpFloat64()/e.lambda
	case e.arrived < len(e.script):
		e.nextArr = e.script[e.arrived].At
	default:
		e.nextArr = math.Inf(1)
	}
}

func (e *engine) alloc() int32 {
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	e.slots = append(e.slots, request{})
	return int32(len(e.slots) - 1)
}

// newUnit starts a request (or sub-request) and returns its slot.
func (e *engine) newUnit(parent int32, measured bool) int32 {
	slot := e.alloc()
	r := &e.slots[slot]
	r.arrival = e.now
	r.idx = int32(e.arrived - 1)
	if e.script != nil {
		r.size = e.script[r.idx].Sizes[0]
	} else {
		r.size = e.sz.draw(&e.rA)
	}
	r.work = 0
	r.parent = parent
	r.n, r.live, r.ran = 0, 0, 0
	r.done = false
	r.measured = measured
	if measured {
		e.pending++
	}
	switch {
	case e.tied:
		var qs [MaxAttempts]int32
		n := 0
		for range e.maxAtt {
			q := e.addCopy(slot, r)
			if q < 0 {
				break
			}
			qs[n] = q
			n++
		}
		for _, q := range qs[:n] {
			e.kick(q)
		}
	default:
		q := e.addCopy(slot, r)
		if e.pol != nil {
			f := &e.qs[q]
			r.ahead, r.leftAt = int32(f.busy-1), f.left
			e.pol.Placed(e.load(int(q)) - 1)
		}
		e.kick(q)
		if e.hedges {
			e.emit(TraceEvent{Request: int(r.idx), Copy: 0, At: e.now})
			deadline := hedge.Never
			if e.script != nil && e.script[r.idx].Deadline > 0 {
				deadline = toDuration(e.now + e.script[r.idx].Deadline)
			}
			now := toDuration(e.now)
			e.pol.Begin(&r.plan, now, e.est, deadline, false, e.rMRand)
			if measured && r.plan.Delay != hedge.Never {
				e.delaySum += e.delayUnits(r.plan.Delay)
				e.delayN++
			}
			e.pol.Schedule(&r.plan, now, e.drive(slot, r, now))
		}
	}
	return slot
}

// hedgeRT is the engine as the decide.Runtime of the request the driver
// (decide.Policy's Schedule, Fire) is deciding for: slot and r, at now (e.now
// as a Duration). It is the engine itself, so that handing it to the
// driver costs no allocation.
type hedgeRT engine

// drive sets the request the engine's decide.Runtime acts for.
func (e *engine) drive(slot int32, r *request, now time.Duration) *hedgeRT {
	e.cur, e.curR, e.curNow = slot, r, now
	return (*hedgeRT)(e)
}

// Place picks the server the copy would go to and returns it with its
// load, or -1, -1 when no server is eligible.
func (h *hedgeRT) Place(time.Duration) (int, int) {
	e := (*engine)(h)
	q := e.place(e.curR)
	if q < 0 {
		return -1, -1
	}
	return int(q), e.load(int(q))
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
	e.addCopyAt(slot, r, int32(q))
	r.held[r.n-1] = g.HoldsSlot()
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
	e := (*engine)(h)
	e.schedule(event{t: e.now + e.delayUnits(at-h.curNow), a: h.cur, gen: h.curR.gen, tag: evTag{kind: evHedge}})
}

// evidence is what the client sees of r's primary's queue (decide.Behind).
func (e *engine) evidence(r *request) decide.Evidence {
	return decide.Behind(int64(r.ahead), int64(e.qs[r.copies[0].q].left-r.leftAt))
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

// leave takes a copy that completed or was cancelled off queue q's count.
func (e *engine) leave(q int32) {
	f := &e.qs[q]
	f.busy--
}

// ended gives back the in-flight slot of copy k of r, which completed or
// was cancelled.
func (e *engine) ended(r *request, k uint8) {
	if r.held[k] {
		r.held[k] = false
		e.pol.Done()
	}
}

// addCopy places the request's next copy on a queue and returns the queue,
// or -1 if no eligible server is left.
func (e *engine) addCopy(slot int32, r *request) int32 {
	q := e.place(r)
	if q < 0 {
		return -1
	}
	e.addCopyAt(slot, r, q)
	return q
}

// addCopyAt places the request's next copy on queue q.
func (e *engine) addCopyAt(slot int32, r *request, q int32) {
	size := r.size
	switch {
	case e.script != nil:
		if sz := e.script[r.idx].Sizes; int(r.n) < len(sz) {
			size = sz[r.n]
		}
	case r.n > 0 && e.sz.fresh:
		size = e.sz.draw(&e.rM)
	}
	k := r.n
	r.n++
	r.copies[k] = copyRec{size: size, q: q, srv: -1}
	r.state[k], r.held[k] = cWaiting, false
	r.live++
	f := &e.qs[q]
	f.push(qent{slot: slot, gen: r.gen, k: k})
	f.busy++
}

// kick starts service on queue q's idle server(s), if any. Under processor
// sharing every copy placed on q starts at once.
func (e *engine) kick(q int32) {
	if e.ps {
		for {
			ent, ok := e.popValid(q)
			if !ok {
				return
			}
			e.psStart(q, ent)
		}
	}
	if !e.pool {
		if e.srv[q].cur < 0 {
			if ent, ok := e.popValid(q); ok {
				e.start(q, ent)
			}
		}
		return
	}
	for len(e.idle) > 0 {
		ent, ok := e.popValid(q)
		if !ok {
			return
		}
		// A uniformly random idle server takes the copy.
		last := len(e.idle) - 1
		i := 0
		if last > 0 {
			i = e.rM.IntN(last + 1)
		}
		s := e.idle[i]
		e.idle[i] = e.idle[last]
		e.idle = e.idle[:last]
		e.start(s, ent)
	}
}

func (e *engine) popValid(q int32) (qent, bool) {
	f := &e.qs[q]
	for f.n > 0 {
		ent := f.pop()
		r := &e.slots[ent.slot]
		if r.gen == ent.gen && r.state[ent.k] == cWaiting {
			return ent, true
		}
	}
	return qent{}, false
}

func (e *engine) start(s int32, ent qent) {
	r := &e.slots[ent.slot]
	c := &r.copies[ent.k]
	r.state[ent.k] = cRunning
	c.srv = s
	r.ran++
	sv := &e.srv[s]
	sv.cur, sv.k = ent.slot, ent.k
	sv.rem, sv.last = c.size, e.now
	e.dep.set(s, e.now+c.size/sv.speed)
	e.nRunning++
	if e.tied && e.cancel && r.n > 1 {
		for j := range r.n {
			if j == ent.k || r.state[j] != cWaiting {
				continue
			}
			if e.c.CancelDelay == 0 {
				e.cancelWaiting(r, j)
			} else {
				e.schedule(event{t: e.now + e.c.CancelDelay, a: ent.slot, gen: r.gen, tag: evTag{kind: evTiedCancel, k: j}})
			}
		}
	}
}

// cancelWaiting removes a waiting copy. Its queue entry stays and is
// skipped later; the queue's load drops now.
func (e *engine) cancelWaiting(r *request, k uint8) {
	c := &r.copies[k]
	r.state[k] = cCancelled
	e.leave(c.q)
	r.live--
	e.ended(r, k)
}

// cancelRunning stops a copy in service, counting the work it got, and
// lets its server take the next copy.
func (e *engine) cancelRunning(slot int32, r *request, k uint8) {
	c := &r.copies[k]
	if e.ps {
		e.psCancel(slot, r, k)
		return
	}
	sv := &e.srv[c.srv]
	rem := sv.rem - (e.now-sv.last)*sv.speed
	if rem < 0 {
		rem = 0
	}
	r.work += c.size - rem
	r.state[k] = cCancelled
	r.live--
	e.leave(c.q)
	e.ended(r, k)
	e.release(c.srv)
}

// release makes server s idle and lets it take the next copy.
func (e *engine) release(s int32) {
	sv := &e.srv[s]
	sv.cur = -1
	e.nRunning--
	if e.pool {
		e.idle = append(e.idle, s)
	}
	e.kick(sv.q)
	if sv.cur < 0 {
		e.dep.set(s, math.Inf(1))
	}
}

// onComplete finishes the copy in service on server s, whose completion
// time has come.
func (e *engine) onComplete(s int32) {
	if e.ps {
		e.psComplete(s)
		return
	}
	sv := &e.srv[s]
	slot := sv.cur
	r := &e.slots[slot]
	c := &r.copies[sv.k]
	r.work += c.size
	r.state[sv.k] = cDone
	r.live--
	e.leave(c.q)
	if e.pol != nil {
		e.qs[c.q].left++ // for decide.Behind
		if e.ghosts {
			e.qs[c.q].ghostUntil = 0
		}
	}
	e.ended(r, sv.k)
	switch {
	case !r.done:
		e.finish(slot, r, sv.k)
	case sv.k == 0 && e.live != nil && e.feedPrimary:
		// A primary that lost and ran on: the library records its whole
		// latency when it returns.
		e.live.Observe(toDuration(e.now), toDuration(e.now-r.arrival))
	}
	e.release(s)
	e.maybeFree(slot)
}

// finish records the first finished copy of a unit, copy k, and cancels
// the others.
func (e *engine) finish(slot int32, r *request, k uint8) {
	r.done = true
	lat := e.now - r.arrival
	if e.live != nil {
		// The study's rule feeds the client's latency. The library's
		// feeds the primary's: its latency when it won, or, when a hedge
		// won, the censored bound (decide.Plan.PrimarySample), which is
		// this same latency; a primary that runs on without cancellation
		// is recorded when it completes, in onComplete.
		if !e.feedPrimary || k == 0 || e.cancel {
			e.live.Observe(toDuration(e.now), toDuration(lat))
		}
	}
	if e.pol != nil {
		e.pol.Succeeded(&r.plan, toDuration(e.now), k > 0)
	}
	if e.cancel && r.live > 0 {
		e.cancelAll(slot, r)
	}
	if r.parent < 0 {
		if r.measured {
			e.lat = append(e.lat, lat)
		}
		if e.doneFn != nil {
			e.doneFn(Completion{Arrival: r.arrival, Latency: lat, Copies: int(r.n), Measured: r.measured})
		}
		return
	}
	if r.measured {
		e.unitLat = append(e.unitLat, lat)
	}
	e.subDone(r.parent)
}

func (e *engine) cancelAll(slot int32, r *request) {
	for j := range r.n {
		switch r.state[j] {
		case cWaiting:
			e.cancelWaiting(r, j)
		case cRunning:
			e.cancelRunning(slot, r, j)
		default:
			continue
		}
		if e.ghosts {
			e.qs[r.copies[j].q].ghostUntil = e.now + fromDuration(e.pol.Ghost(r.plan.Delay))
		}
	}
}

// maybeFree returns a slot whose request is done and has no live copy
// left, accounting its work.
func (e *engine) maybeFree(slot int32) {
	r := &e.slots[slot]
	if !r.done || r.live > 0 {
		return
	}
	if r.measured {
		e.units++
		if r.n > 1 {
			e.hedged++
		}
		if r.ran > 1 {
			e.multiRan++
		}
		e.workSum += r.work
		e.sizeSum += r.size
		e.pending--
	}
	r.gen++
	e.free = append(e.free, slot)
	if r.parent >= 0 {
		p := &e.par[r.parent]
		p.alive--
		if p.alive == 0 {
			e.pfree = append(e.pfree, r.parent)
		}
	}
}

// onHedge runs when the delay since the last copy of a unit has passed. It
// is kept small enough to be inlined into the event loop (its parameters
// are two fields rather than the event for that): most hedge timers find
// their request finished (four in five in BenchmarkRunNoiseHedgeFixed),
// and those cost no call.
func (e *engine) onHedge(slot int32, gen uint32) {
	if r := &e.slots[slot]; r.gen == gen && !r.done {
		e.hedgeDue(slot, r)
	}
}

// hedgeDue asks for the copy of r that is due now, and schedules the next.
func (e *engine) hedgeDue(slot int32, r *request) {
	now := toDuration(e.now)
	e.pol.Fire(&r.plan, now, e.drive(slot, r, now))
}

func (e *engine) onStall(s int32) {
	sv := &e.srv[s]
	sv.stalled = !sv.stalled
	speed := e.slowF
	if sv.stalled {
		speed *= e.slowSpeed
		e.nStalled++
	} else {
		e.nStalled--
	}
	e.setSpeed(s, speed)
	e.ev.push(event{t: e.now + e.rS.ExpFloat64()*e.stallMean[b2i(sv.stalled)], a: s, tag: evTag{kind: evStall}})
}

// onSlow turns the correlated world's slowdown of every server on or off.
func (e *engine) onSlow() {
	e.slow = !e.slow
	e.slowF = 1
	if e.slow {
		e.slowF = 1 / e.c.SlowFactor
	}
	for i := range e.srv {
		speed := e.slowF
		if e.srv[i].stalled {
			speed *= e.slowSpeed
		}
		e.setSpeed(int32(i), speed)
	}
	if e.c.SlowFor > 0 {
		if e.slow {
			e.ev.push(event{t: e.now + e.c.SlowFor, tag: evTag{kind: evSlow}})
		}
		return
	}
	e.ev.push(event{t: e.now + e.rS.ExpFloat64()*e.slowMean[b2i(e.slow)], tag: evTag{kind: evSlow}})
}

// setSpeed changes server s's speed now, accounting the work done at the
// old speed and rescheduling its next completion.
func (e *engine) setSpeed(s int32, speed float64) {
	sv := &e.srv[s]
	if e.ps {
		e.psAdvance(s)
		sv.speed = speed
		e.psSchedule(s)
		return
	}
	if sv.cur >= 0 {
		sv.rem -= (e.now - sv.last) * sv.speed
		if sv.rem < 0 {
			sv.rem = 0
		}
		sv.last = e.now
	}
	sv.speed = speed
	if sv.cur >= 0 {
		e.dep.set(s, e.now+sv.rem/sv.speed)
	}
}

// psAdvance brings processor-sharing server s's virtual time to now.
func (e *engine) psAdvance(s int32) {
	p := &e.pss[s]
	if p.n > 0 {
		p.v += (e.now - p.last) * e.srv[s].speed / float64(p.n)
	}
	p.last = e.now
}

// psValid reports whether a heap entry of server s is a copy still in
// service there.
func (e *engine) psValid(s int32, x psEnt) bool {
	r := &e.slots[x.slot]
	return r.gen == x.gen && r.state[x.k] == cRunning && r.copies[x.k].srv == s
}

// psSchedule drops cancelled copies from the top of server s's heap and
// schedules its next completion (the virtual time is current).
func (e *engine) psSchedule(s int32) {
	p := &e.pss[s]
	for len(p.h) > 0 && !e.psValid(s, p.h[0]) {
		psPop(&p.h)
	}
	if p.n == 0 || len(p.h) == 0 {
		e.dep.set(s, math.Inf(1))
		return
	}
	left := (p.h[0].fv - p.v) * float64(p.n) / e.srv[s].speed
	if left < 0 {
		left = 0
	}
	e.dep.set(s, e.now+left)
}

// psStart puts a copy in service on processor-sharing server s.
func (e *engine) psStart(s int32, ent qent) {
	e.psAdvance(s)
	r := &e.slots[ent.slot]
	c := &r.copies[ent.k]
	r.state[ent.k] = cRunning
	c.srv = s
	r.ran++
	p := &e.pss[s]
	fv := p.v + c.size
	psPush(&p.h, psEnt{fv: fv, slot: ent.slot, gen: ent.gen, k: ent.k})
	if i := int(ent.slot)*MaxAttempts + int(ent.k); i < len(e.psfv) {
		e.psfv[i] = fv
	} else {
		e.psfv = append(e.psfv, make([]float64, i+1-len(e.psfv))...)
		e.psfv[i] = fv
	}
	p.n++
	if p.n == 1 {
		e.nRunning++
	}
	e.psSchedule(s)
}

// psLeave takes one copy out of server s's count (the entry itself is
// popped, or skipped later).
func (e *engine) psLeave(s int32) {
	p := &e.pss[s]
	p.n--
	if p.n == 0 {
		e.nRunning--
	}
}

// psComplete finishes the copy at the top of server s's heap.
func (e *engine) psComplete(s int32) {
	e.psAdvance(s)
	p := &e.pss[s]
	x := psPop(&p.h)
	e.psLeave(s)
	r := &e.slots[x.slot]
	c := &r.copies[x.k]
	r.work += c.size
	r.state[x.k] = cDone
	r.live--
	e.leave(c.q)
	if e.pol != nil {
		e.qs[c.q].left++ // for decide.Behind
		if e.ghosts {
			e.qs[c.q].ghostUntil = 0
		}
	}
	e.ended(r, x.k)
	switch {
	case !r.done:
		e.finish(x.slot, r, x.k)
	case x.k == 0 && e.live != nil && e.feedPrimary:
		e.live.Observe(toDuration(e.now), toDuration(e.now-r.arrival))
	}
	e.psSchedule(s)
	e.maybeFree(x.slot)
}

// psCancel stops copy k of r, in service on a processor-sharing server,
// counting the work it got.
func (e *engine) psCancel(slot int32, r *request, k uint8) {
	c := &r.copies[k]
	s := c.srv
	e.psAdvance(s)
	p := &e.pss[s]
	r.work += c.size - max(0, e.psfv[int(slot)*MaxAttempts+int(k)]-p.v)
	r.state[k] = cCancelled
	r.live--
	e.leave(c.q)
	e.ended(r, k)
	e.psLeave(s)
	e.psSchedule(s)
}

// psPush and psPop keep a binary min-heap of copies on fv.
func psPush(h *[]psEnt, x psEnt) {
	a := append(*h, x)
	i := len(a) - 1
	for i > 0 {
		up := (i - 1) / 2
		if a[up].fv <= a[i].fv {
			break
		}
		a[up], a[i] = a[i], a[up]
		i = up
	}
	*h = a
}

func psPop(h *[]psEnt) psEnt {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].fv < a[l].fv {
			m = r
		}
		if a[i].fv <= a[m].fv {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
