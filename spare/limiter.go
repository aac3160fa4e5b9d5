package spare

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tailcut/hedge"
)

// Defaults of Config fields left at zero.
const (
	DefaultMaxQueue = 1024
)

// Errors of Run. Match them with errors.Is.
var (
	// ErrQueueFull: every worker is busy and the queue of the request's
	// kind is full. HTTP answers 503, gRPC ResourceExhausted.
	ErrQueueFull = errors.New("spare: the server's queue is full")
	// ErrPreempted is the cause (context.Cause) of a copy's context when a
	// primary took its worker: the copy's function should return soon;
	// its result is discarded and it runs again later.
	ErrPreempted = errors.New("spare: a primary took the copy's worker")
	// ErrNoSpare: a copy that cannot be preempted (a CopyOnce, or a Copy
	// that asks to Commit) found no worker it may hold: none was free
	// when it came, a request was waiting, or such copies already hold
	// Config.MaxUnpreemptible workers. The copy is refused, so that it
	// cannot hold a worker that a primary will want. HTTP answers 409
	// with "Tied-Dropped: no-spare" (see Handler), which tells hedgehttp
	// to send no further copy and leave the request to its primary; gRPC
	// answers ResourceExhausted.
	ErrNoSpare = errors.New("spare: no worker to spare for a copy that cannot be preempted")
	// ErrInvalidConfig is wrapped by New's errors.
	ErrInvalidConfig = errors.New("spare: invalid configuration")
)

// Kind is how a request is admitted.
type Kind uint8

const (
	// Primary: a request's first copy, or any request that is not marked
	// as a hedge. Primaries run in arrival order and never wait for a
	// Copy that has not committed (see the package doc, "What holds").
	Primary Kind = iota
	// Copy: a hedge copy that can be run again from the start (its
	// request can be replayed and its answer is not sent until it
	// finishes). It waits behind every primary, and yields its worker to
	// a primary that arrives when none is free: its context is cancelled
	// with ErrPreempted, and once its function has returned it waits
	// again, first among the copies, to run from the start.
	Copy
	// CopyOnce: a hedge copy that cannot be run again (it streams its
	// answer, or its request body cannot be replayed). Once started it
	// runs to the end, so it never waits: it runs only on a worker free
	// when it comes, with no request waiting, and while copies that
	// cannot be preempted hold fewer than Config.MaxUnpreemptible
	// workers. Otherwise Run refuses it with ErrNoSpare.
	CopyOnce
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Primary:
		return "primary"
	case Copy:
		return "copy"
	case CopyOnce:
		return "copy-once"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Config configures a Limiter.
type Config struct {
	// Workers is the most requests that run at once (required).
	Workers int
	// MaxQueue bounds the primaries waiting for a worker, and separately
	// the copies: a request that finds its queue full is refused
	// (ErrQueueFull). Zero means DefaultMaxQueue; negative means no
	// queue for primaries (a primary that finds every worker busy is
	// refused, unless a copy holds one) and none for copies (a copy runs
	// only on a worker that is free when it arrives).
	MaxQueue int
	// MaxUnpreemptible bounds the workers held at once by copies that
	// cannot be preempted: CopyOnce copies and copies that committed
	// (Commit). Only those can make a primary wait for a copy, so at
	// least Workers-MaxUnpreemptible workers are always free of them.
	// Zero means Workers/2, at least one; negative means none (every
	// CopyOnce and every Commit is refused).
	MaxUnpreemptible int
}

// Limiter admits a server's requests to a fixed number of workers, with
// hedge copies at low priority: a copy waits behind every primary, and a
// primary that finds every worker busy takes one from a running copy (see
// Kind). So a copy uses only capacity that no primary wants, within the
// bounds of the package doc ("What holds"). Make one with New; it is
// safe for concurrent use.
type Limiter struct {
	workers, maxQueue, maxOnce int

	mu        sync.Mutex
	running   int
	once      int       // workers held by copies that cannot be preempted
	primaries list.List // of *waiter, oldest first
	copies    list.List // of *waiter, next first
	active    list.List // of *runner: copies holding a worker, oldest first

	c counters
}

// waiter is a request waiting for a worker.
type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool
	elem    *list.Element
	r       *runner // the copy's, nil for a primary
}

// runner is a copy holding a worker.
type runner struct {
	l           *Limiter
	cancel      context.CancelCauseFunc
	preemptible bool
	preempted   bool
	once        bool // holds one of the workers counted in Limiter.once
	noSpare     bool // Commit refused it: it ends with ErrNoSpare
	elem        *list.Element
}

type counters struct {
	primaries, copies, preempted, reruns, refused, abandoned atomic.Int64
	done                                                     atomic.Int64 // releases of a worker: requests answered, a preempted run included
}

// New validates cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Workers <= 0 {
		return nil, fmt.Errorf("%w: Workers is %d: set the most requests the server runs at once (at least 1)", ErrInvalidConfig, cfg.Workers)
	}
	l := &Limiter{workers: cfg.Workers, maxQueue: cfg.MaxQueue, maxOnce: cfg.MaxUnpreemptible}
	switch {
	case l.maxQueue == 0:
		l.maxQueue = DefaultMaxQueue
	case l.maxQueue < 0:
		l.maxQueue = 0
	}
	switch {
	case l.maxOnce == 0:
		l.maxOnce = max(1, l.workers/2)
	case l.maxOnce < 0:
		l.maxOnce = 0
	}
	return l, nil
}

// Run calls fn once the request may run, and returns fn's error, or
// ErrQueueFull, or ctx's error if ctx ends while the request waits.
//
// A Primary runs when a worker is free and no earlier primary waits; if
// every worker is busy and a Copy holds one, that copy is preempted (the
// one that started last, which has done the least) and the primary gets
// its worker when the copy's fn returns. A Copy runs only when a worker
// is free and no primary waits. A CopyOnce never waits: it runs at once
// or is refused with ErrNoSpare (see CopyOnce). A preempted Copy's fn sees
// its context cancelled with cause ErrPreempted; when it returns, Run
// queues the copy again at the front of the copies and calls fn anew
// when its turn comes, so fn must not have sent anything of its answer
// (the HTTP middleware buffers a copy's answer for that reason). Run
// returns the last call's error, or ErrNoSpare if the copy's Commit was
// refused.
func (l *Limiter) Run(ctx context.Context, kind Kind, fn func(context.Context) error) error {
	if kind == Primary {
		if err := l.acquire(ctx, kind, nil, false); err != nil {
			return err
		}
		l.c.primaries.Add(1)
		defer l.release()
		return fn(ctx)
	}
	for again := false; ; again = true {
		runCtx, cancel := context.WithCancelCause(ctx)
		r := &runner{l: l, cancel: cancel, preemptible: kind == Copy}
		// acquire makes r an active copy in the same critical section
		// that grants it the worker, so that a primary arriving from
		// then on finds it to preempt.
		if err := l.acquire(ctx, kind, r, again); err != nil {
			cancel(nil)
			return err
		}
		if !again {
			l.c.copies.Add(1)
		}
		err := fn(context.WithValue(runCtx, runnerKey{}, r))
		l.mu.Lock()
		l.active.Remove(r.elem)
		preempted, noSpare := r.preempted, r.noSpare
		if r.once {
			l.once--
		}
		l.mu.Unlock()
		cancel(nil)
		l.release()
		if noSpare {
			l.c.refused.Add(1)
			return ErrNoSpare
		}
		if !preempted || ctx.Err() != nil {
			return err
		}
		l.c.reruns.Add(1)
	}
}

// acquire waits for a worker for a request of kind; r is the copy's runner
// (nil for a primary), made active when the worker is granted, and again
// marks a preempted copy, which goes first among the copies.
func (l *Limiter) acquire(ctx context.Context, kind Kind, r *runner, again bool) error {
	l.mu.Lock()
	if kind == CopyOnce {
		if l.running < l.workers && l.primaries.Len() == 0 && l.copies.Len() == 0 && l.once < l.maxOnce {
			l.grantLocked(r)
			r.once = true
			l.once++
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		l.c.refused.Add(1)
		return ErrNoSpare
	}
	if l.running < l.workers && l.primaries.Len() == 0 && (kind == Primary || l.copies.Len() == 0) {
		l.grantLocked(r)
		l.mu.Unlock()
		return nil
	}
	q := &l.copies
	if kind == Primary {
		q = &l.primaries
	}
	// A preempted copy keeps its place whatever the bound: it was admitted.
	if q.Len() >= l.maxQueue && !(kind == Primary && l.preemptibleLocked() != nil) && !again {
		l.mu.Unlock()
		l.c.refused.Add(1)
		return ErrQueueFull
	}
	w := &waiter{ready: make(chan struct{}), r: r}
	if again {
		w.elem = q.PushFront(w)
	} else {
		w.elem = q.PushBack(w)
	}
	if kind == Primary {
		l.preemptLocked()
	}
	l.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if !w.granted {
			q.Remove(w.elem)
			l.mu.Unlock()
			l.c.abandoned.Add(1)
			return ctx.Err()
		}
		if r != nil {
			l.active.Remove(r.elem)
		}
		l.mu.Unlock()
		l.release() // granted meanwhile: pass the worker on
		return ctx.Err()
	}
}

// grantLocked gives a worker to a primary (r nil) or to copy r, which
// becomes active. l.mu is held.
func (l *Limiter) grantLocked(r *runner) {
	l.running++
	if r != nil {
		r.elem = l.active.PushBack(r)
	}
}

// preemptibleLocked returns the running Copy that started last and is
// not yet preempted, or nil. l.mu is held.
func (l *Limiter) preemptibleLocked() *runner {
	for e := l.active.Back(); e != nil; e = e.Prev() {
		if r := e.Value.(*runner); r.preemptible && !r.preempted {
			return r
		}
	}
	return nil
}

// preemptLocked preempts a running copy for each waiting primary that no
// copy already preempted will serve. l.mu is held.
func (l *Limiter) preemptLocked() {
	pending := 0
	for e := l.active.Front(); e != nil; e = e.Next() {
		if e.Value.(*runner).preempted {
			pending++
		}
	}
	for l.primaries.Len() > pending {
		r := l.preemptibleLocked()
		if r == nil {
			return
		}
		r.preempted = true
		r.cancel(ErrPreempted)
		l.c.preempted.Add(1)
		pending++
	}
}

// release frees a worker: the next primary, or else the next copy, gets
// it.
func (l *Limiter) release() {
	l.c.done.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	for _, q := range []*list.List{&l.primaries, &l.copies} {
		if e := q.Front(); e != nil && l.running < l.workers {
			w := q.Remove(e).(*waiter)
			w.granted = true
			l.grantLocked(w.r)
			close(w.ready)
			return
		}
	}
}

// Stats are a Limiter's counters since it was made, and its state now.
type Stats struct {
	// Primaries and Copies count the requests of each sort that ran
	// (a copy once, however many times it started).
	Primaries, Copies int64
	// Preempted counts copies that yielded their worker to a primary,
	// and Reruns the times a preempted copy started again.
	Preempted, Reruns int64
	// Refused counts requests refused with ErrQueueFull or ErrNoSpare,
	// Abandoned those whose context ended while they waited.
	Refused, Abandoned int64
	// Running is the requests holding a worker now; QueuedPrimaries and
	// QueuedCopies are those waiting. Unpreemptible is the copies that
	// hold a worker and cannot be preempted (at most
	// Config.MaxUnpreemptible).
	Running, QueuedPrimaries, QueuedCopies, Unpreemptible int
}

// Stats returns the Limiter's counters and state.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	s := Stats{Running: l.running, QueuedPrimaries: l.primaries.Len(), QueuedCopies: l.copies.Len(), Unpreemptible: l.once}
	l.mu.Unlock()
	s.Primaries, s.Copies = l.c.primaries.Load(), l.c.copies.Load()
	s.Preempted, s.Reruns = l.c.preempted.Load(), l.c.reruns.Load()
	s.Refused, s.Abandoned = l.c.refused.Load(), l.c.abandoned.Load()
	return s
}

// Load returns the Limiter's load now, as a server reports it with an
// answer (see hedge.Load): the requests holding a worker, those waiting
// (primaries and copies), its workers, and how many times a worker was
// released since it was made. Call it while the answered request still
// holds its worker, and take one from Running: the report is of the
// others.
func (l *Limiter) Load() hedge.Load {
	l.mu.Lock()
	ld := hedge.Load{Running: l.running, Queued: l.primaries.Len() + l.copies.Len(), Workers: l.workers}
	l.mu.Unlock()
	ld.Done = l.c.done.Load()
	return ld
}

// runnerKey is the context key of a running copy's *runner.
type runnerKey struct{}

// Commit reports whether the copy that Run runs with ctx may send its
// answer: from now on no primary preempts it. It returns false if a
// primary already did (ctx is then cancelled with ErrPreempted), or if
// copies that cannot be preempted already hold Config.MaxUnpreemptible
// workers (ctx is then cancelled with ErrNoSpare, and Run returns
// ErrNoSpare once fn has returned). It returns true for a primary, a
// CopyOnce, a copy that committed before, or a ctx that Run did not make.
// A copy commits only while no primary waits: one that did would have
// preempted it.
func Commit(ctx context.Context) bool {
	r, _ := ctx.Value(runnerKey{}).(*runner)
	if r == nil {
		return true
	}
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.preempted || r.noSpare:
		return false
	case !r.preemptible:
		return true
	case l.once >= l.maxOnce:
		r.noSpare = true
		r.cancel(ErrNoSpare)
		return false
	}
	r.preemptible = false
	r.once = true
	l.once++
	return true
}
