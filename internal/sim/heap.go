package sim

import "math"

// Event kinds. Arrivals and completions are not in the heap: the next
// arrival time is kept apart, and each server's next completion is in the
// completion tree (depTree); the loop compares their minima with the
// heap's and the timer queue's.
const (
	evStall      uint8 = iota // a = server: its stall state flips
	evHedge                   // a = request slot, gen = slot generation, k = the request's timer count (request.arm)
	evTiedCancel              // a = request slot, gen = slot generation, k = copy
	evSlow                    // every server's slowdown state flips (correlated world)
)

// event is a value in the heap; nothing is boxed and nothing allocates once
// the heap's backing array has grown to its working size. Events that became
// stale (a hedge timer of a request that finished) stay in the heap and are
// recognised by their generation when popped.
type event struct {
	t   float64
	a   int32
	gen uint32
	tag evTag
}

// evTag says what an event is. It is a struct of its own so that event has
// four fields: the compiler keeps a struct of at most four fields in
// registers, and an event is copied out of the heap or the timer queue and
// handed to its handler on every turn of the loop, where a struct in memory
// costs stack stores and loads.
type evTag struct {
	kind uint8
	k    uint8 // the copy, for evTiedCancel; the timer's count, for evHedge
}

// eventHeap is a 4-ary min-heap on t. Four children per node halve the
// depth of a binary heap, and sift-down compares children that sit side by
// side in memory.
type eventHeap struct {
	h []event
}

func (q *eventHeap) len() int { return len(q.h) }

// minT returns the earliest event time; the heap must not be empty.
func (q *eventHeap) minT() float64 { return q.h[0].t }

func (q *eventHeap) push(e event) {
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if h[p].t <= e.t {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (q *eventHeap) pop() event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	last := h[n]
	q.h = h[:n]
	if n == 0 {
		return top
	}
	h = h[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		// m is the first child with the smallest time.
		var m int
		var mt float64
		if c+3 < n {
			// Four children: a tournament that picks the child a scan
			// would (the first of equal times), without branches. The
			// times are random, so a branch per comparison would be
			// mispredicted half the time, and this choice is made for
			// nearly every event.
			h4 := h[c : c+4 : c+4]
			t0, t1, t2, t3 := h4[0].t, h4[1].t, h4[2].t, h4[3].t
			a, at := c+b2i(t1 < t0), min(t0, t1)
			b, bt := c+2+b2i(t3 < t2), min(t2, t3)
			d := b2i(bt < at)
			m, mt = a+d*(b-a), min(at, bt)
		} else {
			m, mt = c, h[c].t
			for j := c + 1; j < n; j++ {
				if h[j].t < mt {
					m, mt = j, h[j].t
				}
			}
		}
		if last.t <= mt {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top
}

func (q *eventHeap) reset() { q.h = q.h[:0] }

// timerFIFO holds timers pushed in non-decreasing time order, which is what
// a fixed hedge delay produces (and a slowly moving live delay mostly
// does): pushing and popping are O(1) instead of O(log n). The engine
// pushes a timer here when it is not earlier than the last one queued, and
// into the heap otherwise, and always takes the earlier of the two heads.
type timerFIFO struct {
	buf  []event // length a power of two
	head int
	n    int
	last float64
}

func (f *timerFIFO) len() int { return f.n }

// accepts reports whether a timer at t keeps the queue ordered.
func (f *timerFIFO) accepts(t float64) bool { return f.n == 0 || t >= f.last }

func (f *timerFIFO) minT() float64 { return f.buf[f.head].t }

func (f *timerFIFO) push(e event) {
	if f.n == len(f.buf) {
		nb := make([]event, max(64, 2*len(f.buf)))
		for i := range f.n {
			nb[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = e
	f.n++
	f.last = e.t
}

func (f *timerFIFO) pop() event {
	e := f.buf[f.head]
	f.head = (f.head + 1) & (len(f.buf) - 1)
	f.n--
	return e
}

func (f *timerFIFO) reset() { f.head, f.n, f.last = 0, 0, 0 }

// depTree holds each server's next completion time (+Inf when it has none)
// and finds the earliest with a tournament tree: a complete binary tree
// over the servers whose every node holds the earliest time in its subtree
// and the server it belongs to. A server has at most one pending
// completion, FCFS or processor sharing, so a change (a copy started,
// cancelled or finished, a speed changed) overwrites its leaf and replays
// the matches on the path to the root; nothing goes stale. Completions
// were most of the event heap's traffic: keeping them here leaves the heap
// the rare events (stalls, slowdowns, delayed cancellations, out-of-order
// hedge timers).
//
// The new value is carried up and matched against each sibling's, so the
// path's loads do not wait for one another, and the times are compared as
// their IEEE 754 bits (in the same order as the values, all being
// non-negative), which the compiler turns into conditional moves: which
// of two completion times is earlier is a coin toss the processor cannot
// predict.
type depTree struct {
	t      []uint64 // times as math.Float64bits; t[1] is the root, the leaves are t[leaves+s]
	s      []int32  // the server each node's time belongs to
	leaves int
}

func (d *depTree) reset(servers int) {
	d.leaves = 1
	for d.leaves < servers {
		d.leaves *= 2
	}
	d.t = resize(d.t, 2*d.leaves)
	d.s = resize(d.s, 2*d.leaves)
	inf := math.Float64bits(math.Inf(1))
	for i := range d.t {
		// Every node, padding leaves included, holds +Inf: a padding
		// leaf never wins a match it could change.
		d.t[i], d.s[i] = inf, int32(min(max(i-d.leaves, 0), servers-1))
	}
}

// min returns the server finishing first and its time (+Inf if none is
// busy).
func (d *depTree) min() (int32, float64) {
	return d.s[1], math.Float64frombits(d.t[1])
}

// set makes t (>= 0) server s's next completion time. Of equal times the
// one carried up wins the match, so ties go to the server updated last: an
// order that, like the rest of a run, depends on the seed alone.
func (d *depTree) set(s int32, t float64) {
	ts, ss := d.t, d.s
	i := d.leaves + int(s)
	ct, cs := math.Float64bits(t), s
	ts[i], ss[i] = ct, cs
	for ; i > 1; i >>= 1 {
		st, sn := ts[i^1], ss[i^1]
		if st < ct {
			ct, cs = st, sn
		}
		ts[i>>1], ss[i>>1] = ct, cs
	}
}
