package hedge

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// timed is what the timer queue fires: a call waiting for its next copy.
// due is called, under the queue's lock, when the queue takes the timer
// out to fire it; fire is called after, without the lock.
type timed interface {
	due()
	fire(at time.Duration) // at: when it was due, since the epoch
}

// timerItem is the one timer of an owner (a call), which embeds it and
// sets t, itself, once. The queue's heap holds pointers to the items, and
// writes each item's index in the heap back to slot, so that the owner
// can remove it in O(log n). Queuing and removing an item so writes one
// pointer each, not the three of an item held by value: while the
// garbage collector marks, each pointer written costs a write barrier.
//
// The owner calls add, advance and remove under a lock of its own (a
// call's mutex), which guards armed: set by add and advance, cleared by
// remove. An item never armed since the last remove is in no heap, and
// its remove costs no lock of the queue's: a call that arms no timer
// (hedging off, no delay yet) does not take it at all.
type timerItem struct {
	at    time.Duration // since the Hedger's epoch; guarded by timerQueue.mu
	t     timed
	slot  int  // the item's index in the heap, guarded by timerQueue.mu; -1 when not queued
	armed bool // guarded by the owner's lock (see above)
}

// timerQueue runs the hedge timers of one [Hedger] on one goroutine.
//
// Why not one time.AfterFunc per call: that costs two allocations per call
// (the timer and the bound callback), on every call, for a timer that fires
// for a few percent of them. Here a call costs a heap push and a heap
// removal under a mutex, and nothing is allocated once the heap has grown.
//
// No goroutine is started for a timer that does not come due. The serving
// goroutine (loop) is started by one runtime timer per queue (kick), armed
// for the earliest timer queued while nothing serves, only once that timer
// is due; it then serves while timers are pending, plus a short linger,
// so that steady traffic does not start one per call. The kick is not
// stopped when its timer is removed, which would cost a runtime timer
// operation on every call: it fires later, finds nothing due, and arms
// itself for the earliest timer left, if any. So a timer removed before
// it is due (a call whose primary answered) costs no goroutine, though an
// idle queue's kick may still fire once, for nothing. An idle [Hedger] runs
// no goroutine and needs no Close. A precise queue starts its loop at the
// first timer instead, to spin before it.
//
// Precise timers ([Config.PreciseTimers]). The runtime's timers fire about a
// millisecond late when the process is otherwise idle (the runtime then
// sleeps in epoll_wait, whose timeout is rounded up to a millisecond), and
// the kernel's own sleep (nanosleep) wakes tens of microseconds late (its
// timer slack). A precise queue approaches each timer in three stages,
// chosen by planWait: the runtime timer while the timer is further away
// than that timer's lateness; then short kernel sleeps; then it spins,
// yielding the processor, for the last stretch only, sized from the
// kernel sleep's measured lateness. Both latenesses are estimated as the
// loop runs. The kernel sleep's is one spread, and adapt follows a high
// percentile of it (quick to rise, slow to fall). The runtime timer's is
// not one spread: it depends on how long the timer was set for, and at a
// given length it is either small or about a whole millisecond (on Linux
// the idle runtime's epoll_wait counts whole milliseconds: it sleeps the
// wait truncated, then one more millisecond for the remainder, so a timer
// whose remainder outlasts the kernel's slack wakes about a millisecond
// late and the others do not). An estimate between the two modes is
// exceeded by every wake in the upper one, whose timer then comes due
// during the runtime timer's sleep; so the queue estimates the runtime
// timer's lateness as the largest it has seen (coarseLate says why it
// does not fall back), and planWait ends that sleep early enough for it.
// Spinning stops as soon as the timer it waits for is removed (the call
// ended first, the usual case) and nothing else is due within the
// stretch; so the cost follows the timers that come close to firing, not
// the calls in flight.
//
// Lock order: a call's own mutex may be held while taking the queue's (to
// remove its timer), never the reverse: the loop fires timers after
// releasing the queue's mutex.
type timerQueue struct {
	epoch   time.Time
	mu      sync.Mutex
	items   []*timerItem // min-heap on at
	serving bool
	added   bool // a timer was added since the loop last looked
	// kick starts the loop when the earliest timer is due while nothing
	// serves; kickAt is when it is armed for, or Never.
	kick   *time.Timer
	kickAt time.Duration
	// sleepUntil is when the loop will look next; an earlier timer wakes it.
	sleepUntil time.Duration
	wake       chan struct{} // buffered(1)
	precise    bool          // approach each timer by planWait
	// head is the earliest timer's at, or Never: written under mu, read
	// without it by a spinning loop. Only a precise queue spins, so only
	// a precise queue keeps it: a call does not pay the store.
	head atomic.Int64
	// late is the loop's estimate of how late each way of sleeping wakes,
	// and spin what it may still spin; only the loop goroutine touches
	// them.
	late lateness
	spin allowance
	// coarse tracks the runtime timer's lateness, whose value
	// late.coarse holds.
	coarse coarseLate
	// kicks counts the kick's firings, looks the loop's looks at the heap
	// and fired the timers it fired, under mu: what
	// BenchmarkTimerQueueLooks reports.
	kicks, looks, fired int64
}

// lateness is how late the two ways of sleeping wake, as estimated from
// the loop's own sleeps: by coarseLate for the runtime timer, by adapt
// for a kernel sleep.
type lateness struct {
	coarse time.Duration // the runtime timer
	fine   time.Duration // a kernel sleep (fineSleep)
}

// peak is the largest of a lateness's recent samples: the largest
// sample of the current window and of the previous one, of a fixed
// number of samples each, so that a sample counts for one to two windows
// and is then forgotten.
type peak struct {
	cur, prev time.Duration
	n         int // samples in the current window
}

// add records one sample in windows of window samples.
func (p peak) add(sample time.Duration, window int) peak {
	p.cur = max(p.cur, sample)
	if p.n++; p.n >= window {
		p.prev, p.cur, p.n = p.cur, 0, 0
	}
	return p
}

// value is the estimate: the largest sample of the last one to two
// windows.
func (p peak) value() time.Duration { return max(p.cur, p.prev) }

// coarseLate estimates the runtime timer's lateness as a maximum, not a
// percentile: at a given length of sleep the lateness is either small
// or about a millisecond (see timerQueue), the upper mode may be a small
// share of the samples, and an estimate below it is exceeded by all of
// that share.
//
// Nor may the estimate fall back once it covers that millisecond. The
// samples depend on it: planWait sets the sleep's length from it, and
// whether a sleep wakes a millisecond late depends on its length to the
// microsecond, not on whether it is long or short. A queue whose
// estimate covers the millisecond sleeps to lengths that happen to wake
// early, for as long as its timers keep their rhythm, so its samples
// stay low; an estimate that then fell to them would lengthen the sleep
// into the next millisecond and send the timer a millisecond late, one
// timer after another as it climbed back. So: settled, the largest
// sample ever seen, from initialCoarseLate, taking each sample up to
// maxSettledCoarseLate; and recent, the largest of the last recentWindow
// to twice that many samples, up to maxCoarseLate, which follows a
// machine whose timers have become later still and forgets a descheduled
// wake-up soon. Estimating high costs only kernel sleeps of fineSlice, a
// few per millisecond, before the timers that come that close to firing;
// estimating low sends a hedge late.
type coarseLate struct {
	recent  peak
	settled time.Duration
}

// The window and the caps of coarseLate's two memories.
const (
	recentWindow         = 64
	maxSettledCoarseLate = 1500 * time.Microsecond
)

// newCoarseLate returns an estimate that starts at initialCoarseLate.
func newCoarseLate() coarseLate {
	return coarseLate{settled: initialCoarseLate}
}

// add records one sample, clamped to [0, maxCoarseLate].
func (e coarseLate) add(sample time.Duration) coarseLate {
	sample = min(max(sample, 0), maxCoarseLate)
	e.recent = e.recent.add(sample, recentWindow)
	e.settled = max(e.settled, min(sample, maxSettledCoarseLate))
	return e
}

// value is the estimate: the larger of the two memories.
func (e coarseLate) value() time.Duration { return max(e.recent.value(), e.settled) }

// Starting estimates, before the loop has measured anything: what this
// project's test machines showed (BENCHMARKS.md; the runtime timer's is
// also the least coarseLate estimates, a millisecond and two kernel
// slacks), and caps that keep one descheduled wake-up from making the
// queue spin, or sleep in slices, for long.
const (
	initialCoarseLate = 1100 * time.Microsecond
	initialFineLate   = 80 * time.Microsecond
	maxCoarseLate     = 4 * time.Millisecond
	maxFineLate       = 500 * time.Microsecond
)

// spinWindow bounds the stretch a precise queue spins before a timer.
const spinWindow = 1500 * time.Microsecond

// minSpin is the shortest stretch spun before a timer: a clock read and a
// yield take a few microseconds.
const minSpin = 10 * time.Microsecond

// fineSlice is the longest single kernel sleep. The loop cannot be woken
// during one, so a timer added meanwhile, due sooner than the one slept
// for, is seen at most this late.
const fineSlice = 250 * time.Microsecond

// linger is how long the serving goroutine waits for new timers before it
// exits.
const linger = 50 * time.Millisecond

// waitMode is a way for the loop to wait for its next timer.
type waitMode uint8

const (
	// waitCoarse sleeps on the runtime timer, and wakes early when an
	// earlier timer is added.
	waitCoarse waitMode = iota
	// waitFine sleeps in the kernel (fineSleep), not woken by new timers.
	waitFine
	// waitSpin spins, yielding the processor, until the timer is due,
	// an earlier one is added, or the one waited for is removed.
	waitSpin
)

// spinStretch is how long before a timer a precise queue starts to spin,
// given the kernel sleep's estimated lateness: that lateness and half
// again, within [minSpin, spinWindow].
func spinStretch(fineLate time.Duration) time.Duration {
	return min(max(fineLate+fineLate/2, minSpin), spinWindow)
}

// spinShare bounds the queue's spinning to this share of wall time (one
// twentieth: 5% of a core), and spinBurst is the most spinning it may save
// up while idle. Spinning beyond that, as a loaded machine with late
// kernel sleeps would ask, buys little: a spinning thread that the kernel
// deschedules is late whatever it does.
const (
	spinShare = 20
	spinBurst = 2 * time.Millisecond
)

// allowance is how much spinning the queue may still do: spinShare of the
// time that passed, saved up to spinBurst, less what it spun.
type allowance struct {
	left time.Duration
	at   time.Duration // when left was last brought up to date
}

// refill brings the allowance up to date at now.
func (a allowance) refill(now time.Duration) allowance {
	if now > a.at {
		a.left = min(a.left+(now-a.at)/spinShare, spinBurst)
		a.at = now
	}
	return a
}

// spend takes d of spinning out of the allowance.
func (a allowance) spend(d time.Duration) allowance {
	a.left = max(a.left-max(d, 0), 0)
	return a
}

// planWait decides how the loop waits for the earliest timer, due in wait
// (pending), or for new timers (not pending: it lingers), and for how
// long. A queue that is not precise always sleeps on the runtime timer
// until the timer is due. A precise one spins only when the timer is
// within spinStretch and its allowance covers that stretch; further
// away, it sleeps on the runtime timer when even that timer's lateness
// leaves a kernel sleep's worth of time before the stretch, and in a
// kernel sleep of at most fineSlice otherwise. Without the allowance, it
// sleeps in the kernel up to the timer itself.
func planWait(wait time.Duration, pending, precise bool, late lateness, spin time.Duration) (waitMode, time.Duration) {
	if !pending {
		return waitCoarse, linger
	}
	if !precise {
		return waitCoarse, wait
	}
	stretch := spinStretch(late.fine)
	if spin < min(wait, stretch) {
		stretch = 0
	}
	if wait <= stretch {
		return waitSpin, wait
	}
	if d := wait - stretch - late.coarse; d >= fineSlice {
		return waitCoarse, d
	}
	return waitFine, min(wait-stretch, fineSlice)
}

// adapt returns the estimate est of a lateness updated with one measured
// sample, clamped to [0, ceiling]: it moves a quarter of the way up to a
// sample above it and a sixty-fourth of the way down to one below, so it
// settles near a high percentile of the samples (about the 95th for a
// steady spread) and one outlier moves it only part of the way.
func adapt(est, sample, ceiling time.Duration) time.Duration {
	sample = min(max(sample, 0), ceiling)
	if sample > est {
		return est + (sample-est+3)/4
	}
	return est - (est-sample)/64
}

func newTimerQueue(epoch time.Time) *timerQueue {
	q := &timerQueue{epoch: epoch, wake: make(chan struct{}, 1),
		late: lateness{fine: initialFineLate}}
	q.coarse = newCoarseLate()
	q.late.coarse = q.coarse.value()
	q.head.Store(int64(Never))
	q.kickAt = Never
	return q
}

// observeCoarse records that a runtime-timer sleep woke late late.
func (q *timerQueue) observeCoarse(late time.Duration) {
	q.coarse = q.coarse.add(late)
	q.late.coarse = q.coarse.value()
}

// setHead publishes the earliest timer's time, if the queue is precise.
// q.mu is held.
func (q *timerQueue) setHead() {
	if !q.precise {
		return
	}
	at := Never
	if len(q.items) > 0 {
		at = q.items[0].at
	}
	q.head.Store(int64(at))
}

// add queues it to fire at at (since the epoch). An item that is queued
// already (slot >= 0) is moved to at: a call has one timer at most.
func (q *timerQueue) add(it *timerItem, at time.Duration) {
	it.armed = true
	q.mu.Lock()
	it.at = at
	if i := it.slot; i >= 0 {
		q.down(i)
		q.up(i)
		q.queued(at)
		return
	}
	q.push(it)
	q.queued(at)
}

// push adds it, not queued, to the heap. q.mu is held and it.at set.
func (q *timerQueue) push(it *timerItem) {
	i := len(q.items)
	q.items = append(q.items, it)
	it.slot = i
	q.up(i)
}

// advance brings it forward to at, if it is queued for later; if it is
// not queued and the queue has not taken it to fire (*taken, which t.due
// sets under q.mu), it queues it for at. An item queued for at or
// earlier, or taken, is left as it is.
func (q *timerQueue) advance(it *timerItem, at time.Duration, taken *bool) {
	it.armed = true
	q.mu.Lock()
	switch i := it.slot; {
	case i >= 0 && it.at > at:
		it.at = at
		q.up(i)
	case i < 0 && !*taken:
		it.at = at
		q.push(it)
	default:
		q.mu.Unlock()
		return
	}
	q.queued(at)
}

// queued publishes a timer just queued for at, wakes or starts whatever
// must serve it, and unlocks q.mu, which is held.
func (q *timerQueue) queued(at time.Duration) {
	q.setHead()
	q.added = true
	start, poke := false, false
	switch {
	case q.serving:
		if poke = at < q.sleepUntil; poke {
			q.sleepUntil = at
		}
	case q.precise:
		q.serving, start = true, true
	case at < q.kickAt:
		q.armKick(at)
	}
	q.mu.Unlock()
	if start {
		go q.loop()
	} else if poke {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// armKick arms the kick for at (since the epoch). q.mu is held.
func (q *timerQueue) armKick(at time.Duration) {
	q.kickAt = at
	d := at - time.Since(q.epoch)
	if q.kick == nil {
		q.kick = time.AfterFunc(d, q.kicked)
	} else {
		q.kick.Reset(d)
	}
}

// kicked runs on a goroutine of its own when the kick fires. It serves
// the queue if its earliest timer is due; if that timer is not due yet
// (the one the kick was armed for was removed), it arms the kick for it.
func (q *timerQueue) kicked() {
	q.mu.Lock()
	q.kicks++
	q.kickAt = Never
	if q.serving || len(q.items) == 0 {
		q.mu.Unlock()
		return
	}
	if at := q.items[0].at; at > time.Since(q.epoch) {
		q.armKick(at)
		q.mu.Unlock()
		return
	}
	q.serving = true
	q.mu.Unlock()
	q.loop()
}

// remove takes it out of the queue, if it is still there.
func (q *timerQueue) remove(it *timerItem) {
	if !it.armed {
		return
	}
	it.armed = false
	q.mu.Lock()
	if i := it.slot; i >= 0 {
		q.removeAt(i)
		q.setHead()
	}
	q.mu.Unlock()
}

func (q *timerQueue) removeAt(i int) {
	last := len(q.items) - 1
	q.items[i].slot = -1
	if i != last {
		q.items[i] = q.items[last]
		q.items[i].slot = i
	}
	q.items[last] = nil
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
}

func (q *timerQueue) less(i, j int) bool { return q.items[i].at < q.items[j].at }

func (q *timerQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].slot = i
	q.items[j].slot = j
}

func (q *timerQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *timerQueue) down(i int) {
	n := len(q.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// loop fires due timers. It waits as planWait says, for the earliest
// timer or for at most linger, and exits after a whole linger with no
// timer added.
func (q *timerQueue) loop() {
	sleep := time.NewTimer(linger)
	defer sleep.Stop()
	var due []timed
	var dueAt []time.Duration
	lingered := false // the last wait was a whole linger with nothing queued
	for {
		q.mu.Lock()
		q.looks++
		now := time.Since(q.epoch)
		due, dueAt = due[:0], dueAt[:0]
		for len(q.items) > 0 && q.items[0].at <= now {
			q.items[0].t.due()
			due = append(due, q.items[0].t)
			dueAt = append(dueAt, q.items[0].at)
			q.removeAt(0)
		}
		q.fired += int64(len(due))
		q.setHead()
		if lingered && !q.added && len(due) == 0 && len(q.items) == 0 {
			q.serving = false
			q.mu.Unlock()
			return
		}
		lingered = false
		q.added = false
		wait := linger
		pending := len(q.items) > 0
		if pending {
			wait = min(wait, q.items[0].at-now)
		}
		q.sleepUntil = now + wait
		q.mu.Unlock()
		if len(due) > 0 {
			for i, t := range due {
				t.fire(dueAt[i])
				due[i] = nil
			}
			continue // firing took time and may have queued more
		}
		q.spin = q.spin.refill(now)
		mode, d := planWait(wait, pending, q.precise, q.late, q.spin.left)
		switch mode {
		case waitSpin:
			q.spinUntil(now + d)
			q.spin = q.spin.spend(time.Since(q.epoch) - now)
		case waitFine:
			start := time.Since(q.epoch)
			fineSleep(d)
			q.late.fine = adapt(q.late.fine, time.Since(q.epoch)-start-d, maxFineLate)
			// The heap is looked at next: a wake-up sent meanwhile is
			// stale.
			select {
			case <-q.wake:
			default:
			}
		default:
			sleep.Reset(d)
			select {
			case <-sleep.C:
				lingered = !pending
				if q.precise && pending {
					q.observeCoarse(time.Since(q.epoch) - now - d)
				}
			case <-q.wake:
			}
		}
	}
}

// spinUntil yields the processor until until (since the epoch), or until an
// earlier timer is added, or until the earliest timer is later than until
// (the one waited for was removed): nothing is due then, and the loop
// plans again. Checking the heap would take the lock, so it peeks at the
// clock and at head alone.
func (q *timerQueue) spinUntil(until time.Duration) {
	for time.Since(q.epoch) < until {
		if time.Duration(q.head.Load()) > until {
			return
		}
		select {
		case <-q.wake:
			return
		default:
			runtime.Gosched()
		}
	}
}
