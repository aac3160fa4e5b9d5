package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/decide"
)

// shardConfig is a small sharded world: shards shards of replicas
// servers each, requests of width leaves, in the stalls world.
func shardConfig(shards, replicas, width int) Config {
	c := base()
	c.World, c.Load = Stalls, 0.3
	c.Servers, c.Shards, c.Fanout = shards*replicas, shards, width
	c.Requests, c.Warmup = 3000, 300
	return c
}

// Every copy of leaf i of a request, the primary, its hedge and a hedge
// asked for again after a refusal alike, lands on a server of shard i mod
// Shards, and never on a server that holds another copy of the leaf:
// under every routing, with tied copies and their spare form, with one
// client and ten, and with load reports, where decide.Policy.Place picks
// among the picker's candidates.
func TestShardMapping(t *testing.T) {
	fan := func(c Config) Config {
		c.Strategy, c.FanCall = Default, &hedge.FanOut{}
		return c
	}
	cases := []struct {
		name    string
		c       Config
		hedges  bool // the case must send copies beyond the primaries
		retries bool // and some of them after the Policy refused them once
	}{
		{"none two-choice", shardConfig(4, 3, 8), false, false},
		{"default two-choice", fan(shardConfig(4, 3, 8)), true, true},
		{"default per leaf", func() Config { c := shardConfig(4, 3, 8); c.Strategy = Default; return c }(), true, true},
		{"default random", func() Config { c := fan(shardConfig(4, 3, 8)); c.Routing = Random; return c }(), true, true},
		{"default least-loaded", func() Config { c := fan(shardConfig(4, 3, 8)); c.Routing = LeastLoaded; return c }(), true, true},
		{"default ten clients", func() Config { c := fan(shardConfig(4, 3, 8)); c.Clients = 10; return c }(), true, true},
		{"default load reports", func() Config { c := fan(shardConfig(4, 3, 8)); c.Clients, c.LoadReports = 10, true; return c }(), true, true},
		{"default two replicas", fan(shardConfig(5, 2, 10)), true, true},
		{"hedge-fixed", func() Config { c := shardConfig(4, 3, 8); c.Strategy, c.Delay = HedgeFixed, 2; return c }(), true, false},
		{"tied", func() Config { c := shardConfig(4, 3, 8); c.Strategy = Tied; return c }(), true, false},
		{"tied two-choice", func() Config { c := shardConfig(4, 3, 8); c.Strategy = TiedTwoChoice; return c }(), true, false},
		{"tied-spare", func() Config { c := shardConfig(4, 3, 8); c.Strategy = TiedSpare; return c }(), false, false},
	}
	defer func() { checkCopy = nil }()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			R := c.ShardReplicas()
			type slotGen struct {
				slot int32
				gen  uint32
			}
			next := map[int32]int{}      // a parent's leaves started so far, by its arrival index
			leaf := map[slotGen]int{}    // the leaf a live slot runs
			var copies, hedges, late int // copies placed, beyond the primaries, and those later than their first due time
			var bad []string
			checkCopy = func(e *engine, slot int32, r *request, q int32) {
				copies++
				k := int(r.n) - 1
				key := slotGen{slot, r.gen}
				if k == 0 {
					leaf[key] = next[r.idx]
					next[r.idx]++
				}
				j, ok := leaf[key]
				if !ok {
					bad = append(bad, fmt.Sprintf("copy %d of a slot with no primary seen", k))
					return
				}
				if want := j % c.Shards; int(q)/R != want {
					bad = append(bad, fmt.Sprintf("request %d leaf %d copy %d on server %d (shard %d), want shard %d", r.idx, j, k, q, int(q)/R, want))
				}
				for i := range k {
					if r.copies[i].q == q {
						bad = append(bad, fmt.Sprintf("request %d leaf %d copy %d on server %d, which holds copy %d", r.idx, j, k, q, i))
					}
				}
				if k > 0 {
					hedges++
					if r.plan.Delay > 0 && r.plan.Delay != hedge.Never && toDuration(e.now) > r.plan.Start+r.plan.Delay {
						late++
					}
				}
			}
			var s Simulator
			res, err := s.Run(c)
			checkCopy = nil
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				t.Fatalf("%d misplaced copies of %d, the first: %s", len(bad), copies, strings.Join(bad[:min(5, len(bad))], "; "))
			}
			if copies < c.Requests*c.Fanout {
				t.Fatalf("%d copies placed for %d requests of %d leaves", copies, c.Requests, c.Fanout)
			}
			if tc.hedges && hedges == 0 {
				t.Errorf("no copy beyond the primaries: the case checks nothing of hedges")
			}
			if tc.retries && late == 0 {
				t.Errorf("no copy went after a refusal: the case checks nothing of copies asked for again")
			}
			t.Logf("%d copies, %d beyond the primaries, %d of them after a refusal; p99 %.3g", copies, hedges, late, res.P99)
		})
	}
}

// Shards of 0 and 1 are the same world: one replica set, bit for bit.
func TestShardsOneIsFlat(t *testing.T) {
	c := base()
	c.World, c.Strategy, c.Fanout, c.FanCall = Stalls, Default, 5, &hedge.FanOut{}
	c.Requests, c.Warmup = 4000, 400
	var s Simulator
	a, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Shards = 1
	b, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if a.P50 != b.P50 || a.P99 != b.P99 || a.P999 != b.P999 || a.Copies != b.Copies || a.Refused != b.Refused {
		t.Errorf("shards 1 differs from shards 0: p50 %v/%v p99 %v/%v p99.9 %v/%v copies %v/%v", a.P50, b.P50, a.P99, b.P99, a.P999, b.P999, a.Copies, b.Copies)
	}
}

// A bad Shards is refused with a message that says what to do.
func TestShardsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"negative", func(c *Config) { c.Shards = -2 }, "shards = -2: use 0 or 1"},
		{"does not divide", func(c *Config) { c.Servers, c.Shards, c.Fanout = 10, 3, 3 }, "shards = 3 does not divide servers = 10 (3 per shard, 1 left over): every shard has servers/shards replicas; use servers = 9 (3 replicas each) or 12 (4 each)"},
		{"more shards than servers", func(c *Config) { c.Servers, c.Shards, c.Fanout = 10, 20, 20 }, "shards = 20 with servers = 10: every shard needs at least one server; use servers = shards x replicas per shard, e.g. servers = 40"},
		{"fanout not a multiple", func(c *Config) { c.Servers, c.Shards, c.Fanout = 60, 30, 40 }, "shards = 30 with fanout = 40: leaf i goes to shard i mod shards, so the shards share the leaves evenly only when fanout is a multiple of shards; use fanout = 30"},
		{"one leaf", func(c *Config) { c.Servers, c.Shards = 60, 30 }, "with fanout = 1"},
		{"pool", func(c *Config) { c.Servers, c.Shards, c.Fanout, c.Routing = 60, 30, 30, Pool }, "pool routing with shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: %v, want an error wrapping ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v\nwant it to say %q", err, tc.want)
			}
		})
	}
	ok := DefaultConfig()
	ok.Servers, ok.Shards, ok.Fanout = 300, 100, 1000
	if err := ok.Validate(); err != nil {
		t.Errorf("100 shards of 3, 1,000 leaves: %v", err)
	}
}

// shardRatios runs none and the fan-out call (the zero hedge.Config,
// DoFan's zero FanOut) in c, paired by seed, and none with random
// placement within the shards: the request percentiles of the call over
// none's, of none over random placement's, and the call's extra leaf
// requests.
func shardRatios(t *testing.T, c Config, runs int) (hedged, place map[string]Estimate, extra float64) {
	t.Helper()
	n, d, rnd := c, c, c
	n.Strategy = None
	d.Strategy, d.Hedge, d.FanCall = Default, &hedge.Config{}, &hedge.FanOut{}
	rnd.Strategy, rnd.Routing = None, Random
	hedged, sd := pairedRatios(t, n, d, runs)
	place, _ = pairedRatios(t, rnd, n, runs)
	return hedged, place, sd.Copies.Value/float64(c.Fanout) - 1
}

func fmtRatios(m map[string]Estimate) string {
	return fmt.Sprintf("p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f",
		m["p50"].Value, m["p50"].SE, m["p99"].Value, m["p99"].SE, m["p99.9"].Value, m["p99.9"].SE)
}

// In a small sharded world, 10 shards of 3 replicas and requests that read
// one leaf of each, the fan-out call over the shards cuts the stall tail
// against a client that balances each shard's replicas by its own requests
// in flight without hedging (a request p99 at most 0.5 of its, for at
// most 5% more leaf requests), and that client's placement beats random
// placement within the shard by itself. Without stalls, the call is
// never worse than that client (p50 and p99 within 5% and two standard
// errors). The runs are short and seeded: the numbers are the same on
// every run.
func TestShardsGainSmallWorld(t *testing.T) {
	requests, runs := 10_000, 4
	c := shardConfig(10, 3, 10)
	c.Requests, c.Warmup = requests, requests/10
	c.Seed = DeriveSeed(67, "shards small world")
	h, pl, extra := shardRatios(t, c, runs)
	t.Logf("stalls, 0.3: call/none %s, %.2f%% extra leaves; none/random %s", fmtRatios(h), 100*extra, fmtRatios(pl))
	if e := h["p99"]; math.IsNaN(e.Value) || e.Value+2*e.SE > 0.5 {
		t.Errorf("stalls: request p99 %.3f ± %.3f of none's, want at most 0.5", e.Value, e.SE)
	}
	if extra > 0.05 || extra <= 0 {
		t.Errorf("stalls: %.2f%% extra leaf requests, want some, at most 5%%", 100*extra)
	}
	if e := pl["p99"]; math.IsNaN(e.Value) || e.Value+2*e.SE >= 1 {
		t.Errorf("stalls: none's request p99 %.3f ± %.3f of random placement's, want below 1", e.Value, e.SE)
	}
	for _, w := range []World{Noise, BigJobs} {
		c.World = w
		h, _, extra := shardRatios(t, c, runs)
		t.Logf("%s, 0.3: call/none %s, %.2f%% extra leaves", w, fmtRatios(h), 100*extra)
		for _, q := range []string{"p50", "p99"} {
			if e := h[q]; math.IsNaN(e.Value) || e.Value > 1.05+2*e.SE {
				t.Errorf("%s: request %s %.3f ± %.3f of none's, want at most 1.05", w, q, e.Value, e.SE)
			}
		}
	}
}

// The shards group runs only when named; then each topology's none
// carries the placement's own gain against random placement in the same
// shards (a "none" of one client, shared by the ten clients' none, whose
// random placement reads no load), the fan-out call its ratios to the
// none of its own clients, and table.md a section per topology.
func TestStudyShardsGroup(t *testing.T) {
	def, _ := StudySize(StudyOptions{Runs: 2, Requests: 3000, Loads: []float64{0.3}})
	all, _ := StudySize(StudyOptions{Runs: 2, Requests: 3000, Loads: []float64{0.3}, Groups: []string{"all"}})
	only, _ := StudySize(StudyOptions{Runs: 2, Requests: 3000, Loads: []float64{0.3}, Groups: []string{GroupShards}})
	want := len(StudyShardTopologies) * len(StudyManyWorlds) * (2*len(StudyShardClients) + 1)
	if only != want || all != def+only {
		t.Fatalf("points: %d in the default study, %d with all groups, %d in the shards group alone; want %d in it, none of them in the default study", def, all, only, want)
	}
	if err := CheckStudyGroups([]string{"shard"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown study group "shard": use all or some of main,`) {
		t.Errorf("CheckStudyGroups(shard): %v", err)
	}
	dir := t.TempDir()
	res, err := RunStudy(context.Background(), StudyOptions{Seed: 7, Workers: 2, Runs: 2, Requests: 3000, Loads: []float64{0.3}, Groups: []string{GroupShards}, OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != want {
		t.Fatalf("%d points, want %d", len(res), want)
	}
	var placed, hedged int
	for i := range res {
		r := &res[i]
		if r.Shards < 2 || r.Servers%r.Shards != 0 || r.Fanout%r.Shards != 0 || r.Groups[0] != GroupShards {
			t.Errorf("point %+v is not sharded", r)
		}
		switch {
		case r.Strategy == None.String() && r.Routing == TwoChoice.String():
			if r.PlacementP50 == nil || r.PlacementP99 == nil || r.PlacementP999 == nil {
				t.Errorf("%s %d shards, %d clients: none without its placement gain", r.World, r.Shards, r.Clients)
			}
			placed++
		case r.Strategy == Default.String():
			if !r.FanCall || r.RatioP50 == nil || r.RatioP999 == nil || r.PlacementP99 != nil {
				t.Errorf("%s %d shards, %d clients: the fan-out call without its ratios to none", r.World, r.Shards, r.Clients)
			}
			hedged++
		case r.Routing != Random.String() || r.Clients > 1:
			t.Errorf("unexpected point %s %s %s clients %d", r.World, r.Routing, r.Strategy, r.Clients)
		}
	}
	if placed == 0 || hedged == 0 {
		t.Fatalf("%d none, %d fan-out call points", placed, hedged)
	}
	table, err := os.ReadFile(filepath.Join(dir, "table.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range StudyShardTopologies {
		h := fmt.Sprintf("### %d shards x %d replicas, %d leaves", tp.Shards, tp.Replicas, tp.Width)
		if !strings.Contains(string(table), h) {
			t.Errorf("table.md lacks %q", h)
		}
	}
	if !strings.Contains(string(table), "| stalls | 10 | 0.3 |") {
		t.Errorf("table.md lacks the stalls row of ten clients at load 0.3:\n%s", table)
	}
}

// The goals of sharded fan-outs that the library's defaults meet, at the
// size of a unit test: with 30 shards of 3 replicas and requests that
// read one leaf of each, in the stalls world at load 0.3, the fan-out
// call's request p99 and p99.9 are at most 0.5 of none's (none balancing
// each shard's replicas by the client's own requests in flight), for at
// most 5% more leaf requests; at load 0.5 without stalls its p50 and p99
// are within 5% of none's (two standard errors). The full grid is the
// study's shards group (hedge study --groups shards).
func TestShardsGoalGuard(t *testing.T) {
	requests, runs := 10_000, 4
	c := shardConfig(30, 3, 30)
	c.Requests, c.Warmup = requests, requests/10
	c.Seed = DeriveSeed(67, "shards goal guard")
	h, _, extra := shardRatios(t, c, runs)
	t.Logf("stalls, 0.3: call/none %s, %.2f%% extra leaves", fmtRatios(h), 100*extra)
	for _, q := range []string{"p99", "p99.9"} {
		if e := h[q]; math.IsNaN(e.Value) || e.Value > 0.5 {
			t.Errorf("stalls: request %s %.3f ± %.3f of none's, want at most 0.5", q, e.Value, e.SE)
		}
	}
	if extra > 0.05 {
		t.Errorf("stalls: %.2f%% extra leaf requests, want at most 5%%", 100*extra)
	}
	c.World, c.Load = Noise, 0.5
	h, _, extra = shardRatios(t, c, runs)
	t.Logf("noise, 0.5: call/none %s, %.2f%% extra leaves", fmtRatios(h), 100*extra)
	for _, q := range []string{"p50", "p99"} {
		if e := h[q]; math.IsNaN(e.Value) || e.Value > 1.05+2*e.SE {
			t.Errorf("noise: request %s %.3f ± %.3f of none's, want at most 1.05", q, e.Value, e.SE)
		}
	}
}

var shardsGrid = flag.Bool("shards-grid", false, "run TestShardsTailAtScale and TestShardsTwoReplicas: what holds the fan-out call back over shards (a few minutes)")

// TestShardsTailAtScale measures the Tail at Scale's setting, 100 shards
// of 3 replicas and requests of 1,000 leaves in the stalls world at load
// 0.3, with the fan-out call as the library's defaults make it and with
// the rules that hold it back lifted one by one:
//
//	go test ./internal/sim -run TestShardsTailAtScale -v -args -shards-grid
//
// Four runs of 3,000 requests each (3,000,000 leaves a run). It prints
// the request's p50, p99 and p99.9 over none's, the extra leaf requests
// and the refusals per leaf; it asserts nothing.
func TestShardsTailAtScale(t *testing.T) {
	if !*shardsGrid {
		t.Skip("a measurement, not a test: run with -shards-grid")
	}
	c := shardConfig(100, 3, 1000)
	c.Requests, c.Warmup = 3000, 300
	c.Seed = DeriveSeed(67, "tail at scale")
	shardVariants(t, c)
}

// TestShardsTwoReplicas is TestShardsTailAtScale for 30 shards of 2
// replicas and requests of 30 leaves, at loads 0.3 and 0.5, four runs of
// 30,000 requests:
//
//	go test ./internal/sim -run TestShardsTwoReplicas -v -args -shards-grid
func TestShardsTwoReplicas(t *testing.T) {
	if !*shardsGrid {
		t.Skip("a measurement, not a test: run with -shards-grid")
	}
	for _, load := range []float64{0.3, 0.5} {
		c := shardConfig(30, 2, 30)
		c.Load, c.Requests, c.Warmup = load, 30_000, 3000
		c.Seed = DeriveSeed(67, fmt.Sprint("two replicas ", load))
		t.Logf("load %g:", load)
		shardVariants(t, c)
	}
}

// shardVariants runs none and the fan-out call in c with the library's
// defaults and with its budgets and rules lifted one by one, and prints
// for each the request's percentiles over none's, the extra leaf
// requests and the refusals per leaf.
func shardVariants(t *testing.T, c Config) {
	t.Helper()
	n := c
	n.Strategy = None
	sn := runPoint(t, n, 4)
	for _, v := range []struct {
		name string
		h    hedge.Config
		fo   hedge.FanOut
	}{
		{"defaults", hedge.Config{}, hedge.FanOut{}},
		{"no spare-capacity rule", hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad}, hedge.FanOut{}},
		{"no payoff rule nor head wait", hedge.Config{PayoffWinRate: -1}, hedge.FanOut{}},
		{"no Hedger budget", hedge.Config{NoBudget: true}, hedge.FanOut{}},
		{"no Hedger budget, FanOut.Hedges 100", hedge.Config{NoBudget: true}, hedge.FanOut{Hedges: 100}},
		{"no Hedger budget, FanOut.Hedges 100, no spare-capacity rule", hedge.Config{NoBudget: true, MaxReplicaLoad: hedge.AnyReplicaLoad}, hedge.FanOut{Hedges: 100}},
		{"no Hedger budget, FanOut.Hedges 100, no payoff rule nor head wait", hedge.Config{NoBudget: true, PayoffWinRate: -1}, hedge.FanOut{Hedges: 100}},
		{"no Hedger budget, FanOut.Hedges 100, three copies", hedge.Config{NoBudget: true, MaxAttempts: 3}, hedge.FanOut{Hedges: 100}},
	} {
		d := c
		h, fo := v.h, v.fo
		d.Strategy, d.Hedge, d.FanCall = Default, &h, &fo
		sd := runPoint(t, d, 4)
		r := map[string]Estimate{
			"p50":   pairedRatio(sd, sn, func(r *RunResult) float64 { return r.P50 }),
			"p99":   pairedRatio(sd, sn, p99Of),
			"p99.9": pairedRatio(sd, sn, func(r *RunResult) float64 { return r.P999 }),
		}
		var refused []string
		for why := range decide.NumRefusals {
			var k int64
			for _, run := range sd.Runs {
				k += run.Refused[why]
			}
			if k > 0 {
				refused = append(refused, fmt.Sprintf("%s %.4f", decide.Refusal(why), float64(k)/float64(len(sd.Runs)*c.Requests*c.Fanout)))
			}
		}
		t.Logf("| %s | %s | %.2f%% | %s |", v.name, fmtRatios(r), 100*(sd.Copies.Value/float64(c.Fanout)-1), strings.Join(refused, ", "))
	}
}
