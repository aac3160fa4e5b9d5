package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// Unit is the wall-clock duration that one simulated time unit (one mean
// service time) stands for when simulated times are handed to the hedge
// policy types, which speak time.Duration: 1 unit = 1 ms = 1e6 ns. The
// choice only matters for resolution; the quantile window that backs a
// live percentile delay keeps about 0.8% relative error for values up to
// about 8.8 million units at this scale.
const Unit = time.Millisecond

// toDuration converts simulated time to a Duration for the hedge policies,
// rounding to the nearest nanosecond, halves away from zero: exactly
// math.Round, which the engine called several times per request. For
// 0.5 <= y < 2^52, y+0.5 is computed exactly or rounds within the same
// integer part, so truncating it is math.Round(y); smaller and other
// values (negative, huge, NaN) take math.Round itself.
func toDuration(x float64) time.Duration {
	y := x * float64(Unit)
	if y >= 0.5 && y < 1<<52 {
		return time.Duration(int64(y + 0.5))
	}
	if y >= 0 && y < 0.5 {
		return 0
	}
	return time.Duration(math.Round(y))
}

// fromDuration converts a Duration from a hedge policy back to simulated
// time.
func fromDuration(d time.Duration) float64 { return float64(d) / float64(Unit) }

// MaxAttempts is the largest number of copies one request may have: the
// library's own cap.
const MaxAttempts = hedge.HardMaxAttempts

// MaxClients is the most clients (Config.Clients) a run may have.
const MaxClients = 1 << 16

// World says why requests are slow: how sizes are drawn and whether servers
// stall.
type World int

// The worlds of the study, plus lognormal for the lab.
const (
	// Noise: every copy needs a fresh Exp(1) amount of work.
	Noise World = iota
	// Stalls: Exp(1) sizes shared by all copies; servers stall.
	Stalls
	// BigJobs: hyperexponential sizes (mean 1, SCV Config.SCV) shared by
	// all copies; no stalls.
	BigJobs
	// Mixed: BigJobs sizes on stalling servers.
	Mixed
	// LogNormal: lognormal sizes with mean 1 and log-sd Config.Sigma;
	// fresh per copy unless Config.SameSize.
	LogNormal
	// Correlated: Exp(1) sizes shared by all copies; every server slows
	// down together, by Config.SlowFactor for Config.SlowShare of the
	// time in stretches of mean Config.SlowMean (3x, 5% and 100 units by
	// default). It is the global slowdown in which every request looks as
	// if it needs a hedge, and copies only add load.
	Correlated
)

var worldNames = []string{"noise", "stalls", "bigjobs", "mixed", "lognormal", "correlated"}

// String returns the world's name as used on the command line and in
// results.json.
func (w World) String() string { return name(worldNames, int(w)) }

// ParseWorld parses a world name.
func ParseWorld(s string) (World, error) {
	i, err := parse("world", worldNames, s)
	return World(i), err
}

// HasStalls reports whether servers in the world stall.
func (w World) HasStalls() bool { return w == Stalls || w == Mixed }

// Discipline says how a server shares itself among the copies sent to it.
type Discipline int

// Disciplines.
const (
	// FCFS: a server serves one copy at a time, first come first served;
	// the others wait in its queue (the study's servers).
	FCFS Discipline = iota
	// PS: processor sharing: every copy sent to a server is in service at
	// once and they share its speed equally, as threads share a machine.
	// Nothing waits, so tied requests (which cancel on start of service)
	// do not apply, and neither does pool routing.
	PS
)

var disciplineNames = []string{"fcfs", "ps"}

// String returns the discipline's name.
func (d Discipline) String() string { return name(disciplineNames, int(d)) }

// ParseDiscipline parses a discipline name.
func ParseDiscipline(s string) (Discipline, error) {
	i, err := parse("discipline", disciplineNames, s)
	return Discipline(i), err
}

// Disciplines lists the valid discipline names.
func Disciplines() []string { return append([]string(nil), disciplineNames...) }

// Routing says how a copy chooses its server.
type Routing int

// Routings.
const (
	// TwoChoice: the less busy of two distinct random servers not holding a
	// copy of the request (hedge.Picker's default).
	TwoChoice Routing = iota
	// Random: a uniformly random server not holding a copy
	// (hedge.Picker{Random: true}).
	Random
	// LeastLoaded: the least busy server not holding a copy, ties at
	// random. hedge.Picker has no such mode, so the simulator scans.
	LeastLoaded
	// Pool: all servers share one FCFS queue (an M/G/c system); a free
	// server takes the head of the queue. Placement is trivial.
	Pool
)

var routingNames = []string{"two-choice", "random", "least-loaded", "pool"}

// String returns the routing's name.
func (r Routing) String() string { return name(routingNames, int(r)) }

// ParseRouting parses a routing name.
func ParseRouting(s string) (Routing, error) {
	i, err := parse("routing", routingNames, s)
	return Routing(i), err
}

// Strategy says when further copies are sent.
type Strategy int

// Strategies.
const (
	// None sends one copy.
	None Strategy = iota
	// HedgeFixed hedges after Config.Delay.
	HedgeFixed
	// HedgeP95PerLoad hedges after the p95 of unhedged latency at the
	// same world, routing and load. The study runner (or Calibrate) fills
	// Config.Delay with it.
	HedgeP95PerLoad
	// HedgeP95Quiet hedges after the p95 of unhedged latency at load 0.1,
	// filled into Config.Delay by the runner.
	HedgeP95Quiet
	// HedgeP95Live hedges after the live percentile of the last
	// Config.LiveWindow client-observed latencies.
	HedgeP95Live
	// HedgeQuietBudget is HedgeP95Quiet with a token-bucket budget of
	// Config.Budget hedges per request (burst Config.BudgetBurst).
	HedgeQuietBudget
	// Tied sends all copies at arrival; a copy starting service cancels
	// the others still waiting (after Config.CancelDelay). As in the
	// study's source, the copies go to distinct servers drawn uniformly
	// at random: with two-choice routing, one copy on each of the two
	// servers two-choice samples, whatever their queues.
	Tied
	// Default runs the hedge library's own configuration: Config.Hedge,
	// or, when it is nil, the zero hedge.Config that a Hedger gets by
	// default. Whatever that default is, this strategy follows it.
	Default
	// TiedTwoChoice is Tied with each copy placed by the routing itself
	// (with two-choice routing, the less busy of two servers drawn for
	// that copy: four servers looked at for two copies). It beats the
	// source's tied by 3 to 15% at high load, and is kept as a variant so
	// that the study's tied compares like with like.
	TiedTwoChoice
	// TiedSpare is the spare form of tied requests (package tied's
	// default, tied.FormSpare): the primary goes where the routing puts
	// it; when it must wait there, its spare, sent to a second replica
	// the routing picks, runs in its place if that replica's server is
	// idle, and is refused otherwise. Claims are answered at once and
	// the spare leaves with its primary (no gap): the model is of the
	// moves, not of the messages, which cost no service time here. One
	// copy of each request runs, so it is never more work than none.
	TiedSpare
)

var strategyNames = []string{"none", "hedge-fixed", "hedge-p95-per-load", "hedge-p95-quiet", "hedge-p95-live", "hedge-quiet-budget", "tied", "default", "tied-two-choice", "tied-spare"}

// String returns the strategy's name.
func (s Strategy) String() string { return name(strategyNames, int(s)) }

// ParseStrategy parses a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	i, err := parse("strategy", strategyNames, s)
	return Strategy(i), err
}

// IsTied reports whether the strategy sends tied requests.
func (s Strategy) IsTied() bool { return s == Tied || s == TiedTwoChoice }

// Hedges reports whether the strategy sends delayed copies.
func (s Strategy) Hedges() bool {
	return (s >= HedgeFixed && s <= HedgeQuietBudget) || s == Default
}

// Feed says which latency a live percentile delay is fed in the simulator.
type Feed int

const (
	// FeedAuto is each strategy's own rule: FeedClient for
	// hedge-p95-live (the study's), FeedPrimary for default (the
	// library's).
	FeedAuto Feed = iota
	// FeedPrimary is the library's rule (see hedge.Percentile): the
	// primary copy's own latency, or, when it is cancelled because a
	// hedge won, its running time then, a lower bound. With instant
	// cancellation and no failures (as in the simulator) that bound is
	// the winner's latency, so the two rules differ only when losers run
	// on (NoCancel).
	FeedPrimary
	// FeedClient is the study's rule: the latency the client saw, that of
	// the first copy to finish.
	FeedClient
)

var feedNames = []string{"auto", "primary", "client"}

// String returns the feed's name.
func (f Feed) String() string { return name(feedNames, int(f)) }

// ParseFeed parses a feed name.
func ParseFeed(s string) (Feed, error) {
	i, err := parse("live feed", feedNames, s)
	return Feed(i), err
}

// NeedsCalibration reports whether Config.Delay is a calibrated p95 that
// must be measured by an unhedged run first (see Calibrate).
func (s Strategy) NeedsCalibration() bool {
	return s == HedgeP95PerLoad || s == HedgeP95Quiet || s == HedgeQuietBudget
}

// CalibrationLoad returns the load whose unhedged p95 the strategy uses as
// its delay when running at load: the load itself for per-load, QuietLoad
// for the quiet-day strategies.
func (s Strategy) CalibrationLoad(load float64) float64 {
	if s == HedgeP95Quiet || s == HedgeQuietBudget {
		return QuietLoad
	}
	return load
}

// QuietLoad is the load of the "quiet day" on which hedge-p95-quiet and
// hedge-quiet-budget are calibrated.
const QuietLoad = 0.1

func name(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("unknown(%d)", i)
}

func parse(kind string, names []string, s string) (int, error) {
	for i, n := range names {
		if n == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q: use one of %s", kind, s, strings.Join(names, ", "))
}

// Worlds, Routings and Strategies list the valid names, for usage texts.
func Worlds() []string { return append([]string(nil), worldNames...) }

// Routings lists the valid routing names.
func Routings() []string { return append([]string(nil), routingNames...) }

// Strategies lists the valid strategy names.
func Strategies() []string { return append([]string(nil), strategyNames...) }

// Config describes one simulation run. Start from DefaultConfig, which holds
// the study's values; the zero Config is not valid.
type Config struct {
	// World, Routing and Strategy select the model (see their types).
	World    World
	Routing  Routing
	Strategy Strategy
	// Load is the arrival rate of requests (not copies) divided by the
	// total nominal service rate, in (0, 1). With Fanout k each request
	// sends k sub-requests, and Load counts sub-requests.
	Load float64
	// Servers is the number of servers (10 in the study).
	Servers int
	// Requests is the number of requests per run, warm-up included.
	Requests int
	// Warmup is how many of the first requests are not measured.
	Warmup int
	// Seed seeds the run. Runs of a point use Seed, RunSeed(Seed, 1), ...
	Seed uint64
	// Tail makes each run also report its latency at every probability of
	// TailLevels (RunResult.Tail), for drawing a latency CCDF. It costs
	// two more selections over the run's latencies; the study leaves it off.
	Tail bool

	// Delay is the hedge delay in time units for HedgeFixed, and the
	// calibrated p95 for HedgeP95PerLoad, HedgeP95Quiet and
	// HedgeQuietBudget (filled by Calibrate or the study runner).
	Delay float64
	// Budget is the token ratio of HedgeQuietBudget (0.05 in the study).
	Budget float64
	// BudgetBurst is the bucket size of HedgeQuietBudget (10).
	BudgetBurst float64
	// LiveP and LiveWindow configure HedgeP95Live: percentile and window
	// (95 and 2,000).
	LiveP      float64
	LiveWindow int
	// LiveFeed says which latency a live percentile is fed (FeedAuto:
	// the strategy's own rule).
	LiveFeed Feed

	// Hedge is the library configuration the Default strategy runs; nil
	// means the zero hedge.Config. Its Replicas and Picker are the
	// simulator's own (Servers and Routing); its Retryable,
	// ReapInBackground, PreciseTimers, AttemptTimeout and MaxOps do not
	// apply. Other strategies ignore it: they are presets (see
	// HedgeConfig). With several Clients each gets a Policy of its own
	// from it, and with it a budget of its own when Budget is nil (the
	// default budget, made fresh for each); an explicit Budget is one
	// object, shared by every client, as it would be by Hedgers that a
	// user gave the same *hedge.Budget. So is an explicit *hedge.ModeVar.
	Hedge *hedge.Config

	// Discipline is how servers share themselves among copies (FCFS).
	Discipline Discipline

	// StallShare is the long-run fraction of time a server is stalled
	// (0.02), StallMean the mean stalled stretch (50 units) and
	// StallSlowdown the factor by which a stalled server is slower (20).
	StallShare    float64
	StallMean     float64
	StallSlowdown float64
	// SlowShare is the long-run fraction of time every server of the
	// correlated world is slowed down (0.05), SlowMean the mean slowed
	// stretch (100 units) and SlowFactor the factor by which servers are
	// slower then (3).
	SlowShare  float64
	SlowMean   float64
	SlowFactor float64
	// SlowFor, if positive, replaces the correlated world's random
	// stretches with one slowdown, scheduled: every server is SlowFactor
	// slower from SlowAt (time units from the start of the run, warm-up
	// included) for SlowFor units, and normal before and after, so that
	// the recovery after a global slowdown can be followed
	// (Simulator.Done). The load may then exceed the slowed capacity:
	// the queues grow during the slowdown and drain after it.
	SlowAt, SlowFor float64
	// SCV is the squared coefficient of variation of big-job sizes (10).
	SCV float64
	// Sigma is the log-standard-deviation of lognormal sizes (1).
	Sigma float64
	// SameSize makes lognormal copies share the request's size instead of
	// drawing fresh ones.
	SameSize bool

	// NoCancel turns cancellation off: losers run to completion (and, for
	// Tied, no copy is cancelled when another starts).
	NoCancel bool
	// CancelDelay delays Tied's start-of-service cancellation by this many
	// units. Zero cancels instantly.
	CancelDelay float64
	// MaxAttempts is the most copies per request, 1 to the constant
	// MaxAttempts (2). Tied sends all of them at arrival; hedging sends
	// each after another delay.
	MaxAttempts int
	// Fanout is how many sub-requests a request sends (1). Each is
	// routed, hedged and measured for hedging purposes independently.
	Fanout int
	// FanoutNeed is how many sub-requests must finish for the request to
	// finish; 0 means all of them.
	FanoutNeed int
	// Shards, above 1, splits the servers into Shards replica sets of
	// Servers/Shards each: shard s is servers s*R to s*R+R-1, with R the
	// replicas per shard. Leaf i of every request goes to shard i mod
	// Shards, and each copy of it (primary, hedge) is placed among that
	// shard's servers only, by the routing, as a sharded store serves a
	// key only from its shard's replicas. Load, the spare-capacity rule,
	// the evidence and the ghosts stay per real server; a request's
	// budget, the sibling trigger and FanoutNeed span its shards (see
	// "Shards" in the package documentation). Servers and Fanout must be
	// multiples of Shards. 0 or 1: one replica set, where any server
	// serves any leaf.
	Shards int
	// FanCall, when set with Fanout > 1, runs each fan-out request as
	// hedge.DoFan does: a decision of its own (decide.Fan, made from
	// FanCall by the same defaults as DoFan's) that its sub-requests'
	// plans share, with the request's budget and cap on their extra
	// copies and the sibling trigger, which brings a straggler's hedge
	// forward; and its canaries (FanCall.Canaries), which go first, the
	// other sub-requests starting once every canary has finished. The
	// request's latency counts from its arrival. FanCall.Need must be 0
	// or FanoutNeed, which it takes; FanCall.GoodEnough is not
	// simulated (use 0). The budget, cap and trigger apply to hedging
	// strategies; with none or tied only the canaries do. nil hedges
	// each sub-request on its own, by its client's Policy alone.
	FanCall *hedge.FanOut

	// Clients is how many clients share the servers, each with a Hedger
	// of its own (see "Many clients" in the package documentation): 0 or
	// 1 is one client that owns the servers, and sees all of their load.
	// With more, each request (a fan-out request with all its
	// sub-requests) belongs to one client, and a client's Policy, delay
	// estimator, budget, routing load, ghosts and evidence are its own.
	// At most MaxClients.
	Clients int
	// ClientSkew splits the requests among the clients: 0 evenly; s > 0
	// gives client i a share proportional to 1/(i+1)^s (Zipf), so that
	// client 0 sends the most.
	ClientSkew float64

	// LowPriorityCopies makes every server serve a request's further
	// copies (hedges) only with capacity no primary wants: a copy waits
	// behind every primary queued there, and a primary that arrives while
	// a copy is in service takes the server at once; the copy's work so
	// far is lost and it waits again, first among the copies, to start
	// over. Primaries (every leaf of a fan-out is one) then never wait for
	// a copy: hedging cannot delay any request's primary, whichever
	// client sent it. It is what a server's middleware can do for copies
	// it can tell from primaries (a request marked as a hedge). It needs
	// FCFS servers, one per queue, and a hedging strategy that is not
	// tied.
	LowPriorityCopies bool
	// IdleOnlyCopies makes every server admit a request's further copy
	// only when it is idle (no copy in service or waiting there): a copy
	// that finds it busy is refused at once, as a server would answer "no
	// spare capacity", and is not sent elsewhere (RunResult.RefusedByServer
	// counts those). It is the simpler form of LowPriorityCopies, measured
	// beside it; the same restrictions apply, and the two exclude each
	// other.
	IdleOnlyCopies bool
	// LoadReports makes every server report its load with every answer,
	// as servers that run the toolkit's middleware do (hedge.Load): the
	// copies waiting and in service there after the answer left, and its
	// count of answers. A client holds the last report of each server it
	// heard from, which is as old as its last answer from that server,
	// and counts the copies it sent there since; while the report is
	// fresh (decide.ReportDelays delays), the client's Policy reads the
	// server's load and the evidence of a primary from it instead of its
	// own view (decide.Policy.ReportedLoad, decide.Running). It needs a
	// hedging strategy with the library's rules (the default), and
	// combines with LowPriorityCopies.
	LoadReports bool

	// forceViews, in the package's tests only, makes a run with one
	// client keep the per-client views that runs with several use, to
	// show that with one client they are the queues' own counts.
	forceViews bool

	// placement, in the package's tests only, selects another placement
	// of a hedge's copy (hedgePlacement); zero is the Picker's.
	placement int
}

// DefaultConfig returns the study's defaults: noise world, two-choice
// routing, no hedging, load 0.5, 10 servers, 1,000,000 requests with
// 100,000 warm-up, and every parameter at the spec's value.
func DefaultConfig() Config {
	return Config{
		World:         Noise,
		Routing:       TwoChoice,
		Strategy:      None,
		Load:          0.5,
		Servers:       10,
		Requests:      1_000_000,
		Warmup:        100_000,
		Seed:          1,
		Budget:        0.05,
		BudgetBurst:   10,
		LiveP:         95,
		LiveWindow:    2000,
		StallShare:    0.02,
		StallMean:     50,
		StallSlowdown: 20,
		SlowShare:     0.05,
		SlowMean:      100,
		SlowFactor:    3,
		SCV:           10,
		Sigma:         1,
		MaxAttempts:   2,
		Fanout:        1,
	}
}

// Capacity returns the largest sustainable load of the world: 1 without
// stalls or slowdowns, and the servers' mean speed with them: 1 -
// share*(1-1/slowdown), 0.981 with the default stalls and 0.967 with the
// correlated world's default slowdowns.
func (c Config) Capacity() float64 {
	switch {
	case c.World.HasStalls():
		return 1 - c.StallShare*(1-1/c.StallSlowdown)
	case c.World == Correlated:
		return 1 - c.SlowShare*(1-1/c.SlowFactor)
	}
	return 1
}

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid simulation config")

// Validate reports every mistake in c, each with what to do about it.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.World < 0 || int(c.World) >= len(worldNames) {
		bad("unknown world %d: use one of %s", c.World, strings.Join(worldNames, ", "))
	}
	if c.Routing < 0 || int(c.Routing) >= len(routingNames) {
		bad("unknown routing %d: use one of %s", c.Routing, strings.Join(routingNames, ", "))
	}
	if c.Strategy < 0 || int(c.Strategy) >= len(strategyNames) {
		bad("unknown strategy %d: use one of %s", c.Strategy, strings.Join(strategyNames, ", "))
	}
	if !(c.Servers >= 1 && c.Servers <= 1<<20) {
		bad("servers = %d: use 1 to %d", c.Servers, 1<<20)
	}
	if c.Requests < 1 {
		bad("requests = %d: use at least 1", c.Requests)
	}
	if c.Warmup < 0 || c.Warmup >= c.Requests {
		bad("warmup = %d: use 0 to requests-1 (%d)", c.Warmup, c.Requests-1)
	}
	if c.World.HasStalls() {
		if !(c.StallShare >= 0 && c.StallShare < 1) {
			bad("stall share %v is outside [0, 1)", c.StallShare)
		}
		if !(c.StallMean > 0) || math.IsInf(c.StallMean, 0) {
			bad("stall mean %v: use a positive number of time units, e.g. 50", c.StallMean)
		}
		if !(c.StallSlowdown >= 1) || math.IsInf(c.StallSlowdown, 0) {
			bad("stall slowdown %v: use a factor >= 1, e.g. 20", c.StallSlowdown)
		}
	}
	if c.World == Correlated {
		if !(c.SlowShare >= 0 && c.SlowShare < 1) {
			bad("slow share %v is outside [0, 1)", c.SlowShare)
		}
		if !(c.SlowMean > 0) || math.IsInf(c.SlowMean, 0) {
			bad("slow mean %v: use a positive number of time units, e.g. 100", c.SlowMean)
		}
		if !(c.SlowFactor >= 1) || math.IsInf(c.SlowFactor, 0) {
			bad("slow factor %v: use a factor >= 1, e.g. 3", c.SlowFactor)
		}
		if !(c.SlowFor >= 0) || math.IsInf(c.SlowFor, 0) || !(c.SlowAt >= 0) || math.IsInf(c.SlowAt, 0) {
			bad("scheduled slowdown at %v for %v: use a start >= 0 and a length > 0 (or 0 for random stretches)", c.SlowAt, c.SlowFor)
		}
	}
	if c.Discipline < 0 || int(c.Discipline) >= len(disciplineNames) {
		bad("unknown discipline %d: use one of %s", c.Discipline, strings.Join(disciplineNames, ", "))
	} else if c.Discipline == PS {
		if c.Strategy.IsTied() {
			bad("strategy %s with processor sharing: a tied copy is cancelled when another starts service, and under processor sharing every copy starts at once; use fcfs servers", c.Strategy)
		}
		if c.Strategy == TiedSpare {
			bad("strategy %s with processor sharing: a spare runs in place of a primary that waits, and under processor sharing no copy waits; use fcfs servers", c.Strategy)
		}
		if c.Routing == Pool {
			bad("pool routing with processor sharing: use fcfs servers, or another routing")
		}
	}
	if !(c.Load > 0 && c.Load < 1) {
		bad("load %v is outside (0, 1): load is the arrival rate over the servers' total service rate", c.Load)
	} else if capa := c.Capacity(); c.World.HasStalls() && c.Load >= capa {
		bad("load %v is at or above the %s world's capacity %.4g (stalled servers work at 1/%g speed %g%% of the time): use a load below %.4g",
			c.Load, c.World, capa, c.StallSlowdown, 100*c.StallShare, capa)
	} else if c.World == Correlated && c.SlowFor <= 0 && c.Load >= capa {
		bad("load %v is at or above the correlated world's capacity %.4g (every server works at 1/%g speed %g%% of the time): use a load below %.4g",
			c.Load, capa, c.SlowFactor, 100*c.SlowShare, capa)
	}
	if (c.World == BigJobs || c.World == Mixed) && (!(c.SCV >= 1) || math.IsInf(c.SCV, 0)) {
		bad("scv %v: the hyperexponential needs a squared coefficient of variation >= 1, e.g. 10", c.SCV)
	}
	if c.LoadReports {
		if _, ok := c.HedgeConfig(); !ok {
			bad("load reports are read by the library's rules: use a hedging strategy that has them (default)")
		}
	}
	if c.LowPriorityCopies && c.IdleOnlyCopies {
		bad("low-priority copies and idle-only copies are two forms of the same server help: choose one")
	}
	if c.Strategy == TiedSpare && c.Routing == Pool {
		bad("strategy %s with pool routing: the pool's one queue gives every idle server its next copy already; use two-choice, random or least-loaded routing", c.Strategy)
	}
	if c.LowPriorityCopies || c.IdleOnlyCopies {
		switch {
		case c.Discipline != FCFS:
			bad("low-priority copies need fcfs servers: a processor-sharing server has no queue to put copies at the back of")
		case c.Routing == Pool:
			bad("low-priority copies need a queue per server: use two-choice, random or least-loaded routing")
		case c.Strategy.IsTied():
			bad("low-priority copies and tied requests are two answers to the same question: use one")
		}
	}
	if c.World == LogNormal && !(c.Sigma >= 0 && c.Sigma <= 10) {
		bad("sigma %v: use a log-standard-deviation in [0, 10]", c.Sigma)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxAttempts {
		bad("max attempts = %d: use 1 to %d", c.MaxAttempts, MaxAttempts)
	}
	if !(c.CancelDelay >= 0) || math.IsInf(c.CancelDelay, 0) {
		bad("cancel delay %v: use 0 (instant) or a positive number of time units", c.CancelDelay)
	}
	if c.Fanout < 1 || c.Fanout > 1<<16 {
		bad("fanout = %d: use 1 to %d", c.Fanout, 1<<16)
	}
	if c.FanoutNeed < 0 || c.FanoutNeed > c.Fanout {
		bad("fanout need = %d: use 0 (all) to fanout (%d)", c.FanoutNeed, c.Fanout)
	}
	errs = append(errs, c.shardErrs()...)
	if c.FanCall != nil {
		fo := *c.FanCall
		switch {
		case fo.Need != 0 && fo.Need != c.FanoutNeed && (c.FanoutNeed != 0 || fo.Need != c.Fanout):
			bad("fan call need = %d with fanout need = %d: FanCall.Need must be 0 or equal FanoutNeed, which the simulator's fan-out waits for", fo.Need, c.FanoutNeed)
		case fo.GoodEnough != 0:
			bad("fan call good-enough time %v: the simulator does not model it; use 0", fo.GoodEnough)
		case c.Fanout >= 1 && c.FanoutNeed >= 0 && c.FanoutNeed <= c.Fanout:
			if fo, ok := c.fanOut(); ok {
				if _, err := c.fanConfig(fo); err != nil {
					bad("fan call: %w", err)
				}
			}
		}
	}
	if c.Clients < 0 || c.Clients > MaxClients {
		bad("clients = %d: use 0 or 1 (one client) to %d", c.Clients, MaxClients)
	}
	if !(c.ClientSkew >= 0) || math.IsInf(c.ClientSkew, 0) {
		bad("client skew %v: use 0 (an even split) or a Zipf exponent > 0, e.g. 1", c.ClientSkew)
	}
	switch c.Strategy {
	case HedgeFixed, HedgeP95PerLoad, HedgeP95Quiet, HedgeQuietBudget:
		if !(c.Delay >= 0) || math.IsInf(c.Delay, 0) {
			bad("delay %v: use a hedge delay >= 0 time units", c.Delay)
		}
	}
	if c.Strategy == HedgeQuietBudget {
		if !(c.Budget >= 0.001 && c.Budget <= 1) {
			bad("budget %v: use a fraction of requests in [0.001, 1], e.g. 0.05", c.Budget)
		}
		if !(c.BudgetBurst >= 1 && c.BudgetBurst <= 1e9) {
			bad("budget burst %v: use 1 to 1e9 tokens, e.g. 10", c.BudgetBurst)
		}
	}
	if c.LiveFeed < 0 || int(c.LiveFeed) >= len(feedNames) {
		bad("unknown live feed %d: use one of %s", c.LiveFeed, strings.Join(feedNames, ", "))
	}
	if h, ok := c.HedgeConfig(); ok && len(errs) == 0 {
		if _, err := decide.FromConfig(h); err != nil {
			bad("%s strategy's hedge.Config: %w", c.Strategy, err)
		}
	}
	if c.Strategy == HedgeP95Live {
		if !(c.LiveP >= 50 && c.LiveP < 100) {
			bad("live percentile %v: use 50 to 99.99, e.g. 95", c.LiveP)
		}
		if c.LiveWindow < 1 || c.LiveWindow > 1<<24 {
			bad("live window %d: use 1 to %d latencies, e.g. 2000", c.LiveWindow, 1<<24)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}

// HedgeConfig returns the library configuration that c's strategy runs,
// and false for strategies that send no delayed copy (none, tied). The
// study's strategies are presets of it:
//
//   - hedge-fixed and the calibrated strategies: Fixed(Delay), no budget;
//   - hedge-quiet-budget: the same with NewBudget(Budget, BudgetBurst);
//   - hedge-p95-live: Percentile{P: LiveP, Window: LiveWindow} with no
//     hedging until the window is full, no budget;
//   - default: Config.Hedge, or the zero hedge.Config.
//
// MaxAttempts is c's for the presets and the library's own for default.
// Replicas is Servers, or a shard's servers with Shards: a copy never goes
// to a server holding another.
func (c Config) HedgeConfig() (hedge.Config, bool) {
	var h hedge.Config
	switch c.Strategy {
	case HedgeFixed, HedgeP95PerLoad, HedgeP95Quiet:
		h = hedge.Config{Delay: hedge.Fixed(toDuration(c.Delay)), NoBudget: true, MaxAttempts: c.MaxAttempts}
	case HedgeQuietBudget:
		b, err := hedge.NewBudget(c.Budget, c.BudgetBurst)
		if err != nil {
			return hedge.Config{}, false // refused by Validate
		}
		h = hedge.Config{Delay: hedge.Fixed(toDuration(c.Delay)), Budget: b, MaxAttempts: c.MaxAttempts}
	case HedgeP95Live:
		// Warm-up: no hedging until the window is full (Warmup zero
		// means Never). In the study it fills long before the warm-up
		// requests are over.
		h = hedge.Config{Delay: hedge.Percentile{P: c.LiveP, Window: c.LiveWindow, MinSamples: c.LiveWindow}, NoBudget: true, MaxAttempts: c.MaxAttempts}
	case Default:
		return c.libraryConfig(), true
	default:
		return hedge.Config{}, false
	}
	h.Replicas = c.replicas()
	h.MaxOps = 1 // one operation class: the estimator's memory is one window
	// The presets are the study's plain strategies: no spare-capacity or
	// payoff rule.
	h.MaxReplicaLoad, h.PayoffWinRate = hedge.AnyReplicaLoad, -1
	return h, true
}

// libraryConfig is the Default strategy's hedge.Config, with the
// simulator's replicas.
func (c Config) libraryConfig() hedge.Config {
	var h hedge.Config
	if c.Hedge != nil {
		h = *c.Hedge
	}
	h.Replicas = c.replicas()
	h.Picker = hedge.Picker{}
	return h
}

// fanOut returns the hedge.FanOut that each fan-out request runs with
// (Config.FanCall with Need set from FanoutNeed), and false when there is
// none: FanCall is nil or requests do not fan out.
func (c Config) fanOut() (hedge.FanOut, bool) {
	if c.FanCall == nil || c.Fanout < 2 {
		return hedge.FanOut{}, false
	}
	fo := *c.FanCall
	fo.Need = c.FanoutNeed
	return fo, true
}

// describeFan describes the decision of c's fan-out requests, defaults
// applied, or says it is invalid (Validate reports why).
func (c Config) describeFan(fo hedge.FanOut) string {
	fc, err := c.fanConfig(fo)
	if err != nil {
		return "invalid"
	}
	return fmt.Sprintf("hedges=%d in-flight=%d mark=%d straggle=%g canaries=%d", fc.Hedges, fc.InFlight, fc.Mark, fc.Straggle, fo.Canaries)
}

// replicas is how many distinct places a request's copies may go: the
// servers, or with Shards a shard's replicas; 0 when that is one.
func (c Config) replicas() int {
	n := c.Servers
	if c.Sharded() {
		n = c.Servers / c.Shards
	}
	if n < 2 {
		return 0
	}
	return n
}

// fanConfig is the decision of c's fan-out requests made from fo, as
// hedge.DoFan makes it: decide.FanFrom over the servers, or with Shards
// decide.ShardFanFrom over the shards' grid, leaf i on shard i mod Shards,
// so that a sharded run gets the library's sharded defaults.
func (c Config) fanConfig(fo hedge.FanOut) (decide.FanConfig, error) {
	if !c.Sharded() {
		return decide.FanFrom(fo, c.Fanout, c.fanServers())
	}
	leaves := make([]int, c.Shards)
	for i := range c.Fanout {
		leaves[i%c.Shards]++
	}
	return decide.ShardFanFrom(fo, c.Fanout, leaves, hedge.ShardGrid(c.Shards, c.ShardReplicas()), c.Servers)
}

// fanServers is the replicas a fan-out request's decision is made over
// (decide.FanFrom): how many distinct servers its leaves spread over, of
// which one stuck server holds Fanout/fanServers leaves. With Shards
// that is every server, not a shard's replicas.
func (c Config) fanServers() int {
	if c.Sharded() {
		return c.Servers
	}
	return c.replicas()
}

// Sharded reports whether c splits its servers into shards (Shards > 1).
func (c Config) Sharded() bool { return c.Shards > 1 }

// ShardReplicas returns the servers of each shard: Servers/Shards with
// Shards, else Servers.
func (c Config) ShardReplicas() int {
	if c.Sharded() {
		return c.Servers / c.Shards
	}
	return c.Servers
}

// shardErrs reports what is wrong with c's Shards, each with what to do.
func (c Config) shardErrs() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case c.Shards < 0:
		bad("shards = %d: use 0 or 1 (any server serves any leaf) or the number of replica sets the servers split into", c.Shards)
		return errs
	case c.Shards <= 1:
		return nil
	case c.Servers < 1:
		return nil // reported with the servers
	case c.Shards > c.Servers:
		bad("shards = %d with servers = %d: every shard needs at least one server; use servers = shards x replicas per shard, e.g. servers = %d for 2 replicas each", c.Shards, c.Servers, 2*c.Shards)
	case c.Servers%c.Shards != 0:
		lo, hi := c.Servers/c.Shards, c.Servers/c.Shards+1
		bad("shards = %d does not divide servers = %d (%d per shard, %d left over): every shard has servers/shards replicas; use servers = %d (%d replicas each) or %d (%d each)",
			c.Shards, c.Servers, lo, c.Servers%c.Shards, lo*c.Shards, lo, hi*c.Shards, hi)
	}
	if c.Fanout >= 1 && c.Fanout%c.Shards != 0 {
		bad("shards = %d with fanout = %d: leaf i goes to shard i mod shards, so the shards share the leaves evenly only when fanout is a multiple of shards; use fanout = %d (one leaf per shard) or a multiple of it", c.Shards, c.Fanout, c.Shards)
	}
	if c.Routing == Pool {
		bad("pool routing with shards: the pool's one queue lets any server take any leaf; use two-choice, random or least-loaded routing, which place each leaf among its shard's servers")
	}
	return errs
}

// feedPrimary reports whether a live percentile is fed the library's rule.
func (c Config) feedPrimary() bool {
	switch c.LiveFeed {
	case FeedPrimary:
		return true
	case FeedClient:
		return false
	}
	return c.Strategy == Default
}

// String describes c on one line, with the parameters that matter for its
// world and strategy.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "world=%s routing=%s strategy=%s load=%g servers=%d requests=%d warmup=%d seed=%d",
		c.World, c.Routing, c.Strategy, c.Load, c.Servers, c.Requests, c.Warmup, c.Seed)
	if c.Discipline != FCFS {
		fmt.Fprintf(&b, " discipline=%s", c.Discipline)
	}
	if c.World.HasStalls() {
		fmt.Fprintf(&b, " stall-mean=%g stall-share=%g stall-slowdown=%g", c.StallMean, c.StallShare, c.StallSlowdown)
	}
	if c.World == Correlated {
		fmt.Fprintf(&b, " slow-mean=%g slow-share=%g slow-factor=%g", c.SlowMean, c.SlowShare, c.SlowFactor)
	}
	if c.World == BigJobs || c.World == Mixed {
		fmt.Fprintf(&b, " scv=%g", c.SCV)
	}
	if c.World == LogNormal {
		fmt.Fprintf(&b, " sigma=%g same-size=%v", c.Sigma, c.SameSize)
	}
	switch c.Strategy {
	case HedgeFixed, HedgeP95PerLoad, HedgeP95Quiet:
		fmt.Fprintf(&b, " delay=%.4g", c.Delay)
	case HedgeQuietBudget:
		fmt.Fprintf(&b, " delay=%.4g budget=%g burst=%g", c.Delay, c.Budget, c.BudgetBurst)
	case HedgeP95Live:
		fmt.Fprintf(&b, " live-p=%g live-window=%d", c.LiveP, c.LiveWindow)
	case Tied, TiedTwoChoice:
		fmt.Fprintf(&b, " cancel-delay=%g", c.CancelDelay)
	case Default:
		// The library's Config decides, MaxAttempts included.
		fmt.Fprintf(&b, " hedge={%s}", describeHedge(c.libraryConfig()))
	}
	if c.LiveFeed != FeedAuto {
		fmt.Fprintf(&b, " live-feed=%s", c.LiveFeed)
	}
	switch c.Strategy {
	case None, TiedSpare:
	case Default:
		fmt.Fprintf(&b, " cancel=%v", !c.NoCancel)
	default:
		fmt.Fprintf(&b, " max-attempts=%d cancel=%v", c.MaxAttempts, !c.NoCancel)
	}
	if c.Fanout > 1 {
		fmt.Fprintf(&b, " fanout=%d need=%d", c.Fanout, c.FanoutNeed)
	}
	if c.Sharded() {
		fmt.Fprintf(&b, " shards=%d replicas-per-shard=%d", c.Shards, c.ShardReplicas())
	}
	if fo, ok := c.fanOut(); ok {
		fmt.Fprintf(&b, " fan-call={%s}", c.describeFan(fo))
	}
	if c.Clients > 1 {
		fmt.Fprintf(&b, " clients=%d client-skew=%g", c.Clients, c.ClientSkew)
	}
	if c.LowPriorityCopies {
		b.WriteString(" low-priority-copies=true")
	}
	if c.IdleOnlyCopies {
		b.WriteString(" idle-only-copies=true")
	}
	if c.LoadReports {
		b.WriteString(" load-reports=true")
	}
	return b.String()
}

// describeHedge describes a hedge.Config as the library's Policy does, or
// says it is invalid (Validate reports why).
func describeHedge(h hedge.Config) string {
	p, err := decide.FromConfig(h)
	if err != nil {
		return "invalid"
	}
	return p.String()
}
