// Package tiedclient sends tied calls: the client side of package tied,
// which the client transports (hedgehttp, hedgegrpc) build on without
// importing the server side. Package tied documents every name here under
// its own (tied.Client is Client).
package tiedclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/decide"
	"github.com/tailcut/hedge/internal/wire"
)

// DefaultGap is the time between the two copies of a tied call when
// ClientConfig.Gap is zero: about two network round trips within a data
// centre. The gap lets the first copy, if its server is idle, claim the
// tie before the second is queued (the second server then drops it on
// arrival), so that the two copies' claims rarely cross; the servers run
// a call once either way.
const DefaultGap = time.Millisecond

// Form is how the two copies of a tied call share the work (see the
// package documentation, "Two forms").
type Form int

const (
	// FormSpare, the default: the first copy queues as an untied request
	// does and starts without claiming (wire.RolePrimary); the second
	// (wire.RoleSpare) runs only on a worker free when it arrives, claiming
	// the tie first, so that it takes the call only from a first copy
	// still queued, and is refused at once (ErrNoSpare) by a server with
	// no free worker. No copy waits in a queue it would lengthen, and no
	// primary waits for a claim.
	FormSpare Form = iota
	// FormSymmetric: both copies queue, and the first ready to start
	// claims the tie at the other's server (The Tail at Scale's tied
	// requests). Every copy that starts waits for a claim's round trip,
	// and both copies lengthen queues: near capacity it loses to sending
	// one copy (BENCHMARKS.md).
	FormSymmetric
)

// String returns the form's name: "spare" or "symmetric".
func (f Form) String() string {
	if f == FormSymmetric {
		return "symmetric"
	}
	return "spare"
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Replicas is the number of replicas, at least 2. Copies go to two
	// distinct ones.
	Replicas int
	// Picker chooses the two replicas of a call, the second never the
	// first's, by the copies of this Client in flight on each (two
	// choices by default; see hedge.Picker).
	Picker hedge.Picker
	// Gap is the time between the first copy and the second. Zero means
	// DefaultGap; a negative value sends both at once.
	Gap time.Duration
	// Form is how the copies share the work: FormSpare (the zero value)
	// or FormSymmetric.
	Form Form
}

// Client sends tied calls: two copies of each to two distinct replicas,
// the second Gap after the first, both carrying a tie (a fresh
// identifier, and each the address of the other's replica) so that the
// first server to start its copy has the other dropped. Transports build
// on it (hedgehttp.Config.Tied, hedgegrpc.WithTied); see Run. Make one
// with NewClient; it is safe for concurrent use.
type Client struct {
	n      int
	picker hedge.Picker
	gap    time.Duration
	form   Form
	load   []atomic.Int64
	loadFn func(int) int

	calls, seconds, drops, noSpare, secondWins, failures, notSent atomic.Int64
	sparesSkipped                                                 atomic.Int64

	// reports holds each replica's last load report (ReportLoad), nil
	// before the first; latency is the mean latency of recent calls, an
	// exponentially weighted average in nanoseconds, which says how long
	// a report stays fresh.
	reports []atomic.Pointer[report]
	latency atomic.Int64
}

// NewClient validates cfg and returns a Client. The error matches
// ErrInvalidConfig.
func NewClient(cfg ClientConfig) (*Client, error) {
	var errs []error
	if cfg.Replicas < 2 {
		errs = append(errs, fmt.Errorf("ClientConfig.Replicas is %d: a tied call needs two replicas; list at least two", cfg.Replicas))
	}
	if cfg.Form != FormSpare && cfg.Form != FormSymmetric {
		errs = append(errs, fmt.Errorf("ClientConfig.Form is %d: use tied.FormSpare (the zero value) or tied.FormSymmetric", cfg.Form))
	}
	if cfg.Picker.Zones != nil && len(cfg.Picker.Zones) != cfg.Replicas {
		errs = append(errs, fmt.Errorf("ClientConfig.Picker.Zones has %d entries for %d replicas: give one zone per replica", len(cfg.Picker.Zones), cfg.Replicas))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", wire.ErrTiedInvalidConfig, errors.Join(errs...))
	}
	c := &Client{n: cfg.Replicas, picker: cfg.Picker, gap: cfg.Gap, form: cfg.Form, load: make([]atomic.Int64, cfg.Replicas), reports: make([]atomic.Pointer[report], cfg.Replicas)}
	if c.gap == 0 {
		c.gap = DefaultGap
	}
	c.gap = max(c.gap, 0)
	c.loadFn = func(i int) int { return int(c.load[i].Load()) }
	return c, nil
}

// Gap returns the time between a call's two copies.
func (c *Client) Gap() time.Duration { return c.gap }

// Form returns how a call's copies share the work.
func (c *Client) Form() Form { return c.form }

// report is a replica's load as its server last reported it.
type report struct {
	ld hedge.Load
	at time.Time
}

// ReportLoad records the load that replica's server reported with an
// answer (hedge.Load: requests running and queued there, besides the one
// answered, and its workers), as hedgehttp and hedgegrpc do for every
// answer that carries a report. In FormSpare a spare copy is not sent
// when fresh reports say it cannot help: its replica has no free worker
// (the spare would be refused), or the primary's replica had one (the
// primary has started). A report is fresh for the mean latency of recent
// calls (at least Gap): about the time in which the load it tells of
// turns over. Without fresh reports the spare is sent (ClientStats.
// SparesSkipped counts those not sent). Reports without Workers, or with
// a negative count, are ignored; replica out of range is ignored. Counts
// too large to add read as a replica with no free worker.
func (c *Client) ReportLoad(replica int, ld hedge.Load) {
	if replica < 0 || replica >= c.n || ld.Workers <= 0 || ld.Running < 0 || ld.Queued < 0 {
		return
	}
	c.reports[replica].Store(&report{ld: ld, at: time.Now()})
}

// freeWorker reports whether replica's last report is fresh at now, and
// whether it told of a free worker.
func (c *Client) freeWorker(replica int, now time.Time) (free, fresh bool) {
	r := c.reports[replica].Load()
	if r == nil {
		return false, false
	}
	horizon := max(time.Duration(c.latency.Load()), c.gap)
	if now.Sub(r.at) > horizon {
		return false, false
	}
	// Running + Queued < Workers, without the sum, which huge counts
	// would wrap round to a negative number: a free worker.
	return r.ld.Running < r.ld.Workers && r.ld.Queued < r.ld.Workers-r.ld.Running, true
}

// spareUseless reports whether fresh reports say that a spare copy to
// spare, for a primary on primary, cannot run in the primary's place.
func (c *Client) spareUseless(primary, spare int) bool {
	now := time.Now()
	if free, fresh := c.freeWorker(spare, now); fresh && !free {
		return true // it would be refused
	}
	free, fresh := c.freeWorker(primary, now)
	return fresh && free // the primary found a worker
}

// observe folds a call's latency into the mean that sizes freshness.
func (c *Client) observe(d time.Duration) {
	for {
		old := c.latency.Load()
		nw := int64(d)
		if old != 0 {
			nw = old + (int64(d)-old)/16
		}
		if c.latency.CompareAndSwap(old, nw) {
			return
		}
	}
}

// Copy tells an attempt function which copy of a tied call it sends.
type Copy struct {
	// Index is 0 for the first copy, 1 for the second.
	Index int
	// Replica is where this copy goes; Sibling where the other goes
	// (or would go). They differ.
	Replica, Sibling int
	// ID is the tie identifier, shared by both copies (NewID).
	ID string
	// Role is the copy's part, sent in RoleHeader (RoleKey): wire.RolePrimary
	// or wire.RoleSpare in FormSpare, wire.RoleEither (no header) in
	// FormSymmetric.
	Role wire.Role
}

// ClientStats are a Client's counters; they only grow.
type ClientStats struct {
	// Calls counts tied calls.
	Calls int64
	// Seconds counts second copies sent: a call whose first copy
	// answers within the gap sends none.
	Seconds int64
	// Dropped counts copies answered "dropped by the sibling"
	// (ErrDropped): the other copy had started.
	Dropped int64
	// NoSpare counts spare copies answered "no spare capacity"
	// (ErrNoSpare): no worker was free at their server when they came.
	NoSpare int64
	// SecondWins counts calls won by the second copy.
	SecondWins int64
	// Failures counts calls that returned an error.
	Failures int64
	// SparesSkipped counts spare copies not sent because fresh load
	// reports said they could not help (see Client.ReportLoad).
	SparesSkipped int64
	// NotSent counts copies that failed before their request reached a
	// server (errors matching ErrNotSent, such as a refused connection):
	// they end no call and keep no twin from being sent.
	NotSent int64
}

// Stats returns a snapshot of the Client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Calls: c.calls.Load(), Seconds: c.seconds.Load(), Dropped: c.drops.Load(), NoSpare: c.noSpare.Load(), SparesSkipped: c.sparesSkipped.Load(), SecondWins: c.secondWins.Load(), Failures: c.failures.Load(), NotSent: c.notSent.Load()}
}

type result[T any] struct {
	i     int
	v     T
	err   error
	panic any
}

// Run sends a tied call through c: copy 0 at once, copy 1 Gap later
// (unless copy 0 has answered by then), each by attempt on its own
// goroutine with its own context, derived from ctx. attempt must send the
// copy to Copy.Replica with the tie (Copy.ID, the address of
// Copy.Sibling and Copy.Role), and return an error matching ErrDropped
// when the server answered that it dropped the copy for its sibling, and
// ErrNoSpare (which matches ErrDropped too) when it refused a spare copy
// for want of a free worker (DroppedError reads both from an HTTP
// answer).
//
// In FormSpare copy 0 is the primary and copy 1 the spare, which is not
// sent when fresh load reports say it cannot help (see ReportLoad). A
// spare refused is no failure: the primary has the call. When the primary
// never reached its server (ErrNotSent), copy 1 goes as a primary
// instead, or, if it went as a spare and was refused, goes again as a
// primary, so that the call is not left to nobody.
//
// The first copy to succeed wins: the other's context is cancelled, Run
// waits for it to return, and passes its value, if it succeeded too, to
// discard (which may be nil). A dropped copy is no failure: Run waits for
// the other. Nor is a copy whose error matches ErrNotSent (it never
// reached a server, so no server can have claimed its tie or run it): if
// copy 1 has not left yet, it is sent at once, and the call is the other
// copy's, so that one replica down does not fail the calls that pick it.
// A copy that fails otherwise ends the call with its error if the other
// copy was not sent or failed too; such a failure of copy 0 before the
// gap does not send copy 1 (a tied call is no retry: copy 0's server may
// have claimed the tie already, so that copy 1 would be dropped). If both
// copies were dropped, which correct servers never do, the error wraps
// ErrDropped. If ctx ends first, Run cancels both copies, waits for them
// and returns ctx's error.
//
// The winner's context stays alive until release is called (an HTTP
// body must be read within it); release must be called once, also after
// an error. A panic in attempt is re-raised on the caller's goroutine
// after the other copy returned.
func Run[T any](ctx context.Context, c *Client, attempt func(ctx context.Context, cp Copy) (T, error), discard func(T)) (v T, release func(), err error) {
	c.calls.Add(1)
	id := wire.NewTieID()
	pk := (*decide.Picker)(&c.picker)
	r0 := pk.Pick(c.n, nil, c.loadFn, rand.Uint64())
	held := [1]int{r0}
	r1 := pk.Pick(c.n, held[:], c.loadFn, rand.Uint64())

	results := make(chan result[T], 2)
	var cancels [2]context.CancelFunc
	var wg sync.WaitGroup
	launch := func(i int, role wire.Role) {
		rep, sib := r0, r1
		if i == 1 {
			rep, sib = r1, r0
		}
		if cancels[i] != nil { // copy 1 sent again as a primary
			cancels[i]()
		}
		cctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		c.load[rep].Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := result[T]{i: i}
			defer func() {
				c.load[rep].Add(-1)
				if p := recover(); p != nil {
					res.panic = p
				}
				results <- res
			}()
			res.v, res.err = attempt(cctx, Copy{Index: i, Replica: rep, Sibling: sib, ID: id, Role: role})
		}()
	}
	// The roles of the spare form; the symmetric form's are wire.RoleEither.
	first, second := wire.RoleEither, wire.RoleEither
	if c.form == FormSpare {
		first, second = wire.RolePrimary, wire.RoleSpare
	}
	// primaryGone: copy 0 is out of the call without having run (it
	// never reached its server, or was dropped). Copy 1 then goes, or
	// goes again, as a primary: a spare would leave the call to nobody
	// when no worker is free.
	primaryGone, spareRefused, again := false, false, false
	launch(0, first)
	sent, pending := 1, 1
	sendSecond := func() {
		role := second
		if primaryGone && c.form == FormSpare {
			role = wire.RolePrimary
		}
		c.seconds.Add(1)
		launch(1, role)
		sent, pending = 2, pending+1
	}
	// trySecond sends copy 1 when its time comes, unless it would be a
	// spare that fresh reports say cannot help.
	trySecond := func() {
		if second == wire.RoleSpare && !primaryGone && c.spareUseless(r0, r1) {
			c.sparesSkipped.Add(1)
			return
		}
		sendSecond()
	}
	start := time.Now()
	var timer <-chan time.Time
	if c.gap == 0 {
		trySecond()
	} else {
		t := time.NewTimer(c.gap)
		defer t.Stop()
		timer = t.C
	}

	winner := -1
	var firstPanic any
	var errs []error
	dropped := 0
loop:
	for pending > 0 {
		select {
		case <-timer:
			timer = nil
			if winner < 0 && sent == 1 {
				trySecond()
			}
		case <-ctx.Done():
			break loop
		case res := <-results:
			pending--
			switch {
			case res.panic != nil:
				if firstPanic == nil {
					firstPanic = res.panic
				}
				break loop
			case res.err == nil:
				winner, v = res.i, res.v
				break loop
			case errors.Is(res.err, wire.ErrTiedDropped), errors.Is(res.err, hedge.ErrNotSent):
				switch {
				case errors.Is(res.err, wire.ErrTiedNoSpare):
					c.noSpare.Add(1)
					dropped++
				case errors.Is(res.err, wire.ErrTiedDropped):
					c.drops.Add(1)
					dropped++
				default:
					c.notSent.Add(1)
					errs = append(errs, fmt.Errorf("tied copy %d: %w", res.i, res.err))
				}
				if res.i == 0 {
					primaryGone = true
				} else if errors.Is(res.err, wire.ErrTiedNoSpare) {
					spareRefused = true
				}
				switch {
				case sent == 1:
					// Copy 0 dropped, or never sent, before copy 1
					// left: send it now.
					timer = nil
					sendSecond()
				case primaryGone && spareRefused && !again:
					// The spare found no free worker, and the
					// primary never ran: the call is copy 1's, queued
					// as a primary.
					again = true
					launch(1, wire.RolePrimary)
					pending++
				}
			default:
				errs = append(errs, fmt.Errorf("tied copy %d: %w", res.i, res.err))
				if sent == 1 {
					timer = nil // no second copy after a failure
				}
			}
		}
	}
	// Cancel every copy but the winner, and reap them.
	for i := range sent {
		if i != winner {
			cancels[i]()
		}
	}
	for pending > 0 {
		res := <-results
		pending--
		switch {
		case res.panic != nil && firstPanic == nil:
			firstPanic = res.panic
		case res.err == nil && res.panic == nil && discard != nil:
			discard(res.v)
		}
	}
	wg.Wait()
	release = func() {
		for i := range sent {
			cancels[i]()
		}
	}
	if firstPanic != nil {
		release()
		if winner >= 0 && discard != nil {
			discard(v)
		}
		panic(firstPanic)
	}
	if winner >= 0 {
		if winner == 1 {
			c.secondWins.Add(1)
		}
		c.observe(time.Since(start))
		return v, release, nil
	}
	c.failures.Add(1)
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, release, err
	}
	if len(errs) == 0 && dropped > 0 {
		return zero, release, fmt.Errorf("%w: both copies of tie %s were dropped; the servers disagree on which started", wire.ErrTiedDropped, id)
	}
	return zero, release, errors.Join(errs...)
}
