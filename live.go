package hedge

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// RefusedRate: the cap on hedges per second of the [Hedger]'s live
// settings ([Settings.MaxHedgesPerSecond]) is spent.
const RefusedRate Refusal = decide.RefusedRate

// ErrNotLive is matched by the error [Hedger.SetLive] returns for a
// setting that the [Hedger] cannot change while it runs: a live
// percentile for a [Hedger] whose delay is not a [Percentile], or more
// than one copy per request with a single replica.
var ErrNotLive = errors.New("hedge: setting cannot change while the Hedger runs")

// Live is the part of a [Hedger]'s settings that can change while it
// runs: [Hedger.SetLive] applies it. The zero Live is the [Config] the
// [Hedger] was made with.
//
// Settings applies to every operation class. Ops gives some classes
// settings of their own, in place of Settings (not over it: a field left
// zero there is the [Config]'s).
type Live struct {
	Settings
	// Ops holds settings by operation class name ([Do]'s op).
	Ops map[string]Settings
}

// Settings is what [Live] sets for an operation class. A zero field keeps
// the [Config]'s value.
type Settings struct {
	// Mode is the most the class may do. Its requests run in the more
	// cautious of the [Hedger]'s mode ([Hedger.SetMode], [Config.Mode])
	// and this one, [Off] being the most cautious. The zero value, [On],
	// leaves the [Hedger]'s mode alone, so that a local kill switch
	// always wins.
	Mode Mode
	// Percentile is the live delay's percentile, in (0, 100), as
	// [Percentile.P]. It needs a [Percentile] delay. The latency window
	// keeps its samples: the new percentile is read from them at once.
	Percentile float64
	// BudgetRatio and BudgetBurst replace the budget, as
	// [NewBudget](BudgetRatio, BudgetBurst). Both zero keep the
	// [Config]'s. The new bucket starts with no more tokens than the one
	// it replaces. Classes with the same ratio and burst as [Live]'s own
	// Settings spend from one bucket; others have their own. The
	// [Config]'s budget is not spent while a live one is in force: back
	// to it, a class finds it as it was left.
	BudgetRatio, BudgetBurst float64
	// MaxAttempts is the most copies of one request, 1 to
	// [HardMaxAttempts], as [Config.MaxAttempts].
	MaxAttempts int
	// MaxHedgesPerSecond caps the copies sent per second, beyond the
	// budget's ratio: a hedge over it is refused ([RefusedRate]). Bursts
	// hold at most max(1, MaxHedgesPerSecond) copies. Zero means no cap.
	// Shadow requests are not capped.
	MaxHedgesPerSecond float64
}

// Validate reports the mistakes in s, each with what to do, with the
// messages of [New] where the setting is a [Config] one. The error
// matches [ErrInvalidConfig].
func (s Settings) Validate() error {
	var errs []error
	if s.Mode < On || s.Mode > Off {
		errs = append(errs, fmt.Errorf("hedge: Settings.Mode = %d is not a mode: use hedge.On, hedge.Shadow or hedge.Off", s.Mode))
	}
	if s.Percentile != 0 {
		if err := (Percentile{P: s.Percentile}).validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.BudgetRatio != 0 || s.BudgetBurst != 0 {
		if _, err := NewBudget(s.BudgetRatio, s.BudgetBurst); err != nil {
			errs = append(errs, err)
		}
	}
	if s.MaxAttempts != 0 {
		// New's rule and message, from the one place they are.
		cfg := Config{MaxAttempts: s.MaxAttempts}
		if err := cfg.validate(); err != nil {
			errs = append(errs, err.(invalidConfig).errs...)
		}
	}
	if r := s.MaxHedgesPerSecond; math.IsNaN(r) || r < 0 || r > 1e9 {
		errs = append(errs, fmt.Errorf("hedge: Settings.MaxHedgesPerSecond = %v: use 0 for no cap, or a number of hedges per second up to 1e9", r))
	}
	if len(errs) == 0 {
		return nil
	}
	return invalidConfig{errs}
}

// Validate reports the mistakes in l: those of its Settings and of each
// class's, the latter prefixed with the class's name. The error matches
// [ErrInvalidConfig].
func (l Live) Validate() error {
	var errs []error
	if err := l.Settings.Validate(); err != nil {
		errs = append(errs, err.(invalidConfig).errs...)
	}
	for _, op := range sortedKeys(l.Ops) {
		if err := l.Ops[op].Validate(); err != nil {
			for _, e := range err.(invalidConfig).errs {
				errs = append(errs, fmt.Errorf("op %q: %w", op, e))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return invalidConfig{errs}
}

// CheckLive reports whether [Hedger.SetLive] would apply l: it returns
// l's mistakes ([ErrInvalidConfig]) and the settings this [Hedger] cannot
// change while it runs ([ErrNotLive]), and changes nothing. Check every
// [Hedger] first to apply one set of settings to all or none.
func (h *Hedger) CheckLive(l Live) error {
	if err := l.Validate(); err != nil {
		return err
	}
	var errs []error
	check := func(where string, s Settings) {
		if s.Percentile != 0 && !h.percentileDelay() {
			errs = append(errs, fmt.Errorf("%s%w: a percentile needs a Percentile delay, and this Hedger's is %s: leave the percentile unset for it, or make it with a Percentile delay", where, ErrNotLive, describeDelay(h.delay)))
		}
		if s.MaxAttempts > 1 && len(h.replicas) == 1 {
			errs = append(errs, fmt.Errorf("%s%w: MaxAttempts = %d with a single replica would send no hedge: leave MaxAttempts unset for this Hedger", where, ErrNotLive, s.MaxAttempts))
		}
	}
	check("", l.Settings)
	for _, op := range sortedKeys(l.Ops) {
		check(fmt.Sprintf("op %q: ", op), l.Ops[op])
	}
	return errors.Join(errs...)
}

// SetLive applies l to the running [Hedger], in place of the live
// settings before it: SetLive(Live{}) returns to the [Config]. Requests
// that begin after it follow l. Those running keep what they began with,
// but for [Off]: a request whose class l turns off sends no further copy.
// What the [Hedger] learned stays: the latency windows keep their
// samples, the payoff rule its evidence, a budget or cap that changes
// its tokens (up to its new burst).
//
// It returns the error of [Hedger.CheckLive] and changes nothing when l
// has a mistake or a setting the [Hedger] cannot change while it runs.
// SetLive calls are serialised; requests never wait for them.
func (h *Hedger) SetLive(l Live) error {
	if err := h.CheckLive(l); err != nil {
		return err
	}
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	prev := h.live.Load()
	ls := &liveState{set: l}
	ls.set.Ops = make(map[string]Settings, len(l.Ops))
	for op, s := range l.Ops {
		ls.set.Ops[op] = s
	}
	// The buckets and caps in force, to carry their tokens over.
	var prevBud, prevShadow *Budget
	var prevRate *decide.Rate
	if prev != nil {
		prevBud, prevShadow, prevRate = prev.budget, prev.shadow, prev.rate
	}
	ls.budget, ls.shadow = h.liveBudget(l.Settings, prevBud, prevShadow)
	ls.rate = liveRate(l.Settings.MaxHedgesPerSecond, prevRate)
	ls.def = ls.decision(l.Settings, ls.budget, ls.shadow, ls.rate)
	if len(l.Ops) > 0 {
		ls.ops = make(map[string]*liveOp, len(l.Ops))
	}
	for op, s := range l.Ops {
		o := &liveOp{budget: ls.budget, shadow: ls.shadow, rate: ls.rate}
		if s.BudgetRatio != l.BudgetRatio || s.BudgetBurst != l.BudgetBurst {
			var pb, ps *Budget
			if p := prev.op(op); p != nil {
				pb, ps = p.budget, p.shadow
			} else {
				pb, ps = prevBud, prevShadow
			}
			o.budget, o.shadow = h.liveBudget(s, pb, ps)
		}
		if s.MaxHedgesPerSecond != l.MaxHedgesPerSecond {
			pr := prevRate
			if p := prev.op(op); p != nil {
				pr = p.rate
			}
			o.rate = liveRate(s.MaxHedgesPerSecond, pr)
		}
		o.dec = ls.decision(s, o.budget, o.shadow, o.rate)
		ls.ops[op] = o
	}
	h.live.Store(ls)
	h.stopInFlight(prev, l)
	// The live percentile of every class there is; classes made later
	// read it in newEstimator.
	for _, st := range h.classes() {
		if e, ok := st.est.(*percentileEstimator); ok {
			e.setQ(ls.percentile(st.name) / 100)
		}
	}
	return nil
}

// stopInFlight stops the further copies of requests that began under
// prev and whose class l turns off: with a kill switch, a hedge whose
// timer has not fired yet is not sent. Only settings that are Off for a
// request's class stop it; any other change applies to requests that
// begin after it.
func (h *Hedger) stopInFlight(prev *liveState, l Live) {
	off := func(op string) bool {
		if s, ok := l.Ops[op]; ok {
			return s.Mode == Off
		}
		return l.Mode == Off
	}
	allOff := l.Mode == Off
	for _, s := range l.Ops {
		allOff = allOff && s.Mode == Off
	}
	if prev == nil {
		if allOff {
			h.liveBase.Stop()
		}
		return
	}
	// Classes without settings of their own shared prev.def: every class
	// must be off to stop it.
	if allOff {
		prev.def.Stop()
	}
	for op, o := range prev.ops {
		if off(op) {
			o.dec.Stop()
		}
	}
}

// Live returns the live settings in force ([Hedger.SetLive]); the zero
// Live before any.
func (h *Hedger) Live() Live {
	ls := h.live.Load()
	if ls == nil {
		return Live{}
	}
	l := ls.set
	l.Ops = make(map[string]Settings, len(ls.set.Ops))
	for op, s := range ls.set.Ops {
		l.Ops[op] = s
	}
	if len(l.Ops) == 0 {
		l.Ops = nil
	}
	return l
}

// liveState is what SetLive applied.
type liveState struct {
	set            Live
	budget, shadow *Budget      // Settings' budget and its Shadow twin; nil: the Config's
	rate           *decide.Rate // Settings' cap; nil: none
	def            *decide.Live // the decision's settings for classes without their own; nil: none
	ops            map[string]*liveOp
}

// liveOp is what SetLive applied to one class of Live.Ops.
type liveOp struct {
	budget, shadow *Budget
	rate           *decide.Rate
	dec            *decide.Live
}

// op returns the live settings of class name in ls, or nil.
func (ls *liveState) op(name string) *liveOp {
	if ls == nil {
		return nil
	}
	return ls.ops[name]
}

// percentile returns the live percentile of class name, 0 for the Config's.
func (ls *liveState) percentile(name string) float64 {
	if ls == nil {
		return 0
	}
	if s, ok := ls.set.Ops[name]; ok {
		return s.Percentile
	}
	return ls.set.Percentile
}

// decision returns the decision's settings for s. It is never nil, even
// when s changes nothing, so that SetLive can stop the requests that
// began with it (decide.Live.Stop).
func (ls *liveState) decision(s Settings, b, shadow *Budget, r *decide.Rate) *decide.Live {
	d := &decide.Live{Mode: decide.Mode(s.Mode), MaxAttempts: s.MaxAttempts, Rate: r}
	if b != nil {
		d.Budget, d.Shadow = b.dec(), shadow.dec()
	}
	return d
}

// liveFor returns the live settings that a request of class st begins
// with: before any SetLive, the Hedger's liveBase, which changes nothing.
// With settings per class, the class's are looked up in the map once per
// SetLive and kept in st (liveOf), so that a request reads two pointers
// rather than hashing its class's name.
func (h *Hedger) liveFor(st *opState) *decide.Live {
	ls := h.live.Load()
	switch {
	case ls == nil:
		return &h.liveBase
	case ls.ops == nil:
		return ls.def
	}
	if c := st.live.Load(); c != nil && c.ls == ls {
		return c.dec
	}
	dec := ls.def
	if o, ok := ls.ops[st.name]; ok {
		dec = o.dec
	}
	st.live.Store(&liveOf{ls: ls, dec: dec})
	return dec
}

// liveOf is the live settings of a class under one SetLive's state.
type liveOf struct {
	ls  *liveState
	dec *decide.Live
}

// liveBudget returns the budget and Shadow twin of s, nil for the
// Config's. A bucket with the same ratio and burst as prev is prev
// itself; a new one starts with no more tokens than prev, or than the
// Config's budget when prev is nil.
func (h *Hedger) liveBudget(s Settings, prev, prevShadow *Budget) (b, shadow *Budget) {
	if s.BudgetRatio == 0 && s.BudgetBurst == 0 {
		return nil, nil
	}
	nb, _ := NewBudget(s.BudgetRatio, s.BudgetBurst) // valid: checked by Validate
	if prev != nil && !prev.t.Throttle && prev.t.Credit == nb.t.Credit && prev.t.Max == nb.t.Max {
		return prev, prevShadow
	}
	from := prev
	if from == nil {
		from = h.budget
	}
	ns := nb.twin()
	if from != nil {
		nb.t.Level.Store(min(nb.t.Max, from.t.Level.Load()))
	}
	if prevShadow != nil {
		ns.t.Level.Store(min(ns.t.Max, prevShadow.t.Level.Load()))
	}
	return nb, ns
}

// liveRate returns the cap of perSecond hedges per second, nil for none:
// prev itself when it caps the same, or a new one carrying prev's tokens.
func liveRate(perSecond float64, prev *decide.Rate) *decide.Rate {
	switch {
	case perSecond == 0:
		return nil
	case prev != nil && prev.PerSecond() == perSecond:
		return prev
	}
	return decide.NewRate(perSecond, prev)
}

// percentileDelay reports whether the Hedger's delay is a live percentile.
func (h *Hedger) percentileDelay() bool {
	switch d := h.delay.(type) {
	case Percentile:
		return true
	case *Percentile:
		return d != nil
	}
	return false
}

// newEstimator returns the delay state of a new class name, with the
// live percentile in force.
func (h *Hedger) newEstimator(name string) decide.Estimator {
	est := h.delay.newEstimator()
	if e, ok := est.(*percentileEstimator); ok {
		if q := h.live.Load().percentile(name) / 100; q != 0 {
			e.setQ(q)
		}
	}
	return est
}

// setQ sets the live percentile, a fraction (0 for the Config's), and
// reads the delay in force from the window's samples at once.
func (e *percentileEstimator) setQ(q float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q == e.cfg.P/100 {
		q = 0
	}
	e.q = q
	if e.seen >= e.cfg.MinSamples {
		e.cur.Store(int64(e.clamp(e.estimate(), false)))
	}
}

// estimate is the percentile of the window in force: the one it tracks,
// or the live one, read by a scan of the window's histogram. e.mu is held.
func (e *percentileEstimator) estimate() time.Duration {
	if e.q != 0 {
		return time.Duration(e.w.Quantile(e.q))
	}
	return time.Duration(e.w.Tracked())
}

// sortedKeys returns m's keys in order, so that errors list them the same
// way every time.
func sortedKeys(m map[string]Settings) []string {
	return slices.Sorted(maps.Keys(m))
}
