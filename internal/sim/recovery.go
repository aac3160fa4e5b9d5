package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/tailcut/hedge/internal/recovery"
)

// RecoveryConfig describes a global slowdown and how the recovery from it
// is judged: every server of the correlated world is Config.SlowFactor
// slower from Config.SlowAt for Config.SlowFor time units, then back to
// normal.
type RecoveryConfig struct {
	// Window is the width, in time units, of the arrival-time windows in
	// which latency and hedges are counted (50).
	Window float64
	// Tolerance is how far above its level before the slowdown a
	// window's mean latency may be and still count as recovered (0.2:
	// within 20%).
	Tolerance float64
	// Settle is how many consecutive windows must be recovered for the
	// recovery to count (3).
	Settle int
}

// DefaultRecovery is the judgement the project reports with.
var DefaultRecovery = RecoveryConfig{Window: 50, Tolerance: 0.2, Settle: 3}

// Recovery is what a run through a scheduled global slowdown measured.
// Windows are by arrival time: a window's latency is that of the requests
// that arrived in it.
type Recovery struct {
	// Baseline is the mean latency of the requests that arrived between
	// the warm-up and the slowdown.
	Baseline float64
	// Peak is the largest mean latency of a window.
	Peak float64
	// Recovered says whether latency came back within the tolerance for
	// Settle windows in a row before the run ended; RecoveredAfter is
	// when, in time units after the slowdown ended (0 if it never rose
	// above the tolerance after it).
	Recovered      bool
	RecoveredAfter float64
	// HedgeShare is the share of requests that sent more than one copy,
	// before the slowdown (Before), during it and until the recovery
	// (During; until the end of the run if latency never recovered), and
	// the largest share in any one window (PeakWindow).
	HedgeShareBefore, HedgeShareDuring, HedgeSharePeakWindow float64
	// Windows holds every window's mean latency and hedge share, from
	// the first window after the warm-up, for a plot.
	Windows []RecoveryWindow
}

// RecoveryWindow is one window of a Recovery.
type RecoveryWindow struct {
	Start      float64 // arrival time at which the window starts
	Requests   int
	Mean       float64 // mean latency, NaN if no request arrived
	HedgeShare float64
}

// MeasureRecovery runs c once, with a scheduled global slowdown
// (c.World must be Correlated and c.SlowFor positive), and follows its
// latency and hedges window by window (rc; zero fields take
// DefaultRecovery's). It needs warm-up requests arriving before the
// slowdown, for the baseline, and enough requests after it for the
// recovery: a run that ends while latency is still high reports
// Recovered false rather than a time.
func (s *Simulator) MeasureRecovery(c Config, rc RecoveryConfig) (Recovery, error) {
	if rc.Window == 0 {
		rc.Window = DefaultRecovery.Window
	}
	if rc.Tolerance == 0 {
		rc.Tolerance = DefaultRecovery.Tolerance
	}
	if rc.Settle == 0 {
		rc.Settle = DefaultRecovery.Settle
	}
	var errs []error
	if c.World != Correlated || !(c.SlowFor > 0) {
		errs = append(errs, fmt.Errorf("recovery needs the correlated world with a scheduled slowdown (SlowFor > 0), not world %v with SlowFor %v", c.World, c.SlowFor))
	}
	if !(rc.Window > 0) || math.IsInf(rc.Window, 0) {
		errs = append(errs, fmt.Errorf("recovery window %v: use a positive width in time units, e.g. 50", rc.Window))
	}
	if !(rc.Tolerance > 0) {
		errs = append(errs, fmt.Errorf("recovery tolerance %v: use a positive fraction, e.g. 0.2", rc.Tolerance))
	}
	if rc.Settle < 1 {
		errs = append(errs, fmt.Errorf("recovery settle %d: use at least one window", rc.Settle))
	}
	if len(errs) > 0 {
		return Recovery{}, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}

	type bin struct {
		n, hedged int
		sum       float64
	}
	var (
		bins       []bin
		first      = math.Inf(1) // the first measured arrival
		baseN      int
		baseSum    float64
		baseHedged int
	)
	prev := s.Done
	s.Done = func(d Completion) {
		if !d.Measured {
			return
		}
		first = math.Min(first, d.Arrival)
		i := int(d.Arrival / rc.Window)
		for len(bins) <= i {
			bins = append(bins, bin{})
		}
		b := &bins[i]
		b.n++
		b.sum += d.Latency
		if d.Copies > 1 {
			b.hedged++
		}
		if d.Arrival < c.SlowAt {
			baseN++
			baseSum += d.Latency
			if d.Copies > 1 {
				baseHedged++
			}
		}
	}
	_, err := s.Run(c)
	s.Done = prev
	if err != nil {
		return Recovery{}, err
	}
	if baseN == 0 {
		return Recovery{}, fmt.Errorf("%w: no measured request arrived before the slowdown at %v: start it later or shorten the warm-up", ErrInvalid, c.SlowAt)
	}

	var r Recovery
	r.Baseline = baseSum / float64(baseN)
	r.HedgeShareBefore = float64(baseHedged) / float64(baseN)
	// The first window holding the first measured arrival may be partly
	// warm-up: start at the next one.
	from := int(first/rc.Window) + 1
	end := c.SlowAt + c.SlowFor
	limit := r.Baseline * (1 + rc.Tolerance)
	for i := from; i < len(bins); i++ {
		b := bins[i]
		w := RecoveryWindow{Start: float64(i) * rc.Window, Requests: b.n, Mean: math.NaN()}
		if b.n > 0 {
			w.Mean = b.sum / float64(b.n)
			w.HedgeShare = float64(b.hedged) / float64(b.n)
			r.Peak = math.Max(r.Peak, w.Mean)
			r.HedgeSharePeakWindow = math.Max(r.HedgeSharePeakWindow, w.HedgeShare)
		}
		r.Windows = append(r.Windows, w)
	}
	recIdx := recovery.First(from, len(bins), rc.Settle,
		func(i int) bool { return float64(i)*rc.Window+rc.Window > end },
		func(i int) bool { return bins[i].n > 0 && bins[i].sum/float64(bins[i].n) <= limit })
	stop := len(bins)
	if recIdx >= 0 {
		r.Recovered = true
		r.RecoveredAfter = math.Max(0, float64(recIdx)*rc.Window-end)
		stop = recIdx
	}
	var n, hedged int
	for i := int(c.SlowAt / rc.Window); i < stop && i < len(bins); i++ {
		n += bins[i].n
		hedged += bins[i].hedged
	}
	if n > 0 {
		r.HedgeShareDuring = float64(hedged) / float64(n)
	}
	return r, nil
}
