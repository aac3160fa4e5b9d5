package hedge

import (
	"runtime"
	"sync"
	"time"
)

// timed is what the timer queue fires: a call waiting for its next copy.
type timed interface {
	fire()
}

// timerItem is one pending timer. The slot it occupies in the heap is
// written back to *slot, so the owner can remove it in O(log n).
type timerItem struct {
	at   time.Duration // since the Hedger's epoch
	t    timed
	slot *int // guarded by timerQueue.mu; -1 when not queued
}

// timerQueue runs the hedge timers of one Hedger on one goroutine.
//
// Why not one time.AfterFunc per call: that costs two allocations per call
// (the timer and the bound callback), on every call, for a timer that fires
// for a few percent of them. Here a call costs a heap push and a heap
// removal under a mutex, and nothing is allocated once the heap has grown.
// The serving goroutine exists only while timers are pending (plus a short
// linger, so that steady traffic does not start one per call); an idle
// Hedger runs no goroutine and needs no Close.
//
// Lock order: a call's own mutex may be held while taking the queue's (to
// remove its timer), never the reverse: the loop fires timers after
// releasing the queue's mutex.
type timerQueue struct {
	epoch   time.Time
	mu      sync.Mutex
	items   []timerItem // min-heap on at
	serving bool
	added   bool // a timer was added since the loop last looked
	// sleepUntil is when the loop will look next; an earlier timer wakes it.
	sleepUntil time.Duration
	wake       chan struct{} // buffered(1)
	precise    bool          // spin for the last spinWindow before a timer
}

// spinWindow is how far ahead of a timer a precise queue stops sleeping and
// starts spinning: a little more than the runtime timer's usual overshoot.
const spinWindow = 1500 * time.Microsecond

// linger is how long the serving goroutine waits for new timers before it
// exits.
const linger = 50 * time.Millisecond

func newTimerQueue(epoch time.Time) *timerQueue {
	return &timerQueue{epoch: epoch, wake: make(chan struct{}, 1)}
}

// add queues t to fire at at (since the epoch) and records its slot.
func (q *timerQueue) add(t timed, at time.Duration, slot *int) {
	q.mu.Lock()
	i := len(q.items)
	q.items = append(q.items, timerItem{at: at, t: t, slot: slot})
	*slot = i
	q.up(i)
	q.added = true
	start := !q.serving
	poke := !start && at < q.sleepUntil
	if poke {
		q.sleepUntil = at
	}
	q.serving = true
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

// remove takes the timer at *slot out of the queue, if it is still there.
func (q *timerQueue) remove(slot *int) {
	q.mu.Lock()
	if i := *slot; i >= 0 {
		q.removeAt(i)
	}
	q.mu.Unlock()
}

func (q *timerQueue) removeAt(i int) {
	last := len(q.items) - 1
	*q.items[i].slot = -1
	if i != last {
		q.items[i] = q.items[last]
		*q.items[i].slot = i
	}
	q.items[last] = timerItem{}
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
}

func (q *timerQueue) less(i, j int) bool { return q.items[i].at < q.items[j].at }

func (q *timerQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	*q.items[i].slot = i
	*q.items[j].slot = j
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

// loop fires due timers. It sleeps until the earliest timer, or for at most
// linger, and exits after a whole linger with no timer added.
func (q *timerQueue) loop() {
	sleep := time.NewTimer(linger)
	defer sleep.Stop()
	var due []timed
	idle := false
	for {
		q.mu.Lock()
		now := time.Since(q.epoch)
		due = due[:0]
		for len(q.items) > 0 && q.items[0].at <= now {
			due = append(due, q.items[0].t)
			q.removeAt(0)
		}
		if len(due) == 0 && len(q.items) == 0 {
			if idle && !q.added {
				q.serving = false
				q.mu.Unlock()
				return
			}
			idle = true
		} else {
			idle = false
		}
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
				t.fire()
				due[i] = nil
			}
			continue // firing took time and may have queued more
		}
		if q.precise && pending && wait <= spinWindow {
			// Spin, yielding the processor, until the timer is due or an
			// earlier one arrives. Checking the heap takes the lock, so
			// peek at the clock alone and look again when it is time.
			until := now + wait
			for time.Since(q.epoch) < until {
				select {
				case <-q.wake:
					until = 0
				default:
					runtime.Gosched()
				}
			}
			continue
		}
		if q.precise && pending {
			wait -= spinWindow
		}
		sleep.Reset(wait)
		select {
		case <-sleep.C:
		case <-q.wake:
		}
	}
}
