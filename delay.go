package hedge

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/internal/decide"
	"github.com/tailcut/hedge/quantile"
)

// Never is the delay that means "do not send another copy": a
// [Percentile] delay with too few samples and no Warmup, for instance.
// [Stats.Delay] reads Never while a delay is still being learnt.
const Never = time.Duration(math.MaxInt64)

// A Delay says how long to wait before sending the next copy of a
// request: a [Fixed] delay, or a live [Percentile]. It is a description,
// safe to copy. A [Hedger] keeps its state for each operation class, and
// the simulator one per run. It is implemented by those two types only.
type Delay interface {
	// validate reports a configuration mistake, with a message that
	// says what to do about it.
	validate() error
	// newEstimator returns fresh state for one operation class. The
	// Delay must be valid.
	newEstimator() decide.Estimator
}

// Fixed is a constant delay: Fixed(20*time.Millisecond) sends the next
// copy after 20 ms. Any length is valid: a delay that no call can outlive
// (up to [Never]) never hedges. Fixed(0) sends every copy at once.
type Fixed time.Duration

// validate reports a negative delay.
func (f Fixed) validate() error {
	if f < 0 {
		return fmt.Errorf("hedge: Fixed delay %v is negative: use a delay >= 0 (0 sends every copy at once)", time.Duration(f))
	}
	return nil
}

// newEstimator returns f's state: the delay alone.
func (f Fixed) newEstimator() decide.Estimator { return fixedEstimator(f) }

// fixedEstimator is the state of a Fixed delay: none.
type fixedEstimator time.Duration

// Delay returns the fixed delay.
func (f fixedEstimator) Delay(time.Duration) time.Duration { return time.Duration(f) }

// Observe does nothing.
func (fixedEstimator) Observe(time.Duration, time.Duration) {}

// estimatorDelay is a Delay whose every operation class shares one
// estimator (decide.DelayOf): a delay that tests of the module's other
// packages switch while their [Hedger] runs.
type estimatorDelay struct{ est decide.Estimator }

func (d estimatorDelay) validate() error                { return nil }
func (d estimatorDelay) newEstimator() decide.Estimator { return d.est }

func init() {
	decide.DelayOf = func(est decide.Estimator) any { return estimatorDelay{est} }
}

// Percentile is a live delay: the P-th percentile of the last Window
// latencies observed for the operation class, clamped to [Floor, Ceiling].
// Until MinSamples latencies have been seen, Warmup is used instead.
//
// The zero value of each field means its default, so Percentile{} is p95
// over the last 1,000 latencies, no hedging until 100 have been seen, and no
// clamp.
//
// # What the live engine records
//
// A [Hedger] feeds the estimator the latency of the primary copy alone. That
// is the distribution the delay is meant to be a percentile of: how long a
// request takes when nothing rescues it. Other choices feed the policy's own
// effects back into its input. Recording each copy's own running time (as
// one peer library does) adds the short times of hedges and of losers cut
// short by cancellation, which pulls the percentile down, which sends more
// hedges. Recording the winner's latency mixes in rescues, such as copies
// sent at once after a fast failure.
//
// When the primary is cancelled because a hedge won, its latency is
// unknown, but it is at least the primary's running time when the hedge
// won, which is at least the delay in force. The [Hedger] records that lower
// bound (and counts it in [Stats.PrimaryCensored]). For a percentile at or
// above the delay the lower bound has the right rank, so the estimate does
// not sink; dropping censored samples instead would remove exactly the slow
// ones. The price: when the delay starts below the true percentile (a
// Warmup set too low), censored samples sit just above the delay, and the
// estimate climbs by about one hedge latency per window of requests. Start
// high, or leave Warmup at zero. A primary that fails is not recorded: its
// latency says nothing about how long a success takes.
//
// The simulator may record other things (the study's "live p95" records
// client-observed latencies); the estimator itself records whatever it is
// given.
type Percentile struct {
	// P is the percentile, in (0, 100). Default 95. Below 50 is refused
	// unless AllowBelowMedian is set: hedging at the median sends about
	// half the traffic twice.
	P float64
	// Window is how many recent latencies the percentile is computed
	// over. Default 1,000; at most 1<<24. Each operation class holds its
	// own window at 2 bytes per latency, and New refuses a Window that,
	// over [Config.MaxOps]+1 classes, exceeds 64 MiB.
	Window int
	// MinSamples is how many latencies must have been seen before the
	// percentile is trusted. Default min(100, Window).
	MinSamples int
	// Warmup is the delay used until MinSamples latencies were seen.
	// Zero means Never: no hedging until the estimate exists.
	Warmup time.Duration
	// Floor is the smallest delay returned. Default 0.
	Floor time.Duration
	// Ceiling is the largest delay returned. Zero means no ceiling.
	Ceiling time.Duration
	// AllowBelowMedian permits P < 50. Set it only if you know why.
	AllowBelowMedian bool
}

func (p Percentile) withDefaults() Percentile {
	if p.P == 0 {
		p.P = 95
	}
	if p.Window == 0 {
		p.Window = 1000
	}
	if p.MinSamples == 0 {
		p.MinSamples = min(100, p.Window)
	}
	return p
}

// validate reports configuration mistakes.
func (p Percentile) validate() error {
	p = p.withDefaults()
	var errs []error
	switch {
	case math.IsNaN(p.P) || p.P <= 0 || p.P >= 100:
		errs = append(errs, fmt.Errorf("hedge: Percentile.P = %v is outside (0, 100): use e.g. 95 for p95", p.P))
	case p.P < 50 && !p.AllowBelowMedian:
		errs = append(errs, fmt.Errorf("hedge: Percentile.P = %v is below the median, which sends most requests twice: use 90 to 99, or set AllowBelowMedian if this is deliberate", p.P))
	}
	if p.Window < 1 || p.Window > 1<<24 {
		errs = append(errs, fmt.Errorf("hedge: Percentile.Window = %d: use 1 to %d latencies (1,000 is a good start)", p.Window, 1<<24))
	}
	if p.MinSamples < 1 || p.MinSamples > p.Window {
		errs = append(errs, fmt.Errorf("hedge: Percentile.MinSamples = %d: use 1 to Window (%d)", p.MinSamples, p.Window))
	}
	if p.Warmup < 0 {
		errs = append(errs, fmt.Errorf("hedge: Percentile.Warmup = %v is negative: use a delay > 0, or 0 for no hedging until warm", p.Warmup))
	}
	if p.Floor < 0 {
		errs = append(errs, fmt.Errorf("hedge: Percentile.Floor = %v is negative: use 0 or more", p.Floor))
	}
	if p.Ceiling < 0 {
		errs = append(errs, fmt.Errorf("hedge: Percentile.Ceiling = %v is negative: use 0 for no ceiling, or a delay", p.Ceiling))
	}
	if p.Ceiling > 0 && p.Ceiling < p.Floor {
		errs = append(errs, fmt.Errorf("hedge: Percentile.Ceiling %v is below Floor %v: raise the ceiling or lower the floor", p.Ceiling, p.Floor))
	}
	return errors.Join(errs...)
}

// newEstimator returns fresh state for one operation class.
func (p Percentile) newEstimator() decide.Estimator { return p.estimator() }

// estimator returns the state of a live percentile delay. It panics if p
// is not valid; New checks it first.
func (p Percentile) estimator() *percentileEstimator {
	if err := p.validate(); err != nil {
		panic(err)
	}
	p = p.withDefaults()
	w, err := quantile.NewWindow(p.Window, p.P/100)
	if err != nil {
		panic(err) // unreachable after validate
	}
	e := &percentileEstimator{cfg: p, w: w}
	e.cur.Store(int64(e.clamp(p.Warmup, true)))
	return e
}

// percentileEstimator is the state of a [Percentile] delay. Observe takes a
// mutex; Delay is a single atomic load, so the hot path of a request never
// waits on the lock.
type percentileEstimator struct {
	cfg Percentile
	cur atomic.Int64 // the delay in force, in nanoseconds

	mu   sync.Mutex
	w    *quantile.Window
	seen int
	q    float64 // the live percentile (Hedger.SetLive), a fraction; 0: cfg.P's, which w tracks
}

func (e *percentileEstimator) clamp(d time.Duration, warm bool) time.Duration {
	if warm && d == 0 {
		return Never
	}
	if d < e.cfg.Floor {
		d = e.cfg.Floor
	}
	if e.cfg.Ceiling > 0 && d > e.cfg.Ceiling {
		d = e.cfg.Ceiling
	}
	return d
}

// Delay returns the delay in force. It does not use now.
func (e *percentileEstimator) Delay(time.Duration) time.Duration {
	return time.Duration(e.cur.Load())
}

// Observe records one latency and updates the delay in force. It does not
// allocate.
func (e *percentileEstimator) Observe(_, latency time.Duration) {
	e.mu.Lock()
	e.w.Add(int64(latency))
	if e.seen < e.cfg.MinSamples {
		e.seen++
	}
	if e.seen >= e.cfg.MinSamples {
		e.cur.Store(int64(e.clamp(e.estimate(), false)))
	}
	e.mu.Unlock()
}

// Samples returns how many latencies the window holds now.
func (e *percentileEstimator) Samples() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.w.Len()
}
