package advise

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"
)

// Sizes says how the queueing estimate draws the work of a request's
// copies from the sample.
type Sizes int

const (
	// Fresh: every copy draws its own size from the sample, as if a slow
	// request were slow because of where and when it ran.
	Fresh Sizes = iota
	// Shared: a request's copies share one size, as if a slow request
	// were slow because of what it asks for; a copy is then as slow as the
	// original, wherever it runs.
	Shared
	// Stalled: every copy draws its own size from the sample's ordinary
	// latencies, on servers that stop now and then, as fitted to the
	// sample's stall-slow latencies (StallFit): a slow request is slow
	// because its server stalled, and a copy elsewhere escapes.
	Stalled
)

// String returns "fresh", "shared" or "stalls".
func (s Sizes) String() string {
	switch s {
	case Shared:
		return "shared"
	case Stalled:
		return "stalls"
	}
	return "fresh"
}

// QueueModel is the simulated system of the queueing estimate.
type QueueModel struct {
	// Load is the utilisation of the servers without hedging, in (0, 1):
	// the arrival rate times the mean latency over Servers.
	Load float64
	// Servers is the number of single-slot FCFS servers (replicas times
	// the requests each serves at once).
	Servers int
	// Requests is the number of simulated requests per run.
	Requests int
	// Seed seeds the arrivals and the draws of sizes.
	Seed uint64
}

// maxQueueRequests bounds QueueModel.Requests: Simulator.RunScript holds
// the whole script in memory (about 60 bytes a request).
const maxQueueRequests = 2_000_000

// validate reports a mistake in m.
func (m QueueModel) validate() error {
	switch {
	case !(m.Load > 0 && m.Load < 1):
		return fmt.Errorf("load %v: use a utilisation in (0, 1), such as 0.5", m.Load)
	case m.Servers < 2 || m.Servers > 10000:
		return fmt.Errorf("servers %d: use 2 to 10000 (a hedge needs another server)", m.Servers)
	case m.Requests < MinSample || m.Requests > maxQueueRequests:
		return fmt.Errorf("simulated requests %d: use %d to %d", m.Requests, MinSample, maxQueueRequests)
	}
	return nil
}

// script builds the scenario of the queueing estimate: Poisson arrivals
// at m.Load, sizes drawn uniformly from the sample in units of its mean
// (so that one time unit is the mean latency), one per copy (Fresh) or one
// per request (Shared).
func (m QueueModel) script(e *empirical, sizes Sizes) sim.Script {
	return m.scriptFrom(e.xs, e.mean(), sizes)
}

// scriptFrom is script with sizes drawn from xs, in units of mean.
func (m QueueModel) scriptFrom(xs []float64, mean float64, sizes Sizes) sim.Script {
	r := rand.New(rand.NewPCG(m.Seed, 0xad51))
	lambda := m.Load * float64(m.Servers)
	per := 1
	if sizes == Fresh {
		per = 2
	}
	all := make([]float64, per*m.Requests)
	reqs := make([]sim.ScriptedRequest, m.Requests)
	t := 0.0
	draw := func() float64 {
		// The simulator needs positive work; a zero latency (a clock
		// too coarse) becomes a sliver.
		return math.Max(xs[r.IntN(len(xs))]/mean, 1e-9)
	}
	for i := range reqs {
		t += r.ExpFloat64() / lambda
		sz := all[i*per : (i+1)*per : (i+1)*per]
		for k := range sz {
			sz[k] = draw()
		}
		reqs[i] = sim.ScriptedRequest{At: t, Sizes: sz}
	}
	return sim.Script{Requests: reqs}
}

// queueRun is the simulator's measure of one configuration.
type queueRun struct {
	p                 Percentiles
	hedged, extraWork float64
	delay             time.Duration // the mean hedge delay in force
}

// runQueue runs the script once in world w with cfg (nil: no hedging) and
// converts the results back to durations.
func runQueue(ctx context.Context, s *sim.Simulator, m QueueModel, w stallWorld, sc sim.Script, mean float64, cfg *hedge.Config) (queueRun, error) {
	c := sim.DefaultConfig()
	c.Routing, c.Servers, c.Load, c.Seed = sim.TwoChoice, m.Servers, m.Load, m.Seed
	w.configure(&c)
	if w.share > 0 {
		// RunScript checks the load against the stalled servers'
		// capacity only: the script's arrivals and sizes set the real one.
		c.Load = min(m.Load, 0.9*c.Capacity())
	}
	c.Strategy = sim.None
	if cfg != nil {
		c.Strategy, c.Hedge = sim.Default, cfg
	}
	res, err := s.RunScriptContext(ctx, c, sc)
	if err != nil {
		return queueRun{}, fmt.Errorf("simulating: %w", err)
	}
	d := func(x float64) time.Duration { return time.Duration(math.Round(x * mean)) }
	return queueRun{
		p:         Percentiles{P50: d(res.P50), P99: d(res.P99), P999: d(res.P999)},
		hedged:    res.HedgedFraction,
		extraWork: res.ExtraWork,
		delay:     d(res.Delay),
	}, nil
}

// queueDefault predicts the library's zero Config (hedge.Config{}: a live
// p95 of primaries for delay, the default budget, and the spare-capacity
// and payoff rules, which look at the simulated replicas' queues and the
// hedges' outcomes) on the same script as the rows. Its delay follows the
// simulated latency, so it is no fixed choice: Choice.Delay is the mean
// delay it used.
func queueDefault(ctx context.Context, s *sim.Simulator, m QueueModel, w stallWorld, sc sim.Script, mean float64, today Percentiles) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	r, err := runQueue(ctx, s, m, w, sc, mean, &hedge.Config{})
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{Choice: Choice{Label: "default", Delay: r.delay}, Budget: true, HedgeRate: r.hedged, ExtraWork: r.extraWork}
	o.P50, o.P99, o.P999 = r.p.P50, r.p.P99, r.p.P999
	o.ratios(today)
	o.Verdict = Judge(o)
	return o, nil
}

// queueing predicts every choice with and without the budget by running
// the simulator on one script (common random numbers: every row meets the
// same arrivals and sizes). today is the simulated system's own unhedged
// percentiles.
func queueing(ctx context.Context, e *empirical, m QueueModel, sizes Sizes, choices []Choice, lag time.Duration) (today Percentiles, rows []Outcome, def Outcome, err error) {
	return queueIn(ctx, m, stallWorld{}, m.script(e, sizes), e.mean(), choices, lag)
}

// queueIn is queueing on the script sc in world w, one time unit being
// mean.
func queueIn(ctx context.Context, m QueueModel, w stallWorld, sc sim.Script, mean float64, choices []Choice, lag time.Duration) (today Percentiles, rows []Outcome, def Outcome, err error) {
	var s sim.Simulator
	base, err := runQueue(ctx, &s, m, w, sc, mean, nil)
	if err != nil {
		return today, nil, def, err
	}
	today = base.p
	for _, c := range choices {
		for _, budget := range []bool{false, true} {
			if err := ctx.Err(); err != nil {
				return today, nil, def, err
			}
			cfg := c.Config(budget)
			// The simulator's clock: one unit is sim.Unit, and here one
			// unit is the sample's mean latency.
			cfg.Delay = hedge.Fixed(time.Duration(math.Round(float64(c.Delay+lag) / mean * float64(sim.Unit))))
			r, err := runQueue(ctx, &s, m, w, sc, mean, &cfg)
			if err != nil {
				return today, nil, def, err
			}
			o := Outcome{Choice: c, Budget: budget, HedgeRate: r.hedged, ExtraWork: r.extraWork}
			o.P50, o.P99, o.P999 = r.p.P50, r.p.P99, r.p.P999
			o.ratios(today)
			o.Verdict = Judge(o)
			rows = append(rows, o)
		}
	}
	def, err = queueDefault(ctx, &s, m, w, sc, mean, today)
	return today, rows, def, err
}
