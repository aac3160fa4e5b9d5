package sim

// Event kinds. Arrivals are not in the heap: the next arrival time is kept
// apart and compared with the heap's minimum.
const (
	evComplete   uint8 = iota // a = server, gen = server generation
	evStall                   // a = server: its stall state flips
	evHedge                   // a = request slot, gen = slot generation
	evTiedCancel              // a = request slot, gen = slot generation, k = copy
)

// event is a value in the heap; nothing is boxed and nothing allocates once
// the heap's backing array has grown to its working size. Events that became
// stale (a completion rescheduled by a speed change, a hedge timer of a
// request that finished) stay in the heap and are recognised by their
// generation when popped.
type event struct {
	t    float64
	a    int32
	gen  uint32
	kind uint8
	k    uint8
}

// eventHeap is a 4-ary min-heap on t. Four children per node halve the
// depth of a binary heap, and sift-down compares children that sit in one
// cache line.
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
		m := c
		mt := h[c].t
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].t < mt {
				m, mt = j, h[j].t
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
