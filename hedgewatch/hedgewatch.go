// Package hedgewatch raises an alarm when hedging stops paying, and can
// switch a Hedger to Shadow by itself until the alarm clears.
//
// Two signs say that hedging is making things worse rather than better:
// the hedge rate jumping far above its recent baseline (from 5% to 40%: the
// whole backend is slow, every request qualifies for a copy, and copies
// only add load), and hedges slower than primaries (the hedge path goes to
// another zone, or to replicas as stuck as the primary's). A Watcher
// samples a Hedger's Stats at an interval, compares each interval with the
// baseline of recent healthy intervals, and reports its State to a
// callback when it changes. With Config.AutoShadow it switches the Hedger
// to Shadow while alarmed, so that it keeps deciding and counting without
// sending, and back to On once Config.Clear healthy intervals have passed
// (hysteresis: one quiet interval does not end an alarm).
//
//	w, err := hedgewatch.New(h, hedgewatch.Config{AutoShadow: true, OnChange: func(s hedgewatch.State) {
//		log.Printf("hedging alarm: %v", s)
//	}})
//	...
//	go w.Run(ctx)
//
// The rate is of hedges decided, sent or (in Shadow) counted, so a Watcher
// sees a shadowed Hedger recover. The latency sign compares interval means
// of the hedge path and of the primary (a lower bound for the primary, whose
// cancelled copies are censored), and is not judged while nothing is sent.
// Check takes one sample without a clock, for tests and for callers that
// schedule sampling themselves.
package hedgewatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tailcut/hedge"
)

// Config configures a Watcher. Zero fields take the defaults given.
type Config struct {
	// Interval is the time between samples in Run. Default 10 s.
	Interval time.Duration
	// Baseline is how many recent healthy intervals the baseline hedge
	// rate averages. Default 30.
	Baseline int
	// RateFactor: an interval whose hedge rate is above RateFactor times
	// the baseline rate, and at least MinRate, raises the alarm. Defaults
	// 4 and 0.15.
	RateFactor float64
	MinRate    float64
	// SlowFactor: an interval whose hedges' mean latency is above
	// SlowFactor times its primaries' mean raises the alarm. Default 2;
	// negative turns the sign off.
	SlowFactor float64
	// MinRequests is the fewest requests an interval needs to be judged.
	// Default 100.
	MinRequests int64
	// Clear is how many healthy intervals in a row end an alarm.
	// Default 3.
	Clear int
	// AutoShadow switches the Hedger to Shadow when the alarm is raised
	// (if it is On), and back to On when it clears (if it is still in the
	// Shadow the Watcher put it in).
	AutoShadow bool
	// OnChange, if set, is called with the new State when the alarm is
	// raised or cleared, on the goroutine that called Check.
	OnChange func(State)
}

// State is what the Watcher concluded from the last interval.
type State struct {
	// Alarmed is set from the interval that raised the alarm until the
	// one that cleared it.
	Alarmed bool
	// Reason says why the alarm was raised, or is "" when not alarmed.
	Reason string
	// Rate is the last judged interval's hedges per request, and
	// BaselineRate the mean over recent healthy intervals.
	Rate, BaselineRate float64
	// HedgeMean and PrimaryMean are the last interval's mean latencies of
	// the hedge path and of the primary (zero when none completed).
	HedgeMean, PrimaryMean time.Duration
	// Shadowed is set while the Watcher holds the Hedger in Shadow.
	Shadowed bool
}

// String describes the state on one line.
func (s State) String() string {
	if !s.Alarmed {
		return fmt.Sprintf("healthy: hedge rate %.3g (baseline %.3g)", s.Rate, s.BaselineRate)
	}
	return "alarm: " + s.Reason
}

// Watcher watches one Hedger. Its methods are safe for concurrent use.
type Watcher struct {
	h   *hedge.Hedger
	cfg Config

	mu      sync.Mutex
	last    sample
	started bool
	rates   []float64 // ring of healthy intervals' rates
	healthy int       // healthy intervals in a row while alarmed
	state   State
}

// sample is the Hedger's cumulative counts over all operation classes.
type sample struct {
	requests, decided    int64
	hedgeN, primaryN     int64
	hedgeSum, primarySum float64 // nanoseconds
}

// New returns a Watcher of h. Every mistake in cfg is reported at once.
func New(h *hedge.Hedger, cfg Config) (*Watcher, error) {
	var errs []error
	if h == nil {
		errs = append(errs, errors.New("hedgewatch: New(nil): pass the *hedge.Hedger to watch"))
	}
	def := func(v *float64, d float64, name string) {
		switch {
		case math.IsNaN(*v) || math.IsInf(*v, 0):
			errs = append(errs, fmt.Errorf("hedgewatch: Config.%s = %v: use a finite number", name, *v))
		case *v == 0:
			*v = d
		}
	}
	def(&cfg.RateFactor, 4, "RateFactor")
	def(&cfg.MinRate, 0.15, "MinRate")
	def(&cfg.SlowFactor, 2, "SlowFactor")
	if cfg.RateFactor < 1 {
		errs = append(errs, fmt.Errorf("hedgewatch: Config.RateFactor = %v: use a factor above 1 (4 alarms at four times the baseline)", cfg.RateFactor))
	}
	if cfg.MinRate < 0 || cfg.MinRate > 1 {
		errs = append(errs, fmt.Errorf("hedgewatch: Config.MinRate = %v: use a rate in [0, 1], e.g. 0.15", cfg.MinRate))
	}
	if cfg.SlowFactor > 0 && cfg.SlowFactor < 1 {
		errs = append(errs, fmt.Errorf("hedgewatch: Config.SlowFactor = %v: use a factor of at least 1, or a negative one to turn the latency sign off", cfg.SlowFactor))
	}
	if cfg.Interval < 0 || cfg.Baseline < 0 || cfg.MinRequests < 0 || cfg.Clear < 0 {
		errs = append(errs, errors.New("hedgewatch: Config.Interval, Baseline, MinRequests and Clear must not be negative (0 means the default)"))
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = 30
	}
	if cfg.MinRequests == 0 {
		cfg.MinRequests = 100
	}
	if cfg.Clear == 0 {
		cfg.Clear = 3
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Watcher{h: h, cfg: cfg}, nil
}

// State returns the state after the last Check.
func (w *Watcher) State() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// Run calls Check every Config.Interval until ctx ends, and returns ctx's
// error.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	w.Check() // the first sample starts the first interval
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			w.Check()
		}
	}
}

func (w *Watcher) sample() sample {
	var s sample
	for _, st := range w.h.Stats() {
		s.requests += st.Requests
		s.decided += st.Hedges + st.ShadowHedges
		s.hedgeN += st.HedgePath.Count
		s.hedgeSum += float64(st.HedgePath.Sum)
		s.primaryN += st.Primary.Count
		s.primarySum += float64(st.Primary.Sum)
	}
	return s
}

// Check samples the Hedger and judges the interval since the previous
// Check (the first only starts an interval). An interval with fewer than
// MinRequests requests is not judged.
func (w *Watcher) Check() State {
	now := w.sample()
	w.mu.Lock()
	prev, started := w.last, w.started
	w.last, w.started = now, true
	if !started || now.requests-prev.requests < w.cfg.MinRequests {
		s := w.state
		w.mu.Unlock()
		return s
	}
	n := float64(now.requests - prev.requests)
	s := w.state
	s.Rate = float64(now.decided-prev.decided) / n
	s.BaselineRate = w.baseline()
	s.HedgeMean, s.PrimaryMean = meanOf(now.hedgeSum-prev.hedgeSum, now.hedgeN-prev.hedgeN), meanOf(now.primarySum-prev.primarySum, now.primaryN-prev.primaryN)
	reason := ""
	switch {
	case s.Rate >= w.cfg.MinRate && s.BaselineRate > 0 && s.Rate > w.cfg.RateFactor*s.BaselineRate:
		reason = fmt.Sprintf("hedge rate %.3g is %.1f times its baseline %.3g", s.Rate, s.Rate/s.BaselineRate, s.BaselineRate)
	case w.cfg.SlowFactor > 0 && s.HedgeMean > 0 && s.PrimaryMean > 0 && float64(s.HedgeMean) > w.cfg.SlowFactor*float64(s.PrimaryMean):
		reason = fmt.Sprintf("hedges are slower than primaries: mean %v against %v", s.HedgeMean, s.PrimaryMean)
	}
	changed := false
	switch {
	case !s.Alarmed && reason != "":
		s.Alarmed, s.Reason, changed = true, reason, true
		w.healthy = 0
		if w.cfg.AutoShadow && w.h.Mode() == hedge.On && w.h.SetMode(hedge.Shadow) == nil {
			s.Shadowed = true
		}
	case s.Alarmed && reason != "":
		w.healthy = 0
	case s.Alarmed:
		w.healthy++
		if w.healthy >= w.cfg.Clear {
			s.Alarmed, s.Reason, changed = false, "", true
			if s.Shadowed && w.h.Mode() == hedge.Shadow {
				_ = w.h.SetMode(hedge.On)
			}
			s.Shadowed = false
		}
	default:
		w.rates = append(w.rates, s.Rate) // a healthy interval feeds the baseline
		if len(w.rates) > w.cfg.Baseline {
			w.rates = w.rates[1:]
		}
	}
	w.state = s
	w.mu.Unlock()
	if changed && w.cfg.OnChange != nil {
		w.cfg.OnChange(s)
	}
	return s
}

// baseline is the mean rate of recent healthy intervals. w.mu is held.
func (w *Watcher) baseline() float64 {
	if len(w.rates) == 0 {
		return 0
	}
	sum := 0.0
	for _, r := range w.rates {
		sum += r
	}
	return sum / float64(len(w.rates))
}

func meanOf(sum float64, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(sum / float64(n))
}
