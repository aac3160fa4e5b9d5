package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
)

// Fallback is what a pod runs once it has been without its store for
// [Options.LostAfter].
type Fallback int

const (
	// FallbackOff turns every Hedger off: nothing hedges while no one
	// can steer it.
	FallbackOff Fallback = iota
	// FallbackCode runs each Hedger's [hedge.Config], as before any
	// document.
	FallbackCode
)

// String returns "off" or "code".
func (f Fallback) String() string {
	switch f {
	case FallbackOff:
		return "off"
	case FallbackCode:
		return "code"
	}
	return fmt.Sprintf("Fallback(%d)", int(f))
}

// Reason says why a [Watcher] did not apply a document: the "reason" of
// [Stats.Refused], of [EventRefused] and of the metrics.
type Reason string

// The reasons a document is not applied. The last good one stays in
// force in every case.
const (
	// ReasonInvalid: the document has a mistake ([Parse]).
	ReasonInvalid Reason = "invalid"
	// ReasonTooLarge: the document is over [MaxDocument] bytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonService: the document is for another service.
	ReasonService Reason = "service"
	// ReasonStale: the document's version is not above the one applied
	// (or waiting for its jitter), or the store's revision is below the
	// applied one's.
	ReasonStale Reason = "stale"
	// ReasonNotLive: a Hedger cannot change a setting while it runs
	// ([hedge.ErrNotLive]).
	ReasonNotLive Reason = "not_live"
)

// Reasons lists every [Reason], in a fixed order, for exporters that
// report each with its count.
func Reasons() []Reason {
	return []Reason{ReasonInvalid, ReasonTooLarge, ReasonService, ReasonStale, ReasonNotLive}
}

// The states of [PodStatus.State].
const (
	// StateCode: no document applied yet, or the document was deleted:
	// the Hedgers run their [hedge.Config].
	StateCode = "code"
	// StateApplied: the document of [PodStatus.Version] is in force.
	StateApplied = "applied"
	// StateStale: the store is lost; the last good document stays.
	StateStale = "stale"
	// StateFallback: the store was lost for [Options.LostAfter]; the
	// pod runs [Options.Fallback].
	StateFallback = "fallback"
)

// States lists every state of [PodStatus.State], for exporters.
func States() []string { return []string{StateCode, StateApplied, StateStale, StateFallback} }

// Options configures a [Watcher]. Source and Hedgers are required; every
// other zero field has the default its doc states.
type Options struct {
	// Service is the service whose policy the pod follows: a document
	// for another is refused. Required.
	Service string
	// Instance names the pod, for the sticky rollout and its status.
	// Empty means the host name (a Kubernetes pod's name).
	Instance string
	// Source watches the store. Required.
	Source Source
	// Hedgers are the pod's Hedgers, by the names the document uses.
	// A name the document does not mention takes the rules of "*".
	Hedgers map[string]*hedge.Hedger
	// Jitter bounds the random delay before a change is applied, so that
	// a bad push does not reach every pod in the same millisecond. A kill
	// switch waits too, within the same bound. Zero applies at once.
	Jitter time.Duration
	// LostAfter is how long a pod keeps the last good document once its
	// store is lost before it falls back to Fallback. Zero means never:
	// the last good document stays until the store is back. A pod that
	// never applied a document runs its Config, and does not fall back.
	LostAfter time.Duration
	// Fallback is what the pod runs after LostAfter: FallbackOff (the
	// zero value) or FallbackCode.
	Fallback Fallback
	// Announcer, if set, publishes the pod's status after each change.
	Announcer Announcer
	// OnEvent, if set, is told of each thing the Watcher does, on the
	// Watcher's goroutine: it must return quickly.
	OnEvent func(Event)
	// Logger receives a line for each event. Nil means slog.Default().
	Logger *slog.Logger
	// Now reads the clock, for tests. Nil means time.Now.
	Now func() time.Time
}

// EventKind is what happened: see [Event].
type EventKind int

const (
	// EventApplied: a document was applied (Version, Revision).
	EventApplied EventKind = iota + 1
	// EventRefused: a document was not applied (Reason, Err). The last
	// good one stays.
	EventRefused
	// EventStoreLost: the source reported an error (Err). The last good
	// document stays.
	EventStoreLost
	// EventStoreBack: the source reported a document again.
	EventStoreBack
	// EventFallback: the store was lost for [Options.LostAfter]; the pod
	// runs [Options.Fallback].
	EventFallback
	// EventKillEnded: the kill switch expired; the rest of the document
	// applies.
	EventKillEnded
	// EventDeleted: the document was deleted from the store; the pod runs
	// its Hedgers' [hedge.Config].
	EventDeleted
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventApplied:
		return "applied"
	case EventRefused:
		return "refused"
	case EventStoreLost:
		return "store_lost"
	case EventStoreBack:
		return "store_back"
	case EventFallback:
		return "fallback"
	case EventKillEnded:
		return "kill_ended"
	case EventDeleted:
		return "deleted"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one thing a [Watcher] did.
type Event struct {
	Kind EventKind
	// Version and Revision are the document's, where there is one.
	Version, Revision int64
	// Reason says why a document was refused (EventRefused).
	Reason Reason
	// Err is the document's or the store's error, if any.
	Err error
	// At is when it happened.
	At time.Time
}

// Stats counts what a [Watcher] did.
type Stats struct {
	// Applied counts documents applied, kill switches' ends included.
	Applied int64
	// Refused counts documents not applied, by [Reason].
	Refused map[Reason]int64
	// StoreErrors counts the errors the source reported.
	StoreErrors int64
	// Fallbacks counts the times the pod fell back after LostAfter.
	Fallbacks int64
}

// Watcher applies a service's policy document, as its [Source] reports
// it, to a pod's running Hedgers. Make one with [NewWatcher] and call Run
// once. Status and Stats are safe to call from any goroutine, while Run
// runs and after.
type Watcher struct {
	opt  Options
	log  *slog.Logger
	now  func() time.Time
	rand *rand.Rand // jitter draws; guarded by the Run goroutine

	running atomic.Bool // Run was called

	mu     sync.Mutex
	status PodStatus
	stats  Stats

	// State of the Run goroutine.
	applied    *Policy // the document in force, nil for none
	appliedSum [sha256.Size]byte
	pending    *Policy // waiting for its jitter; nil for none
	pendingSum [sha256.Size]byte
	pendingRev int64
	pendingDel bool // a deletion waits for its jitter
	lost       bool // the source's last report was an error
	announce   chan PodStatus
}

// ErrInvalidOptions is matched by the error [NewWatcher] returns for
// mistaken [Options].
var ErrInvalidOptions = errors.New("fleet: invalid Options")

// NewWatcher checks opt and returns a [Watcher]. The error lists every
// mistake and matches [ErrInvalidOptions]. Nothing runs before Run.
func NewWatcher(opt Options) (*Watcher, error) {
	var errs []error
	if opt.Service == "" {
		errs = append(errs, errors.New("Options.Service is empty: name the service whose policy this pod follows"))
	}
	if opt.Source == nil {
		errs = append(errs, errors.New("Options.Source is nil: use fleet.NewFile, or a store's source (fleetetcd, fleetfeature)"))
	}
	if len(opt.Hedgers) == 0 {
		errs = append(errs, errors.New("Options.Hedgers is empty: give the pod's Hedgers by the names the document uses"))
	}
	for name, h := range opt.Hedgers {
		if h == nil {
			errs = append(errs, fmt.Errorf("Options.Hedgers[%q] is nil: give a Hedger made by hedge.New", name))
		}
		if name == All {
			errs = append(errs, fmt.Errorf("Options.Hedgers has a Hedger named %q, which the document uses for every Hedger: give it a name of its own", All))
		}
	}
	if opt.Jitter < 0 || opt.LostAfter < 0 {
		errs = append(errs, fmt.Errorf("Options.Jitter = %v, LostAfter = %v: use 0 or more", opt.Jitter, opt.LostAfter))
	}
	if opt.Fallback != FallbackOff && opt.Fallback != FallbackCode {
		errs = append(errs, fmt.Errorf("Options.Fallback = %d: use FallbackOff or FallbackCode", int(opt.Fallback)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if opt.Instance == "" {
		opt.Instance, _ = os.Hostname()
	}
	opt.Hedgers = maps.Clone(opt.Hedgers)
	w := &Watcher{opt: opt, log: opt.Logger, now: opt.Now, rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.now == nil {
		w.now = time.Now
	}
	w.status = PodStatus{Service: opt.Service, Instance: opt.Instance, State: StateCode, Source: opt.Source.String()}
	w.stats.Refused = map[Reason]int64{}
	return w, nil
}

// Status returns what the pod runs now.
func (w *Watcher) Status() PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Stats returns what the [Watcher] did so far.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Refused = maps.Clone(w.stats.Refused)
	return s
}

// Run watches the source and applies what it reports until ctx ends, then
// returns ctx's error; or returns the source's error when it cannot go on
// at all. Until a document is applied, the Hedgers run their
// [hedge.Config]. Call it once.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("fleet: Watcher.Run called twice: run one Watcher once, and cancel its context to stop it")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reports := make(chan Report)
	watchErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		watchErr <- w.opt.Source.Watch(ctx, func(r Report) {
			select {
			case reports <- r:
			case <-ctx.Done():
			}
		})
	})
	if w.opt.Announcer != nil {
		w.announce = make(chan PodStatus, 1)
		wg.Go(func() { w.announcer(ctx) })
		w.publish()
	}
	defer wg.Wait()
	w.log.Info("fleet: running the Config in code until a policy document is applied", "service", w.opt.Service, "instance", w.opt.Instance, "source", w.opt.Source.String())

	var jitter, kill, lost timer
	defer jitter.stop()
	defer kill.stop()
	defer lost.stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-watchErr:
			if err == nil || ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("fleet: %s: %w", w.opt.Source, err)
		case r := <-reports:
			w.report(r, &jitter, &lost)
		case <-jitter.c:
			jitter.c = nil
			w.applyPending(&kill)
		case <-kill.c:
			kill.c = nil
			// A pod that fell back stays so until its store is back.
			if w.applied != nil && w.Status().State != StateFallback {
				w.emit(Event{Kind: EventKillEnded, Version: w.applied.Version, Revision: w.Status().Revision})
				w.apply(w.applied, w.appliedSum, w.Status().Revision, &kill)
			}
		case <-lost.c:
			lost.c = nil
			w.fallBack()
		}
	}
}

// timer is a time.Timer whose channel is nil while it is not armed, so
// that a select never takes from a stopped one.
type timer struct {
	t *time.Timer
	c <-chan time.Time
}

func (t *timer) arm(d time.Duration) {
	t.stop()
	t.t = time.NewTimer(max(d, 0))
	t.c = t.t.C
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.c = nil
}

// draw returns a jitter in [0, Jitter].
func (w *Watcher) draw() time.Duration {
	if w.opt.Jitter <= 0 {
		return 0
	}
	return time.Duration(w.rand.Int64N(int64(w.opt.Jitter) + 1))
}

// report handles one report of the source.
func (w *Watcher) report(r Report, jitter, lost *timer) {
	if r.Err != nil {
		w.mu.Lock()
		w.stats.StoreErrors++
		w.status.Error = r.Err.Error()
		if w.status.State == StateApplied {
			w.status.State = StateStale
		}
		w.mu.Unlock()
		if !w.lost {
			w.lost = true
			// A pod that never had a document runs its Config, which
			// is no fallback's business; one that had falls back.
			if w.opt.LostAfter > 0 && w.applied != nil && w.Status().State != StateFallback {
				lost.arm(w.opt.LostAfter)
			}
		}
		w.emit(Event{Kind: EventStoreLost, Err: r.Err})
		w.publish()
		return
	}
	if w.lost {
		w.lost = false
		lost.stop()
		w.mu.Lock()
		if w.status.State == StateStale {
			w.status.State = StateApplied
		}
		w.status.Error = ""
		w.mu.Unlock()
		w.emit(Event{Kind: EventStoreBack})
		w.publish()
	}
	if r.Deleted {
		w.pending, w.pendingDel = nil, true
		if jitter.c == nil {
			jitter.arm(w.draw())
		}
		return
	}
	if rev := w.Status().Revision; r.Revision != 0 && r.Revision < rev {
		w.refuse(ReasonStale, r.Revision, 0, fmt.Errorf("fleet: store revision %d is below the applied one's, %d: not applied", r.Revision, rev))
		return
	}
	sum := sha256.Sum256(r.Doc)
	p, err := Parse(r.Doc)
	if err != nil {
		why := ReasonInvalid
		if errors.Is(err, ErrTooLarge) {
			why = ReasonTooLarge
		}
		w.refuse(why, r.Revision, 0, err)
		return
	}
	if p.Service != w.opt.Service {
		w.refuse(ReasonService, r.Revision, p.Version, fmt.Errorf("fleet: the document is for service %q, and this pod follows %q: publish it under %q's key, or fix its service", p.Service, w.opt.Service, w.opt.Service))
		return
	}
	state := w.Status().State
	switch {
	case w.applied != nil && p.Version == w.applied.Version && sum == w.appliedSum && w.pending == nil && !w.pendingDel:
		if state == StateFallback {
			// The store is back with the document the pod ran before
			// it fell back: run it again.
			w.pending, w.pendingSum, w.pendingRev = p, sum, r.Revision
			if jitter.c == nil {
				jitter.arm(w.draw())
			}
		}
		return // the same document, seen again
	case w.pending != nil && p.Version == w.pending.Version && sum == w.pendingSum:
		return
	case w.applied != nil && p.Version <= w.applied.Version && !w.pendingDel:
		w.refuse(ReasonStale, r.Revision, p.Version, fmt.Errorf("fleet: version %d is not above the applied version %d: raise the version with every change", p.Version, w.applied.Version))
		return
	case w.pending != nil && p.Version <= w.pending.Version:
		w.refuse(ReasonStale, r.Revision, p.Version, fmt.Errorf("fleet: version %d is not above version %d, which is about to be applied: raise the version with every change", p.Version, w.pending.Version))
		return
	}
	if err := w.check(p); err != nil {
		w.refuse(ReasonNotLive, r.Revision, p.Version, err)
		return
	}
	w.pending, w.pendingSum, w.pendingRev, w.pendingDel = p, sum, r.Revision, false
	if jitter.c == nil {
		jitter.arm(w.draw())
	}
}

// check reports whether every Hedger can apply p, now and once its kill
// switch ends.
func (w *Watcher) check(p *Policy) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(w.opt.Hedgers)) {
		if err := w.opt.Hedgers[name].CheckLive(p.Live(name, w.opt.Instance, time.Time{})); err != nil {
			errs = append(errs, fmt.Errorf("fleet: Hedger %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// refuse counts and reports a document not applied.
func (w *Watcher) refuse(why Reason, rev, version int64, err error) {
	w.mu.Lock()
	w.stats.Refused[why]++
	w.status.Error = err.Error()
	w.mu.Unlock()
	w.emit(Event{Kind: EventRefused, Reason: why, Version: version, Revision: rev, Err: err})
	w.publish()
}

// applyPending applies what waited for its jitter.
func (w *Watcher) applyPending(kill *timer) {
	switch {
	case w.pendingDel:
		w.pendingDel = false
		kill.stop()
		w.setAll(func(string) hedge.Live { return hedge.Live{} })
		w.applied = nil
		w.mu.Lock()
		w.status.Version, w.status.Revision, w.status.State, w.status.Applied, w.status.Error = 0, 0, StateCode, w.now(), ""
		w.mu.Unlock()
		w.emit(Event{Kind: EventDeleted})
		w.publish()
	case w.pending != nil:
		p := w.pending
		w.pending = nil
		w.apply(p, w.pendingSum, w.pendingRev, kill)
	}
}

// apply applies p to every Hedger and arms the end of its kill switch.
func (w *Watcher) apply(p *Policy, sum [sha256.Size]byte, rev int64, kill *timer) {
	now := w.now()
	w.setAll(func(name string) hedge.Live { return p.Live(name, w.opt.Instance, now) })
	w.applied, w.appliedSum = p, sum
	kill.stop()
	if p.Killed(now) {
		kill.arm(p.Kill.Until.Sub(now) + w.draw())
	}
	w.mu.Lock()
	w.stats.Applied++
	state := StateApplied
	if w.lost {
		state = StateStale
	}
	w.status.Version, w.status.Revision, w.status.Applied, w.status.State = p.Version, rev, now, state
	if !w.lost {
		w.status.Error = ""
	}
	w.mu.Unlock()
	if p.Killed(now) {
		w.log.Warn("fleet: kill switch on: every Hedger off", "service", w.opt.Service, "version", p.Version, "until", p.Kill.Until, "reason", p.Kill.Reason)
	}
	w.emit(Event{Kind: EventApplied, Version: p.Version, Revision: rev})
	w.publish()
}

// setAll applies live(name) to each Hedger. The settings were checked
// when the document came; a Hedger that refuses them now is logged.
func (w *Watcher) setAll(live func(name string) hedge.Live) {
	for _, name := range slices.Sorted(maps.Keys(w.opt.Hedgers)) {
		if err := w.opt.Hedgers[name].SetLive(live(name)); err != nil {
			w.log.Error("fleet: a Hedger refused settings it accepted when checked", "hedger", name, "err", err)
		}
	}
}

// fallBack runs Options.Fallback once the store was lost for LostAfter.
func (w *Watcher) fallBack() {
	if w.opt.Fallback == FallbackOff {
		w.setAll(func(string) hedge.Live { return hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}} })
	} else {
		w.setAll(func(string) hedge.Live { return hedge.Live{} })
	}
	w.mu.Lock()
	w.stats.Fallbacks++
	w.status.State = StateFallback
	w.mu.Unlock()
	w.emit(Event{Kind: EventFallback})
	w.publish()
}

// emit tells OnEvent and the log of e.
func (w *Watcher) emit(e Event) {
	e.At = w.now()
	attrs := []any{"service", w.opt.Service, "instance", w.opt.Instance}
	if e.Version != 0 {
		attrs = append(attrs, "version", e.Version)
	}
	if e.Revision != 0 {
		attrs = append(attrs, "revision", e.Revision)
	}
	switch e.Kind {
	case EventApplied:
		w.log.Info("fleet: policy applied", attrs...)
	case EventRefused:
		w.log.Warn("fleet: policy refused, the last good one stays", append(attrs, "reason", string(e.Reason), "err", e.Err)...)
	case EventStoreLost:
		w.log.Warn("fleet: policy store unreachable, the last good policy stays", append(attrs, "err", e.Err)...)
	case EventStoreBack:
		w.log.Info("fleet: policy store back", attrs...)
	case EventFallback:
		w.log.Error("fleet: policy store lost for too long, falling back", append(attrs, "fallback", w.opt.Fallback.String(), "after", w.opt.LostAfter)...)
	case EventKillEnded:
		w.log.Info("fleet: kill switch ended, the policy applies again", attrs...)
	case EventDeleted:
		w.log.Warn("fleet: policy deleted from the store, running the Config in code", attrs...)
	}
	if w.opt.OnEvent != nil {
		w.opt.OnEvent(e)
	}
}

// publish hands the status to the announcer goroutine, replacing one it
// has not taken yet.
func (w *Watcher) publish() {
	if w.announce == nil {
		return
	}
	s := w.Status()
	for {
		select {
		case w.announce <- s:
			return
		default:
			select {
			case <-w.announce:
			default:
			}
		}
	}
}

// announcer publishes each status, the latest first, until ctx ends.
func (w *Watcher) announcer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-w.announce:
			if err := w.opt.Announcer.Announce(ctx, s); err != nil && ctx.Err() == nil {
				w.log.Warn("fleet: could not announce the pod's status", "err", err)
			}
		}
	}
}
