package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tailcut/hedge"
)

// StudyLoads are the loads of the study grid.
var StudyLoads = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95}

// StudyStrategies are the strategies of the study grid, in table order.
//
// The study's own six come first; default, the library's zero
// hedge.Config, closes every world, so that the study shows what the
// library does out of the box next to what the source measured.
var StudyStrategies = []Strategy{None, HedgeP95PerLoad, HedgeP95Quiet, HedgeP95Live, HedgeQuietBudget, Tied, Default}

// StudyStallMeans are the mean stall lengths of the stall-length variation.
var StudyStallMeans = []float64{2, 5, 20, 50, 200, 1000}

// Groups a point can belong to (a point shared by two groups is run once).
const (
	GroupMain        = "main"         // worlds noise, stalls, bigjobs x all strategies, two-choice
	GroupMixed       = "mixed"        // the mixed world x all strategies
	GroupRandom      = "random"       // random routing, with and without hedging
	GroupBudget      = "budget"       // hedge-quiet-budget at 5% and 15%
	GroupStallLength = "stall-length" // stall means with hedge-p95-live at loads 0.3 and 0.7
	GroupCancelDelay = "cancel-delay" // tied with cancel delay 0.1 at high load
	GroupDefault     = "default"      // the library default against none, live p95 and tied in every world
	GroupFanOut      = "fan-out"      // requests of 10, 40 and 100 leaves: none, default, the fan-out call; first k of n; canaries
	GroupClients     = "clients"      // 1, 10 and 100 clients, requests of 1, 10 and 40 leaves: none, default, low-priority copies, the fan-out call
	GroupShards      = "shards"       // sharded fan-outs: 30 shards x 2 and x 3 replicas, 100 x 3 with 1,000 leaves; none, random placement, the fan-out call
)

// StudyFanWidths are the widths of the fan-out group's requests, and
// StudyClientCounts and StudyClientWidths the clients and widths of the
// clients group. StudyManyWorlds are both groups' worlds, and
// StudyManyLoads their loads (those of the grid's loads that are among
// them; all of the grid's when none is).
var (
	StudyFanWidths    = []int{10, 40, 100}
	StudyClientCounts = []int{1, 10, 100}
	StudyClientWidths = []int{1, 10, 40}
	StudyManyWorlds   = []World{Noise, Stalls, BigJobs, Mixed}
	StudyManyLoads    = []float64{0.1, 0.3, 0.5, 0.7, 0.9}
)

// ShardTopology is a topology of the shards group: Shards replica sets of
// Replicas servers each, and requests of Width leaves, leaf i to shard i
// mod Shards. Requests and QuickRequests are the requests of a run in the
// full study and in the quick one.
type ShardTopology struct {
	Shards, Replicas, Width int
	Requests, QuickRequests int
}

// StudyShardTopologies are the shards group's topologies: 30 shards of 2
// and of 3 replicas, every request reading one leaf of each shard (a
// search over 30 index shards), and the Tail at Scale's setting, 1,000
// leaves over 100 shards of 3. A run of 30 leaves has 30,000 requests,
// so that its p99.9 rests on the 30 slowest; one of 1,000 leaves has
// 3,000 requests (3,000,000 leaves), whose p99.9 rests on the 3 slowest
// and whose stalls world holds about 4,000 stalled stretches at load
// 0.3, 16,000 over a point's four runs.
// StudyShardClients are the group's clients.
var (
	StudyShardTopologies = []ShardTopology{
		{Shards: 30, Replicas: 2, Width: 30, Requests: 30_000, QuickRequests: 10_000},
		{Shards: 30, Replicas: 3, Width: 30, Requests: 30_000, QuickRequests: 10_000},
		{Shards: 100, Replicas: 3, Width: 1000, Requests: 3_000, QuickRequests: 1_000},
	}
	StudyShardClients = []int{1, 10}
)

// studyLeaves is how many sub-requests a run of the fan-out and clients
// groups serves (requests x width), so that a wide request does not make
// a run wider in work: full and quick.
const studyLeaves, studyLeavesQuick = 400_000, 100_000

// DefaultScenario is a world of the default group: a World with the
// parameters that make it a world of its own.
type DefaultScenario struct {
	Name  string // as PointResult.Scenario names it
	World World
	Sigma float64    // lognormal only
	Disc  Discipline // FCFS or PS
}

// Apply sets the scenario's world on c.
func (sc DefaultScenario) Apply(c *Config) {
	c.World, c.Discipline = sc.World, sc.Disc
	if sc.World == LogNormal {
		c.Sigma = sc.Sigma
	}
}

// DefaultScenarios are the worlds in which the default group checks that
// the library's zero hedge.Config is never worse than not hedging: the
// study's four, lognormal sizes at three spreads, a correlated slowdown of
// every server, and processor-sharing servers with stalls and with big
// jobs.
var DefaultScenarios = []DefaultScenario{
	{Name: "noise", World: Noise},
	{Name: "stalls", World: Stalls},
	{Name: "bigjobs", World: BigJobs},
	{Name: "mixed", World: Mixed},
	{Name: "lognormal σ=0.5", World: LogNormal, Sigma: 0.5},
	{Name: "lognormal σ=1", World: LogNormal, Sigma: 1},
	{Name: "lognormal σ=2", World: LogNormal, Sigma: 2},
	{Name: "correlated", World: Correlated},
	{Name: "ps-stalls", World: Stalls, Disc: PS},
	{Name: "ps-bigjobs", World: BigJobs, Disc: PS},
}

// DefaultGroupStrategies are the strategies of the default group: none,
// the library default, the study's live p95, tied and tied in its spare
// form (neither under processor sharing, where they do not apply). Under processor sharing the
// live p95, unbudgeted, runs to load 0.7 only: from 0.8 its copies push
// the servers past their capacity, every server then holds ever more
// requests at once, and a run of a million requests no longer ends in
// reasonable time (at 0.8, runs of 200,000 show p99 100 times none's).
var DefaultGroupStrategies = []Strategy{None, Default, HedgeP95Live, Tied, TiedSpare}

// StudyOptions configures RunStudy. The zero value runs the full study with
// seed 0 on GOMAXPROCS workers and writes nothing.
type StudyOptions struct {
	// Seed is the master seed. Each run's seed is derived from it and the
	// point's identity (see DeriveSeed), never from scheduling order.
	Seed uint64
	// Quick runs the reduced grid: 2 runs of 100,000 requests (10,000
	// warm-up) at loads 0.1, 0.3, 0.5, 0.7, 0.9 and 0.95, with the same
	// strategies and variations.
	Quick bool
	// Workers is how many runs execute in parallel; < 1 means GOMAXPROCS.
	// Results do not depend on it.
	Workers int
	// OutDir, if not empty, receives results.json (rewritten atomically
	// as points finish, at most every two seconds, and at the end),
	// table.md and the SVG plots.
	OutDir string
	// Progress, if not nil, receives a progress bar.
	Progress io.Writer
	// Runs, Requests and Warmup override the mode's values when > 0 (tests
	// use them). Loads, if not nil, overrides the loads.
	Runs, Requests, Warmup int
	Loads                  []float64
	// Groups, if not nil, runs only the points of these groups (names of
	// StudyGroups, or "all" for every group). nil runs every group but
	// those of StudyOptInGroups, whose cost the default grid does not
	// carry.
	Groups []string
}

// StudyGroups are the groups of the study, in the order they are laid
// out, and StudyOptInGroups those that run only when StudyOptions.Groups
// names them: the shards group's runs of up to 3,000,000 leaves would
// add more than half again to the default grid's time.
var (
	StudyGroups      = []string{GroupMain, GroupMixed, GroupRandom, GroupBudget, GroupStallLength, GroupDefault, GroupFanOut, GroupClients, GroupCancelDelay, GroupShards}
	StudyOptInGroups = []string{GroupShards}
)

// CheckStudyGroups reports a name in groups that is not a group of the
// study, with the names to use.
func CheckStudyGroups(groups []string) error {
	for _, g := range groups {
		if g != "all" && !slices.Contains(StudyGroups, g) {
			return fmt.Errorf("%w: unknown study group %q: use all or some of %s", ErrInvalid, g, strings.Join(StudyGroups, ", "))
		}
	}
	return nil
}

// runsGroup reports whether the study with these options runs group.
func (o StudyOptions) runsGroup(group string) bool {
	if o.Groups == nil {
		return !slices.Contains(StudyOptInGroups, group)
	}
	return slices.Contains(o.Groups, group) || slices.Contains(o.Groups, "all")
}

type studyPoint struct {
	idx    int
	cfg    Config // Seed is the point's base seed
	key    string
	groups []string
	ref    *studyPoint // "none" at the same world, routing, load and world parameters
	// place, for "none" with shards and two-choice routing, is "none"
	// with random routing at the same scenario: the placement's own
	// gain (PointResult.PlacementP50 ...).
	place *studyPoint
	calib *studyCalib // nil unless the strategy is calibrated
	// delaySet records that cfg.Delay holds the calibrated delay.
	delaySet bool
	runs     []RunResult
	left     int
	done     bool
	sum      Summary
}

type studyCalib struct {
	key  string
	cfg  Config
	res  RunResult
	done bool
}

type studyPlan struct {
	points []*studyPoint
	byKey  map[string]*studyPoint
	calibs []*studyCalib
	cbyKey map[string]*studyCalib
	runs   int
	seed   uint64
	base   Config
	opts   StudyOptions
}

// scenarioKey identifies what the run's common random streams depend on:
// the world, its parameters and the load. Strategy and routing are left
// out on purpose, so that run i of every strategy at a point sees the same
// arrivals, sizes and stalls (common random numbers: ratios to "none" are
// then much less noisy; see Ratio for their standard error).
func scenarioKey(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|load=%g|servers=%d|n=%d|w=%d", c.World, c.Load, c.Servers, c.Requests, c.Warmup)
	if c.World.HasStalls() {
		fmt.Fprintf(&b, "|stall=%g", c.StallMean)
	}
	if c.World == BigJobs || c.World == Mixed {
		fmt.Fprintf(&b, "|scv=%g", c.SCV)
	}
	if c.World == LogNormal {
		fmt.Fprintf(&b, "|sigma=%g", c.Sigma)
	}
	if c.World == Correlated {
		fmt.Fprintf(&b, "|slow=%g,%g,%g", c.SlowShare, c.SlowMean, c.SlowFactor)
	}
	if c.Discipline != FCFS {
		fmt.Fprintf(&b, "|%s", c.Discipline)
	}
	if c.Fanout > 1 {
		fmt.Fprintf(&b, "|fanout=%d", c.Fanout)
	}
	if c.Sharded() {
		fmt.Fprintf(&b, "|shards=%d", c.Shards)
	}
	return b.String()
}

// pointKey identifies a point: scenario, routing, strategy and the
// strategy's parameters.
func pointKey(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s", scenarioKey(c), c.Routing, c.Strategy)
	switch c.Strategy {
	case HedgeQuietBudget:
		fmt.Fprintf(&b, "|budget=%g", c.Budget)
	case Tied, TiedTwoChoice:
		fmt.Fprintf(&b, "|cancel-delay=%g", c.CancelDelay)
	}
	// The clients share the scenario's arrivals (common random numbers
	// across client counts); they are the point's own.
	if c.Clients > 1 {
		fmt.Fprintf(&b, "|clients=%d,skew=%g", c.Clients, c.ClientSkew)
	}
	if c.FanoutNeed > 0 {
		fmt.Fprintf(&b, "|need=%d", c.FanoutNeed)
	}
	if fo, ok := c.fanOut(); ok {
		fmt.Fprintf(&b, "|fan-call=%+v", fo)
	}
	if c.LowPriorityCopies {
		b.WriteString("|low-priority")
	}
	if c.IdleOnlyCopies {
		b.WriteString("|idle-only")
	}
	return b.String()
}

// add adds the point c to group, with its "none" and its calibration,
// and returns it; or nil, adding nothing, when the study does not run
// group (StudyOptions.Groups).
func (p *studyPlan) add(c Config, group string) *studyPoint {
	if !p.opts.runsGroup(group) {
		return nil
	}
	c.Seed = DeriveSeed(p.seed, scenarioKey(c))
	key := pointKey(c)
	if sp, ok := p.byKey[key]; ok {
		if !slices.Contains(sp.groups, group) {
			sp.groups = append(sp.groups, group)
		}
		return sp
	}
	sp := &studyPoint{idx: len(p.points), cfg: c, key: key, groups: []string{group}, left: p.runs}
	p.points = append(p.points, sp)
	p.byKey[key] = sp
	if c.Strategy != None {
		rc := c
		rc.Strategy, rc.Delay, rc.CancelDelay = None, 0, 0
		// Not hedging: no server help, no fan-out call (its canaries
		// cost a request time, which the comparison must show).
		rc.FanCall, rc.LowPriorityCopies, rc.IdleOnlyCopies = nil, false, false
		sp.ref = p.add(rc, group)
	}
	if c.Strategy.NeedsCalibration() {
		mc := c
		mc.Seed = p.seed // the study's master seed
		cc := CalibrationConfig(mc)
		ck := pointKey(cc)
		cal, ok := p.cbyKey[ck]
		if !ok {
			cal = &studyCalib{key: ck, cfg: cc}
			p.calibs = append(p.calibs, cal)
			p.cbyKey[ck] = cal
		}
		sp.calib = cal
	}
	return sp
}

// planStudy lays out the grid of the spec (or the quick grid).
func planStudy(o StudyOptions) *studyPlan {
	base := DefaultConfig()
	runs, loads := 4, StudyLoads
	if o.Quick {
		runs = 2
		base.Requests, base.Warmup = 100_000, 10_000
		loads = []float64{0.1, 0.3, 0.5, 0.7, 0.9, 0.95}
	}
	if o.Runs > 0 {
		runs = o.Runs
	}
	if o.Requests > 0 {
		base.Requests = o.Requests
		base.Warmup = o.Requests / 10
	}
	if o.Warmup > 0 {
		base.Warmup = o.Warmup
	}
	if o.Loads != nil {
		loads = o.Loads
	}
	p := &studyPlan{byKey: map[string]*studyPoint{}, cbyKey: map[string]*studyCalib{}, runs: runs, seed: o.Seed, base: base, opts: o}
	at := func(w World, r Routing, s Strategy, load float64) Config {
		c := base
		c.World, c.Routing, c.Strategy, c.Load = w, r, s, load
		return c
	}
	// The headline grid, then the mixed world.
	for _, w := range []World{Noise, Stalls, BigJobs, Mixed} {
		g := GroupMain
		if w == Mixed {
			g = GroupMixed
		}
		for _, s := range StudyStrategies {
			for _, l := range loads {
				p.add(at(w, TwoChoice, s, l), g)
			}
		}
	}
	// Random routing, with and without hedging.
	for _, w := range []World{Noise, Stalls, BigJobs} {
		for _, s := range []Strategy{None, HedgeP95PerLoad} {
			for _, l := range loads {
				p.add(at(w, Random, s, l), GroupRandom)
			}
		}
	}
	// Budget 5% versus 15% (quiet-day delay).
	for _, w := range []World{Noise, Stalls, BigJobs} {
		for _, b := range []float64{0.05, 0.15} {
			for _, l := range loads {
				c := at(w, TwoChoice, HedgeQuietBudget, l)
				c.Budget = b
				p.add(c, GroupBudget)
			}
		}
	}
	// Stall length, with the live p95 delay at loads 0.3 and 0.7.
	for _, m := range StudyStallMeans {
		for _, s := range []Strategy{None, HedgeP95Live} {
			for _, l := range []float64{0.3, 0.7} {
				c := at(Stalls, TwoChoice, s, l)
				c.StallMean = m
				p.add(c, GroupStallLength)
			}
		}
	}
	// The library default in every world of DefaultScenarios.
	for _, sc := range DefaultScenarios {
		for _, s := range DefaultGroupStrategies {
			if (s.IsTied() || s == TiedSpare) && sc.Disc == PS {
				continue
			}
			for _, l := range loads {
				if s == HedgeP95Live && sc.Disc == PS && l > 0.7 {
					continue
				}
				c := at(sc.World, TwoChoice, s, l)
				sc.Apply(&c)
				p.add(c, GroupDefault)
			}
		}
	}
	p.planMany(loads, o)
	// Tied with a cancellation delay of 0.1 at high load, next to instant.
	for _, w := range []World{Noise, Stalls, BigJobs} {
		for _, d := range []float64{0, 0.1} {
			for _, l := range []float64{0.8, 0.9, 0.95} {
				c := at(w, TwoChoice, Tied, l)
				c.CancelDelay = d
				p.add(c, GroupCancelDelay)
			}
		}
	}
	// Last, so that the other groups' points keep their places in
	// results.json.
	p.planShards(loads, o)
	return p
}

// planShards lays out the shards group: for each of StudyShardTopologies,
// the four worlds of StudyManyWorlds at the grid's loads that are in
// StudyManyLoads, one and ten clients: none (two choices among the
// shard's replicas by the client's own requests in flight), none with
// random placement within the shard (one client: unhedged random
// placement reads no load, so it does not depend on the clients), and
// the library's zero hedge.Config in the fan-out call (hedge.DoFan's
// zero FanOut) over the shards.
func (p *studyPlan) planShards(loads []float64, o StudyOptions) {
	ls := manyLoads(loads)
	for _, tp := range StudyShardTopologies {
		at := func(w World, r Routing, s Strategy, load float64, clients int) Config {
			c := p.base
			c.World, c.Routing, c.Strategy, c.Load = w, r, s, load
			c.Clients, c.Fanout, c.Shards, c.Servers = clients, tp.Width, tp.Shards, tp.Shards*tp.Replicas
			switch {
			case o.Requests > 0:
				c.Requests = max(o.Requests/tp.Width, 20)
			case o.Quick:
				c.Requests = tp.QuickRequests
			default:
				c.Requests = tp.Requests
			}
			c.Warmup = c.Requests / 10
			return c
		}
		for _, w := range StudyManyWorlds {
			for _, clients := range StudyShardClients {
				for _, l := range ls {
					none := p.add(at(w, TwoChoice, None, l, clients), GroupShards)
					if none == nil {
						return // the study does not run the group
					}
					none.place = p.add(at(w, Random, None, l, 1), GroupShards)
					d := at(w, TwoChoice, Default, l, clients)
					d.FanCall = &hedge.FanOut{}
					p.add(d, GroupShards)
				}
			}
		}
	}
}

// planMany lays out the fan-out and clients groups: runs of the same
// number of leaves whatever the width, at the grid's loads that are in
// StudyManyLoads.
func (p *studyPlan) planMany(loads []float64, o StudyOptions) {
	ls := manyLoads(loads)
	leaves := studyLeaves
	if o.Quick {
		leaves = studyLeavesQuick
	}
	if o.Requests > 0 {
		leaves = o.Requests
	}
	at := func(w World, s Strategy, load float64, clients, width int) Config {
		c := p.base
		c.World, c.Routing, c.Strategy, c.Load = w, TwoChoice, s, load
		c.Clients, c.Fanout = clients, width
		c.Requests = max(leaves/width, 100)
		c.Warmup = c.Requests / 10
		return c
	}
	fanCall := func(c Config, fo hedge.FanOut) Config {
		c.FanCall = &fo
		return c
	}
	lowPriority := func(c Config) Config {
		c.LowPriorityCopies = true
		return c
	}
	// Fan-out requests of one client: all leaves, the first 95% of them,
	// and one canary first.
	for _, w := range StudyManyWorlds {
		for _, width := range StudyFanWidths {
			for _, l := range ls {
				p.add(at(w, None, l, 1, width), GroupFanOut)
				d := at(w, Default, l, 1, width)
				p.add(d, GroupFanOut)
				p.add(fanCall(d, hedge.FanOut{}), GroupFanOut)
				k := d
				k.FanoutNeed = width - max(1, width/20)
				p.add(k, GroupFanOut)
				p.add(fanCall(k, hedge.FanOut{}), GroupFanOut)
				p.add(fanCall(d, hedge.FanOut{Canaries: 1}), GroupFanOut)
			}
		}
	}
	// Clients sharing the servers, each with a Hedger of its own.
	for _, w := range StudyManyWorlds {
		for _, clients := range StudyClientCounts {
			for _, width := range StudyClientWidths {
				for _, l := range ls {
					d := at(w, Default, l, clients, width)
					p.add(d, GroupClients)
					p.add(lowPriority(d), GroupClients)
					if width > 1 {
						p.add(fanCall(d, hedge.FanOut{}), GroupClients)
					}
				}
			}
		}
	}
}

// StudySize returns how many points and runs (calibrations included) the
// study with these options has.
func StudySize(o StudyOptions) (points, runs int) {
	p := planStudy(o)
	return len(p.points), len(p.points)*p.runs + len(p.calibs)
}

type studyJob struct {
	p   *studyPoint
	c   *studyCalib
	run int
}

type studyDone struct {
	job studyJob
	res RunResult
}

// RunStudy runs the study grid of the spec on o.Workers goroutines and
// returns the results of the finished points in grid order. Calibration
// runs (one unhedged run per calibration point) go first, then the runs of
// the points that need no calibration, then those of the calibrated
// points. With o.OutDir set, results.json is rewritten atomically as
// points finish (at the first, then at most every two seconds) and at
// the end, and table.md and the plots are written at the end, also
// when ctx is cancelled (with the points finished by then; RunStudy then
// returns ctx's error along with them).
func RunStudy(ctx context.Context, o StudyOptions) ([]PointResult, error) {
	if err := CheckStudyGroups(o.Groups); err != nil {
		return nil, err
	}
	p := planStudy(o)
	workers := o.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	if o.OutDir != "" {
		if err := CheckOutDir(o.OutDir); err != nil {
			return nil, err
		}
	}
	total := len(p.calibs) + len(p.points)*p.runs
	bar := newProgress(o.Progress, total)

	jobs := make(chan studyJob)
	results := make(chan studyDone)
	for range workers {
		go func() {
			var s Simulator
			for j := range jobs {
				var c Config
				if j.c != nil {
					c = j.c.cfg
				} else {
					c = j.p.cfg
					c.Seed = RunSeed(c.Seed, j.run)
				}
				res, err := s.Run(c)
				if err != nil {
					panic(fmt.Sprintf("sim: study point %q is invalid: %v", c.String(), err)) // a bug in planStudy
				}
				results <- studyDone{j, res}
			}
		}()
	}

	var writeErr error
	var flushed time.Time
	flush := func() {
		if o.OutDir == "" || writeErr != nil {
			return
		}
		flushed = time.Now()
		writeErr = writeResultsJSON(o.OutDir, collect(p))
	}

	// One stream of jobs: the calibrations first, then the points that
	// need none (so that an interrupted study has kept points early), then
	// the calibrated points, each held back until its calibration is done
	// (by then it always is, except in tiny studies).
	var list []studyJob
	for _, c := range p.calibs {
		list = append(list, studyJob{c: c})
	}
	for _, calibrated := range []bool{false, true} {
		for _, sp := range p.points {
			if (sp.calib != nil) != calibrated {
				continue
			}
			sp.runs = make([]RunResult, p.runs)
			for r := range p.runs {
				list = append(list, studyJob{p: sp, run: r})
			}
		}
	}
	ready := func(j studyJob) bool {
		if j.p == nil || j.p.calib == nil {
			return true
		}
		if !j.p.calib.done {
			return false
		}
		if !j.p.delaySet {
			// Set once, before the point's first run is sent: the send
			// publishes it to the workers, which only read it.
			j.p.cfg.Delay = j.p.calib.res.UnitP95
			j.p.delaySet = true
		}
		return true
	}
	sent, got := 0, 0
	var err error
	cancelled := ctx.Done()
	for got < sent || (sent < len(list) && err == nil) {
		var feed chan studyJob
		var next studyJob
		if sent < len(list) && err == nil && ready(list[sent]) {
			feed, next = jobs, list[sent]
		}
		select {
		case feed <- next:
			sent++
		case d := <-results:
			got++
			bar.step()
			if d.job.c != nil {
				d.job.c.res, d.job.c.done = d.res, true
				continue
			}
			sp := d.job.p
			sp.runs[d.job.run] = d.res
			sp.left--
			if sp.left == 0 {
				sp.done = true
				sp.sum = Summarize(sp.cfg, sp.runs)
				if time.Since(flushed) >= flushEvery {
					flush()
				}
			}
		case <-cancelled:
			err = ctx.Err()
			cancelled = nil // stop selecting it; drain the runs in flight
		}
	}
	close(jobs)
	bar.finish()
	out := collect(p)
	if o.OutDir != "" {
		flush()
		if writeErr == nil {
			writeErr = writeReport(o.OutDir, out)
		}
	}
	return out, errors.Join(err, writeErr)
}

// flushEvery is how often at most RunStudy rewrites results.json while
// points finish. Each rewrite encodes every finished point, so that one
// per point made the study's bookkeeping grow with the square of its
// size: about a minute of CPU over the full study's 1,653 points, on the
// goroutine that feeds the workers.
const flushEvery = 2 * time.Second

// CheckOutDir creates dir if needed and checks that a file can be written
// in it.
func CheckOutDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("output directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// writeAtomic writes data to dir/name through a temporary file and a
// rename, so a reader (or an interruption) never sees half a file.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// progress draws a one-line progress bar on a terminal, redrawn at most
// five times a second; on anything else (a log, CI) it prints a plain line
// at every tenth of the work.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	done  int
	tenth int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	b := &progress{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *progress) step() {
	b.done++
	if b.w == nil {
		return
	}
	now := time.Now()
	if !b.tty {
		if t := 10 * b.done / max(b.total, 1); t > b.tenth {
			b.tenth = t
			fmt.Fprintf(b.w, "%d/%d runs (%d%%), elapsed %s\n", b.done, b.total, 10*t, now.Sub(b.start).Round(time.Second))
		}
		return
	}
	if now.Sub(b.last) < 200*time.Millisecond && b.done < b.total {
		return
	}
	b.last = now
	b.draw(now)
}

func (b *progress) draw(now time.Time) {
	const width = 30
	frac := float64(b.done) / float64(max(b.total, 1))
	n := int(frac * width)
	el := now.Sub(b.start)
	eta := "?"
	if b.done > 0 {
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d runs %3.0f%%  elapsed %s  eta %s   ",
		strings.Repeat("=", n), strings.Repeat(" ", width-n), b.done, b.total, 100*frac, el.Round(time.Second), eta)
}

func (b *progress) finish() {
	if b.w == nil || !b.tty {
		return
	}
	b.draw(time.Now())
	fmt.Fprintln(b.w)
}

// manyLoads returns the grid's loads that are in StudyManyLoads, where
// the fan-out, clients and shards groups run, or all of them when none
// is (a grid of other loads).
func manyLoads(loads []float64) []float64 {
	var ls []float64
	for _, l := range loads {
		if slices.Contains(StudyManyLoads, l) {
			ls = append(ls, l)
		}
	}
	if ls == nil {
		return loads
	}
	return ls
}
