package dedup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultLease is how long a claim holds when its holder neither
	// completes nor releases it (it crashed, or is stalled).
	DefaultLease = 10 * time.Second
	// DefaultTTL is how long an outcome is kept for replays.
	DefaultTTL = 24 * time.Hour
	// DefaultPollInterval is the longest pause between two reads of the
	// store while a copy waits for another copy's outcome.
	DefaultPollInterval = 50 * time.Millisecond
)

// firstPoll is the first pause of a waiting copy; the pause doubles up to
// Options.PollInterval.
const firstPoll = time.Millisecond

// maxClaimRounds bounds how often Acquire goes back to claiming after a
// record vanished under it (lease ended, released) before giving up with
// ErrInProgress: a bound for a pathological store, not a timing guess.
const maxClaimRounds = 1000

// InProgress says what a copy does that finds its key claimed by another
// copy that is still running.
type InProgress int

const (
	// WaitInProgress, the default, makes the copy wait for the running
	// copy's outcome (bounded by its own context) and replay it. Hedged
	// writes need this: a hedge copy arrives while the first copy runs,
	// and its client takes whichever answer comes first, so a hedge
	// answered 409 at once would win the race with a refusal; waiting, it
	// brings the first copy's outcome (or runs the write itself if the
	// first copy's holder crashes and its lease ends).
	WaitInProgress InProgress = iota
	// RefuseInProgress refuses the copy at once with ErrInProgress (HTTP:
	// 409 Conflict with Retry-After; gRPC: Aborted), as the IETF draft on
	// the Idempotency-Key header describes. It suits clients that retry
	// on their own schedule rather than hedge, and would rather be told
	// than hold a connection while the first copy runs.
	RefuseInProgress
)

// Options configures a Coordinator. The zero value uses the defaults.
type Options struct {
	// Lease is how long a claim holds without being completed or
	// released. It must exceed the longest time the operation may take:
	// once it ends, another copy may claim the key and run the
	// operation too (unless the operation's write is fenced by the
	// claim, as the stores' Commit helpers do). Zero means DefaultLease.
	Lease time.Duration
	// TTL is how long an outcome is kept: a copy or retry that arrives
	// later runs again. Zero means DefaultTTL.
	TTL time.Duration
	// PollInterval is the longest pause between reads of the store while
	// waiting for another copy's outcome. Copies in the same process are
	// woken at once; copies in other processes are seen at the next
	// read. Zero means DefaultPollInterval.
	PollInterval time.Duration
	// InProgress says what a copy does that finds its key held by a
	// running copy: wait for its outcome (WaitInProgress, the default)
	// or be refused at once (RefuseInProgress).
	InProgress InProgress
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Lease < 0 || o.TTL < 0 || o.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("dedup: Lease (%v), TTL (%v) and PollInterval (%v) must not be negative; zero means the default", o.Lease, o.TTL, o.PollInterval))
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.InProgress != WaitInProgress && o.InProgress != RefuseInProgress {
		errs = append(errs, fmt.Errorf("dedup: InProgress is %d: use WaitInProgress or RefuseInProgress", o.InProgress))
	}
	if o.TTL < o.Lease {
		errs = append(errs, fmt.Errorf("dedup: TTL (%v) is shorter than Lease (%v): an outcome must be kept at least as long as a claim", o.TTL, o.Lease))
	}
	return o, errors.Join(errs...)
}

// Coordinator is the transport-neutral core of deduplication, used by the
// HTTP middleware (New) and the gRPC interceptor (package dedupgrpc):
// Acquire claims a key or waits for the outcome of the copy that holds it;
// Complete and Release end a claim and wake the copies of this process
// that wait for it. It is safe for concurrent use.
type Coordinator struct {
	store Store
	opt   Options

	mu      sync.Mutex
	waiters map[string]*waitList
}

// waitList is the wake-up channel of the copies waiting for one key.
type waitList struct {
	ch chan struct{}
	n  int
}

// NewCoordinator returns a Coordinator over store. The error says what is
// wrong with o.
func NewCoordinator(store Store, o Options) (*Coordinator, error) {
	if store == nil {
		return nil, errors.New("dedup: the Store is nil: pass one, such as NewMemoryStore(MemoryOptions{})")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Coordinator{store: store, opt: o, waiters: map[string]*waitList{}}, nil
}

// Store returns the coordinator's store.
func (c *Coordinator) Store() Store { return c.store }

// Options returns the options in force, defaults filled in.
func (c *Coordinator) Options() Options { return c.opt }

// Acquire claims key for a request with fingerprint fp. It returns:
//
//   - a Claim with Won set: the caller runs the operation and then must
//     call Complete or Release;
//   - a Claim with Existing.Done set: the operation already ran; the
//     caller replays Existing.Outcome;
//   - an error matching ErrFingerprintMismatch: the key belongs to
//     another request;
//   - an error matching ErrStoreUnavailable: the store failed, and the
//     caller must not run the operation (fail closed);
//   - an error matching ErrInProgress (and the context's error): another
//     copy holds the claim, and ctx ended before its outcome arrived.
//
// While another copy holds the claim, Acquire waits: it is woken at once
// when the holder is in this process, and reads the store with pauses
// growing to Options.PollInterval otherwise. If the holder's lease ends
// (it crashed or stalled) or it releases the claim, Acquire claims the key
// itself. With Options.InProgress set to RefuseInProgress it does not
// wait, and returns an error matching ErrInProgress at once.
func (c *Coordinator) Acquire(ctx context.Context, key string, fp Fingerprint) (Claim, error) {
	return c.acquire(ctx, key, fp, c.opt.InProgress == WaitInProgress)
}

// acquire is Acquire; wait says whether a copy that finds the key held
// waits for the holder's outcome, or is refused at once with
// ErrInProgress.
func (c *Coordinator) acquire(ctx context.Context, key string, fp Fingerprint, wait bool) (Claim, error) {
	for range maxClaimRounds {
		if err := ctx.Err(); err != nil {
			return Claim{}, fmt.Errorf("%w: %w", ErrInProgress, err)
		}
		sctx, cancel := storeContext(ctx)
		cl, err := c.store.Claim(sctx, key, fp, c.opt.Lease)
		cancel()
		if err != nil {
			return Claim{}, c.storeError(ctx, "claiming", err)
		}
		if cl.Won {
			if err := ctx.Err(); err != nil {
				// The caller left while the claim was made: give it
				// back at once rather than hold the key for a lease.
				_ = c.Release(ctx, cl)
				return Claim{}, fmt.Errorf("%w: %w", ErrInProgress, err)
			}
			return cl, nil
		}
		rec := cl.Existing
		if rec.Fingerprint != fp {
			return Claim{}, fmt.Errorf("%w (key %q)", ErrFingerprintMismatch, key)
		}
		if rec.Done {
			return cl, nil
		}
		if !wait {
			return Claim{}, fmt.Errorf("%w (key %q)", ErrInProgress, key)
		}
		rec, err = c.wait(ctx, key, fp)
		if errors.Is(err, ErrNotFound) {
			continue // the claim ended without an outcome: claim it
		}
		if err != nil {
			return Claim{}, err
		}
		return Claim{Key: key, Fingerprint: fp, Existing: rec}, nil
	}
	return Claim{}, fmt.Errorf("%w: the key %q was claimed and given up %d times", ErrInProgress, key, maxClaimRounds)
}

// StoreTimeout bounds each call the Coordinator makes to its Store. The
// calls do not end when the request's context is cancelled (a hedge that
// lost, a client that left): a claim cancelled half way might be made in
// the store without the caller knowing, and hold the key for a lease, and
// a database connection interrupted mid-query is closed by its driver.
// The caller's context is checked between calls instead.
const StoreTimeout = 10 * time.Second

// storeContext returns the context of one store call: ctx's values, not
// its cancellation, and StoreTimeout.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
}

// storeError wraps a store failure; a context that ended is reported as
// such, since the store is not at fault then.
func (c *Coordinator) storeError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%w: %w", ErrInProgress, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrStoreUnavailable, what, err)
}

// wait waits until key's record is done (returned), gone (ErrNotFound),
// or claimed for another fingerprint, or ctx ends.
func (c *Coordinator) wait(ctx context.Context, key string, fp Fingerprint) (Record, error) {
	pause := firstPoll
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		// Subscribe before reading, so that an outcome stored in this
		// process after the read wakes us at once.
		wake := c.subscribe(key)
		sctx, cancel := storeContext(ctx)
		rec, err := c.store.Get(sctx, key)
		cancel()
		switch {
		case errors.Is(err, ErrNotFound):
			c.unsubscribe(key, wake)
			return Record{}, err
		case err != nil:
			c.unsubscribe(key, wake)
			return Record{}, c.storeError(ctx, "reading", err)
		case rec.Fingerprint != fp:
			c.unsubscribe(key, wake)
			return Record{}, fmt.Errorf("%w (key %q)", ErrFingerprintMismatch, key)
		case rec.Done:
			c.unsubscribe(key, wake)
			return rec, nil
		}
		if t == nil {
			t = time.NewTimer(pause)
		} else {
			t.Reset(pause)
		}
		select {
		case <-ctx.Done():
			c.unsubscribe(key, wake)
			return Record{}, fmt.Errorf("%w: %w", ErrInProgress, ctx.Err())
		case <-wake.ch:
		case <-t.C:
			pause = min(2*pause, c.opt.PollInterval)
		}
		c.unsubscribe(key, wake)
	}
}

func (c *Coordinator) subscribe(key string) *waitList {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waiters[key]
	if w == nil {
		w = &waitList{ch: make(chan struct{})}
		c.waiters[key] = w
	}
	w.n++
	return w
}

func (c *Coordinator) unsubscribe(key string, w *waitList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.n--
	if w.n == 0 && c.waiters[key] == w {
		delete(c.waiters, key)
	}
}

// notify wakes the copies of this process waiting for key.
func (c *Coordinator) notify(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.waiters[key]; w != nil {
		close(w.ch)
		delete(c.waiters, key)
	}
}

// Complete stores out as the outcome of the claim and wakes the copies
// waiting for it. An error matches ErrLostClaim if the claim no longer
// held the key, or ErrStoreUnavailable if the store failed.
func (c *Coordinator) Complete(ctx context.Context, cl Claim, out Outcome) error {
	defer c.notify(cl.Key)
	sctx, cancel := storeContext(ctx)
	defer cancel()
	err := c.store.Complete(sctx, cl, out, c.opt.TTL)
	if err == nil || errors.Is(err, ErrLostClaim) {
		return err
	}
	return fmt.Errorf("%w: storing the outcome: %w", ErrStoreUnavailable, err)
}

// Release gives the claim up without an outcome, so that a later copy
// runs the operation, and wakes the copies waiting for it. An error
// matches ErrStoreUnavailable; the claim then ends with its lease.
func (c *Coordinator) Release(ctx context.Context, cl Claim) error {
	defer c.notify(cl.Key)
	sctx, cancel := storeContext(ctx)
	defer cancel()
	if err := c.store.Release(sctx, cl); err != nil {
		return fmt.Errorf("%w: releasing the claim: %w", ErrStoreUnavailable, err)
	}
	return nil
}

// Renew makes the claim hold for another Options.Lease from now. An error
// matches ErrLostClaim if the claim no longer holds the key, or
// ErrStoreUnavailable if the store failed.
func (c *Coordinator) Renew(ctx context.Context, cl Claim) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(StoreTimeout, c.opt.Lease))
	defer cancel()
	err := c.store.Renew(sctx, cl, c.opt.Lease)
	if err == nil || errors.Is(err, ErrLostClaim) {
		return err
	}
	return fmt.Errorf("%w: renewing the claim: %w", ErrStoreUnavailable, err)
}

// KeepAlive renews the claim every third of Options.Lease until stop is
// called, so that an operation that runs longer than the lease keeps its
// claim while its process is alive and reaches the store; the lease then
// ends only when the holder crashes, stalls or is cut off from the store.
// A renewal that fails is tried again at the next tick; renewing ends
// when the claim is lost. stop returns once the renewing goroutine has
// exited; it must be called, and may be called more than once.
func (c *Coordinator) KeepAlive(ctx context.Context, cl Claim) (stop func()) {
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(max(c.opt.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if err := c.Renew(ctx, cl); errors.Is(err, ErrLostClaim) {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-exited
	}
}

// Settle stores out, the outcome of the operation that ran under cl, and
// returns the outcome the key has now: out itself, or, when cl was lost
// while the operation ran (its lease ended and another copy took over),
// the outcome that copy stored, with replayed set. It never runs the
// operation again: when cl was lost and the key is free, out is stored
// under a new claim, since the operation did run; when another copy holds
// the key, Settle waits for its outcome, for up to a lease. An error
// matches ErrStoreUnavailable (the store failed), ErrFingerprintMismatch
// (another request took the key over) or ErrInProgress (the other copy
// did not finish within a lease); the caller then answers with out, which
// is not stored.
func (c *Coordinator) Settle(ctx context.Context, cl Claim, out Outcome) (final Outcome, replayed bool, err error) {
	err = c.Complete(ctx, cl, out)
	if !errors.Is(err, ErrLostClaim) {
		return out, false, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opt.Lease+StoreTimeout)
	defer cancel()
	for range maxClaimRounds {
		next, err := c.acquire(wctx, cl.Key, cl.Fingerprint, true)
		if err != nil {
			return out, false, err
		}
		if !next.Won {
			return next.Existing.Outcome, true, nil
		}
		if err := c.Complete(wctx, next, out); !errors.Is(err, ErrLostClaim) {
			return out, false, err
		}
	}
	return out, false, fmt.Errorf("%w: the key %q was lost %d times while storing its outcome", ErrInProgress, cl.Key, maxClaimRounds)
}

// Yield gives the claim up after an operation whose outcome is not kept
// (a refusal, a failure), and returns the outcome the key has when the
// claim turns out to have been lost while the operation ran: the
// operation's failure may be that loss itself (a store's Commit returned
// ErrLostClaim), and the copy that took over has, or soon will have, the
// committed outcome. If another copy holds the key with the same
// fingerprint, Yield waits for its outcome, for up to a lease, and
// returns it with replayed set; otherwise (the key is free: the claim
// held and is released) replayed is false and the caller answers with
// its own response.
func (c *Coordinator) Yield(ctx context.Context, cl Claim) (final Outcome, replayed bool) {
	if err := c.Release(ctx, cl); err != nil {
		return Outcome{}, false
	}
	sctx, cancel := storeContext(ctx)
	rec, err := c.store.Get(sctx, cl.Key)
	cancel()
	if err != nil || rec.Token == cl.Token || rec.Fingerprint != cl.Fingerprint {
		return Outcome{}, false
	}
	if !rec.Done {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opt.Lease+StoreTimeout)
		defer cancel()
		if rec, err = c.wait(wctx, cl.Key, cl.Fingerprint); err != nil {
			return Outcome{}, false
		}
	}
	return rec.Outcome, true
}

// claimCtxKey is the context key of the claim a handler runs under.
type claimCtxKey struct{}

// WithClaim returns a context carrying the claim, for the operation run
// under it. The HTTP middleware and the gRPC interceptor call it.
func WithClaim(ctx context.Context, cl Claim) context.Context {
	return context.WithValue(ctx, claimCtxKey{}, cl)
}

// ClaimFromContext returns the claim the operation runs under, when the
// request came through the middleware with an idempotency key. A handler
// passes it to a store's Commit helper to make its own write and the
// outcome commit together, fenced by the claim.
func ClaimFromContext(ctx context.Context) (Claim, bool) {
	cl, ok := ctx.Value(claimCtxKey{}).(Claim)
	return cl, ok
}
