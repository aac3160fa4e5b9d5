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
// A request is 216 bytes, the fields every request touches in the first
// 128 (the copies' records follow). With the copies' states in copyRec it
// was 32 bytes more, and the hedging benchmarks ran 5% slower; arm and
// fanHeld sit in what was padding.
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
	client   uint16             // the client whose request it is (0 with one client)
	arm      uint8              // timers armed so far, and ends, modulo 256: a hedge event of an earlier count is stale (see engine.arm)
	fanHeld  uint8              // bit k: copy k holds a slot of its fan-out's cap (Config.FanCall) until it ends
	plan     decide.Plan        // the library's decision state, for hedging strategies
	copies   [MaxAttempts]copyRec
	// For the library's evidence (decide.Behind), at the end: only the
	// default strategy reads them.
	ahead  int32  // copies on the primary's queue when it was placed
	leftAt uint32 // the queue's completed count then
	// With Config.LoadReports, when the queue's report was fresh then:
	// the copies ahead of the primary by it, and its count of answers.
	repAhead  int32
	repLeftAt uint32
	byRep     bool
	// lo is the first server of the request's shard (Config.Shards), 0
	// without shards: its copies go to servers lo to lo+R-1.
	lo int32
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
	load                 func(int) int // the routing load: loadPlain, or loadGhost with the library's ghosts; loadView or loadViewG with several clients
	loadPlain, loadGhost func(int) int
	loadView, loadViewG  func(int) int // the same, from the client's view (views[vbase+i])
	plainLoad            bool          // load is loadPlain (see loadOf)

	// Clients (see "Many clients" in doc.go). With one client (multi
	// false) the Policy reads the queues' own counts, which are then that
	// client's; with several, each client's Policy reads its views.
	multi bool
	nq    int            // queues: the stride of views
	views []view         // what client c sees of queue q, at c*nq+q (multi only)
	vbase int            // c*nq for the client whose copy is being placed
	vpol  *decide.Policy // the Policy of that client, with LoadReports
	// With Config.LoadReports: servers report their load with every
	// answer, and workers is each queue's servers (decide.Report.Workers).
	reports bool
	workers int
	pols    []*decide.Policy
	ests    []decide.Estimator // each client's delay estimator
	rC      rng                // which client a request belongs to (multi only)
	shares  []float64          // cumulative shares of the clients, the last 1

	hedges      bool
	ghosts      bool // count cancelled losers as load until progress (the library's picker)
	tied        bool
	tiedSample  bool // Tied with two-choice routing: copies on two-choice's sampled pair
	tiedSpare   bool // TiedSpare: a waiting primary moves to an idle second pick
	cancel      bool
	pol         *decide.Policy            // client 0's decision (pols[0]), for hedging strategies; nil for others
	est         decide.Estimator          // client 0's estimator (ests[0])
	live        decide.Estimator          // est, when estimators are fed: not for a fixed delay, which learns nothing
	feedPrimary bool                      // feed live the primary's latency (the library's rule)
	need        int32                     // fan-out sub-requests needed
	refused     [decide.NumRefusals]int64 // refusals by hedge.Refusal, of measured units
	shadow      int64                     // copies Shadow mode would have sent, of measured units
	memoD       time.Duration             // the last delay converted by delayUnits
	memoF       float64                   // and its value in time units
	traceFn     func(TraceEvent)          // Simulator.Trace, during RunScript
	doneFn      func(Completion)          // Simulator.Done
	script      []ScriptedRequest         // RunScript's requests, or nil

	// With Config.FanCall (fanCall): each fan-out request's decision,
	// one per parent slot (fans[p], allocated once: its address stays
	// put while e.par grows), the FanConfig it is reset with, the
	// canaries sent first, and each request slot's armed hedge time
	// (armT[slot], +Inf for none).
	fanCall  bool
	fanCfg   decide.FanConfig
	canaries int32
	fans     []*decide.Fan
	armT     []float64
	fanReqs  int64 // measured fan-out requests retired
	fanExtra int64 // the extra copies they sent
	fanPeak  int   // the most extra copies of one in flight at once
	fanMost  int   // the most extra copies one sent

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
	lowCopies          bool  // Config.LowPriorityCopies
	preempted          int64 // copies of measured units a primary preempted
	idleOnly           bool  // Config.IdleOnlyCopies
	refusedByServer    int64 // copies of measured units a busy server refused
	spareMoves         int64 // TiedSpare: measured units their spare ran
	busyInt, stallInt  float64

	lat, unitLat     []float64
	copies           int64 // copies placed by measured units
	units, hedged    int64
	multiRan         int64
	workSum, sizeSum float64
	delaySum         float64
	delayN           int64
	events           int64
	ctx              context.Context // checked every ctxEvery events
	err              error           // ctx's error, when it stopped the run
	maxAtt           uint8
	serversN         int
	leastLoaded      bool

	// With Config.Shards (sharded): the servers of each shard, the
	// shards, the first server of the shard being placed in, and the
	// routing load of that shard's servers by their place in it (e.load
	// of sbase+j).
	sharded   bool
	shardR    int
	shardN    int
	sbase     int
	loadShard func(int) int
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
	e.sharded, e.shardR, e.shardN, e.sbase = c.Sharded(), c.ShardReplicas(), max(c.Shards, 1), 0
	if e.loadPlain == nil {
		e.loadShard = func(j int) int { return e.load(e.sbase + j) }
		e.loadPlain = func(i int) int { return e.qs[i].busy }
		e.loadGhost = func(i int) int {
			f := &e.qs[i]
			if e.now < f.ghostUntil {
				return f.busy + 1
			}
			return f.busy
		}
		e.loadView = func(i int) int { return int(e.views[e.vbase+i].busy) }
		e.loadViewG = func(i int) int {
			v := &e.views[e.vbase+i]
			if e.now < v.ghostUntil {
				return int(v.busy) + 1
			}
			return int(v.busy)
		}
	}
	nq := c.Servers
	if e.pool {
		nq = 1
	}
	e.srv = resize(e.srv, c.Servers)
	e.qs = resize(e.qs, nq)
	for i := range e.qs {
		f := &e.qs[i]
		f.ring.clear()
		f.low.clear()
		f.busy, f.left, f.ghostUntil = 0, 0, 0
	}
	e.initClients(c, nq)
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
	e.tiedSpare = c.Strategy == TiedSpare
	e.cancel = !c.NoCancel
	e.maxAtt = uint8(c.MaxAttempts)
	e.pol, e.est, e.live = nil, nil, nil
	clear(e.pols)
	clear(e.ests)
	e.pols, e.ests = e.pols[:0], e.ests[:0]
	if _, ok := c.HedgeConfig(); ok && e.hedges {
		// A Policy per client, each from a hedge.Config of its own: a
		// budget that HedgeConfig or FromConfig makes is made afresh for
		// each, as each Hedger would make its own (see Config.Hedge).
		for range e.clientsN() {
			h, _ := c.HedgeConfig()
			pol, err := decide.FromConfig(h)
			if err != nil {
				panic(err) // unreachable after Validate
			}
			e.pols = append(e.pols, pol)
			e.ests = append(e.ests, pol.NewEstimator())
		}
		e.pol, e.est = e.pols[0], e.ests[0]
		if h, _ := c.HedgeConfig(); !isFixed(h.Delay) {
			e.live = e.est
		}
		e.hedges = e.pol.MaxAttempts() > 1
	}
	// The library's picker counts a cancelled loser as load for a while
	// (decide.Policy.Ghost); the study's presets do not.
	e.ghosts = e.pol != nil && e.pol.Ghost(time.Millisecond) > 0
	switch {
	case e.multi && e.ghosts:
		e.load = e.loadViewG
	case e.multi:
		e.load = e.loadView
	case e.ghosts:
		e.load = e.loadGhost
	default:
		e.load = e.loadPlain
	}
	e.plainLoad = !e.multi && !e.ghosts
	e.feedPrimary = c.feedPrimary()
	e.refused = [decide.NumRefusals]int64{}
	e.shadow = 0
	e.lowCopies, e.preempted = c.LowPriorityCopies, 0
	e.reports, e.workers, e.vpol = c.LoadReports && e.pol != nil, 1, e.pol
	if e.pool {
		e.workers = c.Servers
	}

	e.idleOnly, e.refusedByServer = c.IdleOnlyCopies, 0
	e.spareMoves = 0
	e.need = int32(c.Fanout)
	if c.FanoutNeed > 0 {
		e.need = int32(c.FanoutNeed)
	}
	e.fanCall, e.fanCfg, e.canaries = false, decide.FanConfig{}, 0
	e.armT = e.armT[:0]
	e.fanReqs, e.fanExtra, e.fanPeak, e.fanMost = 0, 0, 0, 0
	if fo, ok := c.fanOut(); ok {
		fc, err := c.fanConfig(fo)
		if err != nil {
			panic(err) // unreachable after Validate
		}
		e.fanCall, e.fanCfg, e.canaries = true, fc, int32(fo.Canaries)
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
	e.units, e.hedged, e.multiRan, e.copies = 0, 0, 0, 0
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
			e.onHedge(ev.a, ev.gen, ev.tag.k)
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
	var client uint16
	if e.multi {
		client = e.drawClient()
	}
	if e.c.Fanout == 1 {
		e.newUnit(-1, int32(idx), client, measured, 0)
	} else {
		e.newParent(int32(idx), client, measured)
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
	if e.fanCall {
		e.armT = append(e.armT, noTimer)
	}
	return int32(len(e.slots) - 1)
}

// newUnit starts a request (or sub-request) of client, the idx-th to
// arrive (for a sub-request, its parent's index), whose copies go to the
// shard whose first server is lo (0 without shards), and returns its
// slot.
func (e *engine) newUnit(parent, idx int32, client uint16, measured bool, lo int32) int32 {
	slot := e.alloc()
	r := &e.slots[slot]
	r.arrival = e.now
	r.lo = lo
	r.idx = idx
	if e.script != nil {
		r.size = e.script[r.idx].Sizes[0]
	} else {
		r.size = e.sz.draw(&e.rA)
	}
	r.work = 0
	r.parent = parent
	r.client = client
	r.n, r.live, r.ran, r.fanHeld = 0, 0, 0, 0
	r.done = false
	if e.fanCall {
		e.armT[slot] = noTimer
	}
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
		var q int32
		if e.tiedSpare {
			q = e.spareRoute(r)
			e.addCopyAt(slot, r, q)
		} else {
			q = e.addCopy(slot, r)
		}
		if e.pol != nil {
			pol := e.polOf(client)
			var together bool // every copy there is a leaf of r's fan-out
			load := -1
			if e.multi {
				v := e.viewOf(client, q)
				r.ahead, r.leftAt, r.byRep = v.busy-1, v.left, false
				together = v.pure && v.group == r.idx
				if rep := e.report(v); e.reports && pol.Fresh(rep.At, toDuration(e.now)) {
					// The server's report says how many copies were
					// ahead of the primary, whoever sent them.
					load = rep.Ahead(int(v.sent) - 1)
					r.repAhead, r.repLeftAt, r.byRep = int32(load), v.repLeft, true
				}
			} else {
				f := &e.qs[q]
				r.ahead, r.leftAt = int32(f.busy-1), f.left
				together = f.pure && f.group == r.idx
			}
			if load < 0 {
				load = e.loadOf(int(q)) - 1
			}
			pol.Placed(load, together && r.parent >= 0)
		}
		e.kick(q)
		if e.hedges {
			pol := e.polOf(client)
			e.emit(TraceEvent{Request: int(r.idx), Copy: 0, At: e.now})
			deadline := hedge.Never
			if e.script != nil && e.script[r.idx].Deadline > 0 {
				deadline = toDuration(e.now + e.script[r.idx].Deadline)
			}
			now := toDuration(e.now)
			pol.Begin(&r.plan, now, e.estOf(client), deadline, false, e.rMRand)
			r.plan.Fan = nil // plans are reused
			if e.fanCall && parent >= 0 {
				r.plan.Fan = e.fans[parent]
			}
			if measured && r.plan.Delay != hedge.Never {
				e.delaySum += e.delayUnits(r.plan.Delay)
				e.delayN++
			}
			pol.Schedule(&r.plan, now, e.drive(slot, r, now))
		}
	}
	return slot
}

// leave takes a copy of r that completed or was cancelled off queue q's
// count, and off its client's view of q.
func (e *engine) leave(r *request, q int32) {
	f := &e.qs[q]
	f.busy--
	if e.multi {
		e.viewOf(r.client, q).busy--
	}
}

// ended gives back the in-flight slot of copy k of r, which completed or
// was cancelled.
func (e *engine) ended(r *request, k uint8) {
	if r.held[k] {
		r.held[k] = false
		e.polOf(r.client).Done()
	}
	if b := uint8(1) << k; r.fanHeld&b != 0 {
		r.fanHeld &^= b
		r.plan.Fan.Done()
	}
}

// cancelWaiting removes a waiting copy. Its queue entry stays and is
// skipped later; the queue's load drops now.
func (e *engine) cancelWaiting(r *request, k uint8) {
	c := &r.copies[k]
	r.state[k] = cCancelled
	e.leave(r, c.q)
	r.live--
	e.ended(r, k)
}

// isFixed reports whether d is a fixed delay, whose estimator learns
// nothing and is not fed.
func isFixed(d hedge.Delay) bool {
	_, ok := d.(hedge.Fixed)
	return ok
}

// finish records the first finished copy of a unit, copy k, and cancels
// the others.
func (e *engine) finish(slot int32, r *request, k uint8) {
	r.done, r.arm = true, r.arm+1 // its timer, if any, is stale
	lat := e.now - r.arrival
	if e.live != nil {
		// The study's rule feeds the client's latency. The library's
		// feeds the primary's: its latency when it won, or, when a hedge
		// won, the censored bound (decide.Plan.PrimarySample), which is
		// this same latency; a primary that runs on without cancellation
		// is recorded when it completes, in onComplete.
		if !e.feedPrimary || k == 0 || e.cancel {
			e.estOf(r.client).Observe(toDuration(e.now), toDuration(lat))
		}
	}
	if e.pol != nil {
		e.polOf(r.client).Succeeded(&r.plan, toDuration(e.now), k > 0)
	}
	if e.cancel && r.live > 0 {
		e.cancelAll(slot, r)
	}
	if r.parent < 0 {
		if r.measured {
			e.lat = append(e.lat, lat)
		}
		if e.doneFn != nil {
			e.doneFn(Completion{Arrival: r.arrival, Latency: lat, Copies: int(r.n), Measured: r.measured, Client: int(r.client)})
		}
		return
	}
	if r.measured {
		e.unitLat = append(e.unitLat, lat)
	}
	e.subDone(r.parent, r.plan.Start)
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
			until := e.now + fromDuration(e.polOf(r.client).Ghost(r.plan.Delay))
			if e.multi {
				e.viewOf(r.client, r.copies[j].q).ghostUntil = until
			} else {
				e.qs[r.copies[j].q].ghostUntil = until
			}
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
		e.copies += int64(r.n)
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
			if e.fanCall {
				e.retireFan(r.parent)
			}
			e.pfree = append(e.pfree, r.parent)
		}
	}
}
