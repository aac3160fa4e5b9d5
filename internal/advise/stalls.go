package advise

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tailcut/hedge/internal/sim"
)

// StallFit is the stall process fitted to a sample for the stalled
// queueing estimate ("queue-stalls"): servers that stop now and then, for
// stretches of exponential length, each on its own schedule.
//
// The sample is split at Threshold: latencies above it are stall-slow,
// the rest ordinary. The ordinary ones are the service times of the
// simulated servers; Share and Mean are the stall process that, simulated
// without hedging on the same servers, load and routing, makes as many
// requests stall-slow as the sample has (SlowShare), as slow on average
// (SlowExcess).
type StallFit struct {
	// Threshold splits the sample: the bottom of the valley below the
	// highest plateau of its density, where it no longer falls fast (at
	// most fourfold from one doubling of latency to the next, from 4 x
	// p50 up).
	Threshold time.Duration
	// Slow is the number of stall-slow latencies (above Threshold),
	// SlowShare their share of the sample, and SlowExcess their mean
	// latency beyond Threshold.
	Slow       int
	SlowShare  float64
	SlowExcess time.Duration
	// OrdinaryMean is the mean of the other latencies.
	OrdinaryMean time.Duration
	// Share is the fitted long-run fraction of time a server is stopped,
	// and Mean the fitted mean length of a stop (sim.Config's StallShare
	// and StallMean).
	Share float64
	Mean  time.Duration
	// Converged says that the fit's simulation reproduced SlowShare and
	// SlowExcess within 5%; otherwise the fit is the closest of its
	// rounds, and the estimate is rougher.
	Converged bool
}

// minStallSlow is the fewest stall-slow latencies the fit accepts: with
// fewer, the sample shows too few stalls to tell their share and length.
const minStallSlow = 20

// stoppedSlowdown is the simulated servers' slowdown in a stall: so large
// that a stalled server does no work to speak of, and its requests wait
// out the stall.
const stoppedSlowdown = 1e6

// stallThreshold returns the latency above which the sample's latencies
// (xs, ascending) are taken to be stall-slow, or ok false when the sample
// shows no plateau of slow latencies.
//
// Ordinary latencies thin out fast beyond the median: from one doubling
// of latency to the next, beyond four times the median, their density
// falls more than tenfold for exponential service (Exp(1): the bin
// [4m, 8m) holds a seventh of the bin before it, the next one a
// hundredth), and four- to sixfold even for a log-normal of log-sd 1. The
// latencies a stall made slow are spread over the length of a stall (a
// request meets a stall at some moment of it), a plateau whose density
// falls slowly: not at all for stalls of fixed length, and by a factor
// e^(x/mean) for exponential ones. So the sample is cut into bins
// [p50·2^k, p50·2^(k+1)), k >= 1, and a bin from the second on (4 x p50
// and up) is flat when it holds at least 10 latencies and at least half
// as many as the bin before it: a density that falls by at most four
// times over a doubling. A run of flat bins is a plateau; the stalls are
// the highest plateau with at least minStallSlow latencies above its
// start (the slowest stretch of slowness the sample shows: shorter
// bursts below it, such as a machine's scheduling delays, stay among the
// ordinary latencies), or, without one, the lowest plateau, with too few
// to fit. A sparse plateau's first bins may hold fewer than 10 latencies,
// so the threshold is the bottom of the valley below it: the lower edge
// of the bin, from 4 x p50 up to the plateau's start, that holds the
// fewest latencies (the highest of equals). A sample whose bins only thin
// out fast (noise, with no stalls) has no plateau.
func stallThreshold(xs []float64) (float64, bool) {
	p50 := quantileOf(xs, 0.5)
	if !(p50 > 0) {
		return 0, false
	}
	top := xs[len(xs)-1]
	type bin struct {
		lo   float64
		n    int
		flat bool
	}
	var bins []bin
	prev := above(xs, 2*p50) - above(xs, 4*p50)
	for lo := 4 * p50; lo <= top; lo *= 2 {
		n := above(xs, lo) - above(xs, 2*lo)
		bins = append(bins, bin{lo, n, n >= 10 && 2*n >= prev})
		prev = n
	}
	start := -1 // the bin where the chosen plateau starts
	for i := len(bins) - 1; i >= 0; i-- {
		if bins[i].flat && (i == 0 || !bins[i-1].flat) {
			start = i
			if above(xs, bins[i].lo) >= minStallSlow {
				break
			}
		}
	}
	if start < 0 {
		return 0, false
	}
	valley := start
	for i := start - 1; i >= 0; i-- {
		if bins[i].n < bins[valley].n {
			valley = i
		}
	}
	return bins[valley].lo, true
}

// stallWorld is the stall process of a queueing run, in the simulator's
// units (one unit is the sample's mean latency); a zero share means none.
type stallWorld struct {
	share, mean float64
}

// configure sets c's world: sim.Noise without stalls, sim.Stalls with
// servers that stop.
func (w stallWorld) configure(c *sim.Config) {
	c.World = sim.Noise
	if w.share > 0 {
		c.World, c.StallShare, c.StallMean, c.StallSlowdown = sim.Stalls, w.share, w.mean, stoppedSlowdown
	}
}

// fitStalls fits the stall process to the sample (e, ascending, in ns) for
// the system m, and returns it with the ordinary latencies, or a nil fit
// and a note saying why the sample shows no stalls to fit.
//
// The split is stallThreshold's. Were requests placed at random, a
// request would meet a stalled server as often as servers are stalled,
// and the share of stall-slow requests would be the share of time
// stalled; but placement avoids busy servers (two-choice, as the library
// picks), and a stalled server soon holds a request, so it catches far
// fewer: in the simulator's stalls world at load 0.3, about one request in
// eight of those a random placement would send it. Nor is the mean excess
// the mean stall: a long stall catches more requests, and they queue
// behind one another. So the fit simulates: it runs the script without
// hedging, with the ordinary latencies as service times, on servers that
// stop for exponential stretches (sim.Stalls, fresh per copy), and scales
// the share of time stopped and the mean stop by the ratios of the
// sample's stall-slow share and mean excess beyond the threshold to the
// simulated ones, until both agree within 3% (at most 12 rounds; the
// closest round is kept, and counts as converged within 5%). It
// starts from the share of stall-slow requests and their mean excess,
// which is what an exponential stop met at a random moment leaves to wait
// (its residual has the stop's own mean).
//
// A stop of fixed length L leaves a request that meets it at a random
// moment a residual uniform on [0, L], with mean L/2, where an
// exponential stop leaves one with its own mean: fitted with exponential
// stops, fixed ones come out shorter, at half to three quarters of their
// length (hedge bench's 50 ms stalls on 3 replicas fit as 22 to 36 ms in
// five runs), and more often, as the share of time stopped follows from
// matching the stall-slow share (0.8 to 1.2% for the bench's 2%).
func fitStalls(ctx context.Context, e *empirical, m QueueModel) (*StallFit, []float64, string, error) {
	xs := e.xs
	t, ok := stallThreshold(xs)
	if !ok {
		return nil, nil, "No stalled queueing estimate: the sample's slow latencies thin out without a plateau, so it shows no stalls to fit.", nil
	}
	cut := len(xs) - above(xs, t)
	ord, slow := xs[:cut], xs[cut:]
	if len(slow) < minStallSlow {
		return nil, nil, fmt.Sprintf("No stalled queueing estimate: %d latencies lie above %v, the bottom of the valley below the plateau of the sample's density: too few (fewer than %d) to fit stalls.", len(slow), round(time.Duration(t)), minStallSlow), nil
	}
	var ex, om float64
	for _, x := range slow {
		ex += x - t
	}
	for _, x := range ord {
		om += x
	}
	ex /= float64(len(slow))
	om /= float64(len(ord))
	fit := &StallFit{
		Threshold: time.Duration(t), Slow: len(slow), SlowShare: float64(len(slow)) / float64(len(xs)),
		SlowExcess: time.Duration(ex), OrdinaryMean: time.Duration(om),
	}
	unit := e.mean()
	work := m.Load * om / unit // the utilisation of the ordinary work alone
	if work >= 0.9 {
		return nil, nil, fmt.Sprintf("No stalled queueing estimate: the ordinary latencies alone load the servers to %.3g, leaving no room for stalls.", work), nil
	}
	maxShare := 0.9 * (1 - work) // keep the stalled servers below capacity
	sc := m.scriptFrom(ord, unit, Fresh)
	tu, exu := t/unit, ex/unit
	w := stallWorld{share: min(fit.SlowShare, maxShare), mean: max(exu, 1e-3)}
	best, bestDev := w, math.Inf(1)
	var s sim.Simulator
	for range 12 {
		if err := ctx.Err(); err != nil {
			return nil, nil, "", err
		}
		n, sum := 0, 0.0
		s.Done = func(c sim.Completion) {
			if c.Latency > tu {
				n++
				sum += c.Latency - tu
			}
		}
		c := sim.DefaultConfig()
		w.configure(&c)
		c.Routing, c.Servers, c.Load, c.Seed, c.Strategy = sim.TwoChoice, m.Servers, work, m.Seed, sim.None
		if _, err := s.RunScriptContext(ctx, c, sc); err != nil {
			return nil, nil, "", fmt.Errorf("fitting stalls: %w", err)
		}
		if n == 0 {
			// No simulated request met a stall: stop more often.
			w.share = min(4*w.share, maxShare)
			continue
		}
		rs := fit.SlowShare / (float64(n) / float64(len(sc.Requests)))
		rm := exu / (sum / float64(n))
		if dev := max(math.Abs(rs-1), math.Abs(rm-1)); dev < bestDev {
			best, bestDev = w, dev
		}
		if bestDev <= 0.03 {
			break
		}
		w.share = min(w.share*rs, maxShare)
		w.mean *= rm
	}
	fit.Converged = bestDev <= 0.05
	fit.Share, fit.Mean = best.share, time.Duration(best.mean*unit)
	return fit, ord, "", nil
}

// stallAssumes states what the stalled queueing estimate takes for
// granted, with the fitted numbers.
func stallAssumes(f *StallFit) []string {
	conv := ""
	if !f.Converged {
		conv = " (the fit came no closer than 5% in 12 rounds: read it as rough)"
	}
	return []string{
		fmt.Sprintf("The slowness lives in the servers, in stretches of time: the %d latencies above %v (%.2f%% of the sample, %v beyond it on average), the bottom of the valley below the plateau of the sample's density, are requests a stall made slow; latencies alone cannot tell that from big requests.", f.Slow, round(f.Threshold), 100*f.SlowShare, round(f.SlowExcess)),
		fmt.Sprintf("Each server stops on its own schedule, %.2f%% of the time, for exponential stretches of mean %v%s: the process that, simulated without hedging, makes as many requests as slow. Its requests wait out the stop; a copy sent to a server not stopped escapes. (Stalls of one fixed length L fit as shorter ones, of mean L/2 to 3L/4.)", 100*f.Share, round(f.Mean), conv),
		fmt.Sprintf("Every copy draws its own service time from the other latencies (mean %v). Informative, not among the estimates the recommendation is judged by.", round(f.OrdinaryMean)),
	}
}

// queueStalls fits stalls to the sample and runs the stalled queueing
// estimate on them: the rows and the default line, on the ordinary
// latencies as fresh sizes per copy. Without stalls to fit, it returns a
// nil fit and a note saying why.
func queueStalls(ctx context.Context, e *empirical, m QueueModel, choices []Choice, lag time.Duration) (fit *StallFit, note string, today Percentiles, rows []Outcome, def Outcome, err error) {
	fit, ord, note, err := fitStalls(ctx, e, m)
	if err != nil || fit == nil {
		return nil, note, today, nil, def, err
	}
	unit := e.mean()
	w := stallWorld{share: fit.Share, mean: float64(fit.Mean) / unit}
	today, rows, def, err = queueIn(ctx, m, w, m.scriptFrom(ord, unit, Fresh), unit, choices, lag)
	return fit, "", today, rows, def, err
}
