package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/internal/recovery"
)

// RecoveryOptions configures a recovery comparison: worker-limited HTTP
// replicas (package tied's queue, no ties) under an open-loop Poisson
// load, in which every replica's work runs Factor times slower for Slow,
// all at once, and then normal again. At a load above 1/Factor of the
// capacity the queues grow during the slowdown and must drain after it;
// the comparison asks whether a hedging client's copies slow the draining
// or keep the servers overloaded after the cause is gone (a metastable
// collapse).
type RecoveryOptions struct {
	// Replicas, Workers and MaxQueue are the servers'.
	Replicas, Workers, MaxQueue int
	// Service is how long a request holds its worker when no slowdown is
	// on.
	Service time.Duration
	// Loads are the offered loads, as fractions of the servers' normal
	// capacity (Replicas * Workers / Service).
	Loads []float64
	// Configs are the configurations, by the names of LookupStrategy.
	Configs []string
	// Warmup runs before the measured span, not recorded. The measured
	// span is Before, then Slow (the slowdown), then After.
	Warmup, Before, Slow, After time.Duration
	// Factor is the slowdown's factor.
	Factor float64
	// Window is the width of the windows, by intended start time, in
	// which latency and hedges are counted.
	Window time.Duration
	// Tolerance and Settle judge the recovery: it comes when Settle
	// windows in a row have a mean latency within Tolerance of the mean
	// before the slowdown.
	Tolerance float64
	Settle    int
	// Repeats is how many times each configuration runs at each load
	// (each repeat with its own arrivals, shared by the configurations);
	// the report gives medians.
	Repeats int
	// Seed seeds the arrivals.
	Seed uint64
	// Timeout bounds each request.
	Timeout time.Duration
}

// Defaults returns o with every zero field given its default: 3 replicas
// of 2 workers and a queue of 4,096, 5 ms per request, loads 0.3 and 0.5,
// the configurations none-two-choice, default and hedge-live-plain, 1 s of
// warm-up, 2 s before a 1 s slowdown of 3x and 4 s after it, windows of
// 100 ms, recovery within 20% for 3 windows, 3 repeats, seed 1, 5 s per
// request.
func (o RecoveryOptions) Defaults() RecoveryOptions {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 4096
	}
	if o.Service == 0 {
		o.Service = 5 * time.Millisecond
	}
	if len(o.Loads) == 0 {
		o.Loads = []float64{0.3, 0.5}
	}
	if len(o.Configs) == 0 {
		o.Configs = []string{"none-two-choice", DefaultStrategy, "hedge-live-plain"}
	}
	if o.Warmup == 0 {
		o.Warmup = time.Second
	}
	if o.Before == 0 {
		o.Before = 2 * time.Second
	}
	if o.Slow == 0 {
		o.Slow = time.Second
	}
	if o.After == 0 {
		o.After = 4 * time.Second
	}
	if o.Factor == 0 {
		o.Factor = 3
	}
	if o.Window == 0 {
		o.Window = 100 * time.Millisecond
	}
	if o.Tolerance == 0 {
		o.Tolerance = 0.2
	}
	if o.Settle == 0 {
		o.Settle = 3
	}
	if o.Repeats == 0 {
		o.Repeats = 3
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	return o
}

// Validate reports every field of o (after Defaults) that cannot run.
func (o RecoveryOptions) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if o.Replicas < 2 || o.Workers < 1 || o.MaxQueue < 1 {
		bad("%d replicas of %d workers and a queue of %d: use at least 2 replicas, 1 worker and a queue of 1", o.Replicas, o.Workers, o.MaxQueue)
	}
	for _, l := range o.Loads {
		if !(l > 0 && l < 1) {
			bad("load %v: use a fraction of the capacity in (0, 1)", l)
		}
	}
	for _, c := range o.Configs {
		if _, err := LookupStrategy(c); err != nil {
			errs = append(errs, err)
		}
	}
	if !(o.Factor >= 1) || math.IsInf(o.Factor, 0) {
		bad("slowdown factor %v: use a factor >= 1, e.g. 3", o.Factor)
	}
	if o.Window <= 0 || o.Before < 2*o.Window || o.After < time.Duration(o.Settle+1)*o.Window {
		bad("window %v with %v before and %v after the slowdown: use a positive window, at least two windows before and %d after", o.Window, o.Before, o.After, o.Settle+1)
	}
	if !(o.Tolerance > 0) || o.Settle < 1 || o.Repeats < 1 {
		bad("tolerance %v, settle %d, repeats %d: use a positive tolerance and at least one window and one repeat", o.Tolerance, o.Settle, o.Repeats)
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench: recovery: %w", errors.Join(errs...))
	}
	return nil
}

// RecoveryResult is a configuration's recovery at one load: medians over
// the repeats, and the windows of the median repeat (by recovery time).
type RecoveryResult struct {
	Config string
	Load   float64
	Rate   float64 // arrivals per second
	// Baseline is the mean latency of the calls that started before the
	// slowdown; Peak the largest mean of a window.
	Baseline, Peak time.Duration
	// Recovered counts the repeats in which latency came back within the
	// tolerance before the run ended, and RecoveredAfter is the median,
	// over those, of how long after the slowdown ended.
	Recovered      int
	Repeats        int
	RecoveredAfter time.Duration
	// HedgeBefore is the share of calls that sent a hedge before the
	// slowdown, HedgeDuring from its start until the recovery (or the end
	// of the run), HedgePeak the largest share in one window.
	HedgeBefore, HedgeDuring, HedgePeak float64
	// Errors counts failed calls.
	Errors int
	// Windows are the median repeat's.
	Windows []RecoveryWindowResult
}

// RecoveryWindowResult is one window of a run.
type RecoveryWindowResult struct {
	Start      time.Duration // since the start of the measured span
	Calls      int
	Mean       time.Duration
	HedgeShare float64
}

// RunRecovery runs the comparison on fresh replicas for each run, and
// reports each configuration at each load. progress, if not nil, gets a
// line per run.
func RunRecovery(ctx context.Context, o RecoveryOptions, progress io.Writer) ([]RecoveryResult, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var out []RecoveryResult
	for _, load := range o.Loads {
		for _, cfg := range o.Configs {
			var runs []recoveryRun
			for rep := range o.Repeats {
				r, err := runRecoveryOnce(ctx, o, load, cfg, DeriveSeed(o.Seed, "recovery", rep, int(load*1000)))
				if err != nil {
					return out, err
				}
				runs = append(runs, r)
				if progress != nil {
					after := "never"
					if r.recovered {
						after = r.after.Round(time.Millisecond).String()
					}
					fmt.Fprintf(progress, "recovery: load %.2f %s repeat %d/%d: baseline %v, peak %v, recovered after %s, hedged %.1f%% during\n",
						load, cfg, rep+1, o.Repeats, r.baseline.Round(10*time.Microsecond), r.peak.Round(time.Millisecond), after, 100*r.hedgeDuring)
				}
			}
			out = append(out, summariseRecovery(o, load, cfg, runs))
		}
	}
	return out, nil
}

// recoveryRun is one run's measurements.
type recoveryRun struct {
	baseline, peak, after               time.Duration
	recovered                           bool
	hedgeBefore, hedgeDuring, hedgePeak float64
	errors                              int
	windows                             []RecoveryWindowResult
}

func summariseRecovery(o RecoveryOptions, load float64, cfg string, runs []recoveryRun) RecoveryResult {
	res := RecoveryResult{Config: cfg, Load: load, Rate: load * float64(o.Replicas*o.Workers) / o.Service.Seconds(), Repeats: len(runs)}
	med := func(f func(recoveryRun) float64) float64 { return medianOf(runs, f) }
	res.Baseline = time.Duration(med(func(r recoveryRun) float64 { return float64(r.baseline) }))
	res.Peak = time.Duration(med(func(r recoveryRun) float64 { return float64(r.peak) }))
	res.HedgeBefore = med(func(r recoveryRun) float64 { return r.hedgeBefore })
	res.HedgeDuring = med(func(r recoveryRun) float64 { return r.hedgeDuring })
	res.HedgePeak = med(func(r recoveryRun) float64 { return r.hedgePeak })
	var afters []time.Duration
	for _, r := range runs {
		res.Errors += r.errors
		if r.recovered {
			res.Recovered++
			afters = append(afters, r.after)
		}
	}
	if len(afters) > 0 {
		slices.Sort(afters)
		res.RecoveredAfter = afters[len(afters)/2]
	}
	// The windows of the median run by recovery time (never counting as
	// the longest).
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	key := func(r recoveryRun) time.Duration {
		if !r.recovered {
			return math.MaxInt64
		}
		return r.after
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(key(runs[a]), key(runs[b])) })
	res.Windows = runs[idx[len(idx)/2]].windows
	return res
}

func runRecoveryOnce(ctx context.Context, o RecoveryOptions, load float64, cfg string, seed uint64) (recoveryRun, error) {
	bk, err := StartTiedHTTP(TiedBackendOptions{Replicas: o.Replicas, Workers: o.Workers, MaxQueue: o.MaxQueue, Secret: tiedSecret()})
	if err != nil {
		return recoveryRun{}, err
	}
	b := bk.(*TiedHTTPBackend)
	defer b.Close()

	st, err := LookupStrategy(cfg)
	if err != nil {
		return recoveryRun{}, err
	}
	hc, err := st.Config(StrategyOptions{})
	if err != nil {
		return recoveryRun{}, fmt.Errorf("bench: recovery: %s: %w", cfg, err)
	}
	hc.Replicas = len(b.urls)
	// Hedges are counted by when their call was meant to start: the
	// window of the call, which the attempt function knows.
	var (
		start  atomic.Int64 // the measured span's start, Unix ns; 0 in the warm-up
		mu     sync.Mutex
		hedged = map[int]int{}
	)
	hc.OnEvent = func(ev hedge.Event) {
		if s := start.Load(); s != 0 && ev.Kind == hedge.HedgeSent && !ev.Shadow {
			// The call's start is now less its elapsed time.
			at := time.Since(time.Unix(0, s)) - ev.Elapsed
			mu.Lock()
			hedged[int(at/o.Window)]++
			mu.Unlock()
		}
	}
	h, err := hedge.New(hc)
	if err != nil {
		return recoveryRun{}, fmt.Errorf("bench: recovery: %s: %w", cfg, err)
	}
	base, _ := NewCountingTransport()
	t, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: b.urls})
	if err != nil {
		return recoveryRun{}, err
	}
	defer t.CloseIdleConnections()
	url := b.urls[0] + "/work?us=" + strconv.FormatInt(o.Service.Microseconds(), 10)
	rate := load * float64(o.Replicas*o.Workers) / o.Service.Seconds()

	// Warm-up: the same rate, not recorded.
	get := func(ctx context.Context, _ int) error { return HTTPGet(ctx, t, url) }
	fire(ctx, Arrivals(DeriveSeed(seed, "warmup"), rate, o.Warmup, 0), o.Timeout, get, nil)

	// The slowdown, on every replica at once.
	span := o.Before + o.Slow + o.After
	slowCtx, stopSlow := context.WithCancel(ctx)
	defer stopSlow()
	var slowWG sync.WaitGroup
	begin := time.Now().Add(10 * time.Millisecond)
	start.Store(begin.UnixNano())
	for _, g := range b.gates {
		slowWG.Add(1)
		go func() {
			defer slowWG.Done()
			w := time.NewTimer(time.Until(begin.Add(o.Before)))
			defer w.Stop()
			select {
			case <-slowCtx.Done():
				return
			case <-w.C:
			}
			g.Slow(slowCtx, o.Factor, o.Slow)
		}()
	}
	nw := int((span + o.Window - 1) / o.Window)
	sums := make([]time.Duration, nw)
	counts := make([]int, nw)
	var errs atomic.Int64
	fireAt(ctx, begin, Arrivals(seed, rate, span, 0), o.Timeout, get, func(_ int, at, lat time.Duration, err error) {
		if err != nil {
			errs.Add(1)
			return
		}
		i := int(at / o.Window)
		sums[i] += lat
		counts[i]++
	})
	stopSlow()
	slowWG.Wait()

	r := recoveryRun{errors: int(errs.Load())}
	mu.Lock()
	defer mu.Unlock()
	var n, hb int
	var sum time.Duration
	before := int(o.Before / o.Window)
	for i := range before {
		n += counts[i]
		hb += hedged[i]
		sum += sums[i]
	}
	if n == 0 {
		return r, fmt.Errorf("bench: recovery: no call succeeded before the slowdown at load %v (%s)", load, cfg)
	}
	r.baseline = sum / time.Duration(n)
	r.hedgeBefore = float64(hb) / float64(n)
	limit := time.Duration(float64(r.baseline) * (1 + o.Tolerance))
	end := o.Before + o.Slow
	for i := range nw {
		w := RecoveryWindowResult{Start: time.Duration(i) * o.Window, Calls: counts[i]}
		if counts[i] > 0 {
			w.Mean = sums[i] / time.Duration(counts[i])
			w.HedgeShare = float64(hedged[i]) / float64(counts[i])
			r.peak = max(r.peak, w.Mean)
			r.hedgePeak = max(r.hedgePeak, w.HedgeShare)
		}
		r.windows = append(r.windows, w)
	}
	rec := recovery.First(0, nw, o.Settle,
		func(i int) bool { return time.Duration(i)*o.Window+o.Window > end },
		func(i int) bool { return counts[i] > 0 && sums[i]/time.Duration(counts[i]) <= limit })
	stop := nw
	if rec >= 0 {
		r.recovered = true
		r.after = max(0, time.Duration(rec)*o.Window-end)
		stop = rec
	}
	n, hb = 0, 0
	for i := before; i < stop; i++ {
		n += counts[i]
		hb += hedged[i]
	}
	if n > 0 {
		r.hedgeDuring = float64(hb) / float64(n)
	}
	return r, nil
}

// fire sends a call at each of the times at (since now), each on its own
// goroutine, and waits for them all; see fireAt.
func fire(ctx context.Context, at []time.Duration, timeout time.Duration, call func(ctx context.Context, i int) error, done func(i int, at, lat time.Duration, err error)) int {
	return fireAt(ctx, time.Now(), at, timeout, call, done)
}

// fireAt is the open-loop dispatch of the bench's own runners (RunTied,
// RunRecovery): call i goes, paced, at begin + at[i], each on its own
// goroutine with its own timeout, until the last or until ctx ends. It
// waits for every call sent and returns how many were. done, if not nil,
// is called under a lock with each call's index, its intended time, its
// latency from then, and its error.
func fireAt(ctx context.Context, begin time.Time, at []time.Duration, timeout time.Duration, call func(ctx context.Context, i int) error, done func(i int, at, lat time.Duration, err error)) int {
	p := &Pacer{Start: begin}
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	for i, a := range at {
		if ctx.Err() != nil {
			break
		}
		p.Wait(a)
		n++
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			err := call(cctx, i)
			cancel()
			if done != nil {
				lat := time.Since(begin.Add(a))
				mu.Lock()
				done(i, a, lat, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// WriteRecoveryTable writes results as a Markdown table.
func WriteRecoveryTable(w io.Writer, o RecoveryOptions, results []RecoveryResult) error {
	o = o.Defaults()
	fmt.Fprintf(w, "Every replica %gx slower for %v after %v; windows of %v; recovered = %d windows in a row within %.0f%% of the mean before; medians of %d repeats.\n\n",
		o.Factor, o.Slow, o.Before, o.Window, o.Settle, 100*o.Tolerance, o.Repeats)
	fmt.Fprintln(w, "| load | config | rate/s | mean before | peak window | recovered | recovered after | hedged before | hedged during | peak window hedged | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		after := "-"
		if r.Recovered > 0 {
			after = r.RecoveredAfter.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "| %.2f | %s | %.0f | %v | %v | %d/%d | %s | %.1f%% | %.1f%% | %.1f%% | %d |\n",
			r.Load, r.Config, r.Rate, r.Baseline.Round(10*time.Microsecond), r.Peak.Round(time.Millisecond),
			r.Recovered, r.Repeats, after, 100*r.HedgeBefore, 100*r.HedgeDuring, 100*r.HedgePeak, r.Errors)
	}
	return nil
}
