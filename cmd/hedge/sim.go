package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"
)

func init() { register(simCommand) }

var simCommand = &command{
	name:    "sim",
	summary: "simulate one point (world, routing, strategy, load) and print its measures",
	run:     runSim,
}

// simFlags are the flags of "hedge sim", parsed into a sim.Config.
type simFlags struct {
	world, routing, strategy, liveFeed string
	discipline                         string
	runs, workers                      int
	json                               bool
	cancel                             bool
	fanCall                            bool
	fan                                hedge.FanOut
	c                                  sim.Config
}

func runSim(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim", "--world W --routing R --strategy S --load L [flags]", stderr)
	d := sim.DefaultConfig()
	f := simFlags{c: d}
	fs.StringVar(&f.world, "world", "noise", "why requests are slow: "+list(sim.Worlds()))
	fs.StringVar(&f.routing, "routing", "two-choice", "how copies choose a server: "+list(sim.Routings()))
	fs.StringVar(&f.discipline, "discipline", "fcfs", "how a server shares itself among its copies: "+list(sim.Disciplines())+" (ps: processor sharing, as threads share a machine)")
	fs.StringVar(&f.strategy, "strategy", "none", "when copies are sent: "+list(sim.Strategies())+" (default: the library's zero hedge.Config)")
	fs.StringVar(&f.liveFeed, "live-feed", "auto", "which latency feeds a live percentile: auto (the strategy's own rule), primary (the library's), client (the study's)")
	fs.Float64Var(&f.c.Load, "load", d.Load, "arrival rate over total service rate, in (0, 1)")
	fs.IntVar(&f.c.Requests, "requests", d.Requests, "requests per run, warm-up included")
	fs.IntVar(&f.runs, "runs", 4, "independent runs (the standard errors are across runs)")
	fs.IntVar(&f.c.Warmup, "warmup", -1, "requests discarded at the start of each run (-1: requests/10)")
	fs.Float64Var(&f.c.Delay, "delay", 0, "hedge delay in time units (hedge-fixed; for the p95 strategies it skips calibration)")
	fs.Float64Var(&f.c.Budget, "budget", d.Budget, "hedges per request allowed by hedge-quiet-budget")
	fs.Float64Var(&f.c.StallMean, "stall-mean", d.StallMean, "mean stalled stretch in time units (stalls, mixed)")
	fs.Float64Var(&f.c.SlowShare, "slow-share", d.SlowShare, "fraction of time every server is slowed down together (correlated)")
	fs.Float64Var(&f.c.SlowMean, "slow-mean", d.SlowMean, "mean slowed stretch in time units (correlated)")
	fs.Float64Var(&f.c.SlowFactor, "slow-factor", d.SlowFactor, "how many times slower every server is then (correlated)")
	fs.Float64Var(&f.c.SCV, "scv", d.SCV, "squared coefficient of variation of big-job sizes (bigjobs, mixed)")
	fs.Float64Var(&f.c.Sigma, "sigma", d.Sigma, "log-standard-deviation of sizes (lognormal)")
	fs.BoolVar(&f.c.SameSize, "same-size", false, "lognormal: copies share the request's size instead of a fresh draw")
	fs.BoolVar(&f.cancel, "cancel", true, "cancel the losers (false: they run to completion)")
	fs.Float64Var(&f.c.CancelDelay, "cancel-delay", 0, "tied: delay before a starting copy cancels the others")
	fs.IntVar(&f.c.MaxAttempts, "max-attempts", d.MaxAttempts, fmt.Sprintf("copies per request, 1 to %d", sim.MaxAttempts))
	fs.IntVar(&f.c.Servers, "servers", d.Servers, "number of servers")
	fs.IntVar(&f.c.Fanout, "fanout", 1, "sub-requests per request")
	fs.IntVar(&f.c.FanoutNeed, "fanout-need", 0, "sub-requests a request waits for (0: all)")
	fs.IntVar(&f.c.Shards, "shards", 0, "split the servers into N replica sets of servers/N each; leaf i of a request goes to shard i mod N, and its copies only to that shard's servers (0 or 1: any server serves any leaf; servers and fanout must be multiples of N)")
	fs.BoolVar(&f.fanCall, "fan-call", false, "run each fan-out request as hedge.DoFan does: a budget and a cap on its leaves' hedges, and the sibling trigger (hedging strategies; the --fan-* flags set its hedge.FanOut)")
	fs.IntVar(&f.fan.Hedges, "fan-hedges", 0, "with --fan-call: the most hedges a request's leaves send in all (FanOut.Hedges; 0: twice the leaves one stuck replica holds, negative: none)")
	fs.IntVar(&f.fan.InFlight, "fan-in-flight", 0, "with --fan-call: the most hedges of a request's leaves in flight at once (FanOut.InFlight; 0: --fan-hedges)")
	fs.Float64Var(&f.fan.Straggle, "fan-straggle", 0, "with --fan-call: the sibling trigger's multiple (FanOut.Straggle; 0: 3, negative: no trigger)")
	fs.Float64Var(&f.fan.Mark, "fan-mark", 0, "with --fan-call: the share of the needed leaves that answer before the sibling trigger starts (FanOut.Mark; 0: 0.75)")
	fs.IntVar(&f.fan.Canaries, "fan-canaries", 0, "with --fan-call: leaves sent first; the others go once they have all answered (FanOut.Canaries)")
	fs.IntVar(&f.c.Clients, "clients", 1, "clients sharing the servers, each with its own Hedger (its own delay, budget and view of its own requests in flight)")
	fs.Float64Var(&f.c.ClientSkew, "client-skew", 0, "how requests split among the clients: 0 evenly, s > 0 client i's share proportional to 1/(i+1)^s")
	fs.BoolVar(&f.c.IdleOnlyCopies, "idle-only-copies", false, "servers admit a hedge only when idle, and refuse it at once otherwise (it is not sent elsewhere); the simpler form of --low-priority-copies")
	fs.BoolVar(&f.c.LoadReports, "load-reports", false, "servers report their load (copies waiting and in service, answers so far) with every answer, and each client's spare-capacity rule reads a server's last report while it is fresh (a hedge delay), in place of its own view (the default strategy)")
	fs.BoolVar(&f.c.LowPriorityCopies, "low-priority-copies", false, "servers run hedges only on capacity no primary wants: a copy waits behind every primary, and an arriving primary takes the server from a running copy, which starts over later (fcfs servers, not tied)")
	fs.Uint64Var(&f.c.Seed, "seed", 1, "seed of the first run; later runs derive theirs from it")
	fs.BoolVar(&f.json, "json", false, "print the measures as a JSON object")
	fs.IntVar(&f.workers, "workers", 0, "parallel runs (0: GOMAXPROCS)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	c, err := f.config(fs)
	if err != nil {
		return usageError(stderr, "sim", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if c.Strategy.NeedsCalibration() && !flagSet(fs, "delay") {
		d, err := sim.Calibrate(ctx, c, 1, f.workers)
		if err != nil {
			return failed(stderr, err)
		}
		c.Delay = sim.Units(d)
		if !f.json {
			fmt.Fprintf(stdout, "calibration: p95 of unhedged latency at load %g = %.4g time units\n", c.Strategy.CalibrationLoad(c.Load), c.Delay)
		}
	}
	s, err := sim.RunPoint(ctx, c, f.runs, f.workers)
	if err != nil {
		return failed(stderr, err)
	}
	el := time.Since(start)
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s.Result()); err != nil {
			return failed(stderr, err)
		}
		return exitOK
	}
	printSummary(stdout, s, el)
	return exitOK
}

// config validates the flags and builds the configuration, before any work.
func (f *simFlags) config(fs *flag.FlagSet) (sim.Config, error) {
	c := f.c
	var errs []error
	var err error
	if c.World, err = sim.ParseWorld(f.world); err != nil {
		errs = append(errs, err)
	}
	if c.Discipline, err = sim.ParseDiscipline(f.discipline); err != nil {
		errs = append(errs, err)
	}
	if c.LiveFeed, err = sim.ParseFeed(f.liveFeed); err != nil {
		errs = append(errs, err)
	}
	if c.Routing, err = sim.ParseRouting(f.routing); err != nil {
		errs = append(errs, err)
	}
	if c.Strategy, err = sim.ParseStrategy(f.strategy); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	c.NoCancel = !f.cancel
	if f.fanCall {
		fo := f.fan
		c.FanCall = &fo
	} else {
		for _, name := range []string{"fan-hedges", "fan-in-flight", "fan-straggle", "fan-mark", "fan-canaries"} {
			if flagSet(fs, name) {
				errs = append(errs, fmt.Errorf("--%s sets the fan-out requests' decision: add --fan-call", name))
			}
		}
	}
	if f.fanCall && c.Fanout < 2 {
		errs = append(errs, errors.New("--fan-call is for fan-out requests: add --fanout N with N > 1"))
	}
	if c.Warmup == -1 {
		c.Warmup = c.Requests / 10
	}
	if f.runs < 1 {
		errs = append(errs, fmt.Errorf("--runs %d: use at least 1", f.runs))
	}
	if f.workers < 0 {
		errs = append(errs, fmt.Errorf("--workers %d: use 0 (all cores) or more", f.workers))
	}
	if c.Strategy == sim.HedgeFixed && !flagSet(fs, "delay") {
		errs = append(errs, errors.New("hedge-fixed needs --delay D (in mean service times)"))
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func failed(stderr io.Writer, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "hedge sim: interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "hedge sim: %v\n", err)
	return exitFailure
}

func list(names []string) string { return strings.Join(names, ", ") }

func printSummary(w io.Writer, s sim.Summary, el time.Duration) {
	c := s.Config
	fmt.Fprintln(w, c.String())
	fmt.Fprintf(w, "%d runs x %d requests (%d warm-up) in %s; time unit = mean service time\n\n",
		len(s.Runs), c.Requests, c.Warmup, el.Round(time.Millisecond))
	row := func(name string, e sim.Estimate, pct bool) {
		if pct {
			fmt.Fprintf(w, "  %-18s %10.3f%%  ± %.3f%%\n", name, 100*e.Value, 100*e.SE)
			return
		}
		fmt.Fprintf(w, "  %-18s %10.4g   ± %.2g\n", name, e.Value, e.SE)
	}
	fmt.Fprintf(w, "  %-18s %10s   %s\n", "measure", "value", "SE across runs")
	row("mean", s.Mean, false)
	row("p50", s.P50, false)
	row("p95", s.P95, false)
	row("p99", s.P99, false)
	row("p99.9", s.P999, false)
	if c.Fanout > 1 {
		row("leaf p50", s.LeafP50, false)
		row("leaf p99", s.LeafP99, false)
		row("leaf p99.9", s.LeafP999, false)
		row("copies/request", s.Copies, false)
	}
	if c.Strategy != sim.None {
		row("hedged fraction", s.HedgedFraction, true)
	}
	row("extra work", s.ExtraWork, true)
	row("utilisation", s.Utilisation, true)
	if c.World.HasStalls() {
		row("stalled fraction", s.StalledFraction, true)
	}
	switch {
	case c.Strategy == sim.HedgeP95Live || c.Strategy == sim.Default:
		row("delay (mean)", s.Delay, false)
	case c.Strategy.Hedges():
		row("delay", sim.Estimate{Value: c.Delay}, false)
	}
	if c.Strategy == sim.TiedSpare {
		row("run by the spare", s.SpareMoved, true)
	} else if c.Strategy != sim.None {
		row("both copies ran", s.MultiStarted, true)
	}
	if c.LowPriorityCopies && c.Strategy != sim.None {
		row("copies preempted", s.Preempted, true)
	}
	if c.IdleOnlyCopies && c.Strategy != sim.None {
		row("refused by servers", s.RefusedByServer, true)
	}
	if c.FanCall != nil && c.Fanout > 1 && c.Strategy.Hedges() {
		row("fan hedges/request", s.FanExtra, false)
		row("fan hedges/leaf", sim.Estimate{Value: s.FanExtra.Value / float64(c.Fanout), SE: s.FanExtra.SE / float64(c.Fanout)}, true)
		row("fan refused/request", s.FanRefused, false)
		fmt.Fprintf(w, "  %-18s %10d   (largest over runs)\n", "fan most hedges", s.FanMost)
		fmt.Fprintf(w, "  %-18s %10d   (largest over runs)\n", "fan most in flight", s.FanPeak)
	}
}
