package sim_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"
)

// agreeRequest is one request of a scenario that both engines run: when it
// arrives, how long each copy takes (in milliseconds, the simulator's time
// unit), and the caller's deadline relative to arrival (0: none; the
// simulator has no deadlines, so the scenario gives none where it runs).
type agreeRequest struct {
	at       float64
	sizes    []float64
	deadline float64
}

// decision is what an engine decided for one request: the copies that went
// (index and time), and the copies refused, by reason.
type decision struct {
	sent    []string // "copy@time"
	refused map[hedge.Refusal]int
}

func (d decision) String() string { return fmt.Sprintf("sent %v refused %v", d.sent, d.refused) }

// TestLiveAndSimulatorAgree drives the live engine (on synctest's clock) and
// the simulator (on virtual time) through one scripted scenario, with a
// budget that runs dry, a cap on hedges in flight and a third copy, and
// checks that they make the same decisions: which copies went, when, and
// why the others did not. Both consult decide.Policy; this test is what
// keeps either engine from growing a rule of its own.
func TestLiveAndSimulatorAgree(t *testing.T) {
	cfg := func() hedge.Config {
		b, err := hedge.NewBudget(0.3, 2)
		if err != nil {
			t.Fatal(err)
		}
		return hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), Budget: b, MaxHedgesInFlight: 1, MaxAttempts: 3}
	}
	reqs := []agreeRequest{
		{0, []float64{50, 5, 5}, 0},    // hedge at 10 wins at 15
		{1, []float64{30, 40, 40}, 0},  // hedge at 11 refused: in flight
		{20, []float64{45, 3, 3}, 0},   // hedge at 30, wins
		{21, []float64{60, 50, 7}, 0},  // hedge at 31 refused: budget dry
		{40, []float64{33, 40, 2}, 0},  // hedges at 50, third at 60 refused: in flight
		{90, []float64{1.5}, 0},        // primary alone
		{91, []float64{2.5}, 0},        // refill the budget
		{92, []float64{1}, 0},          //
		{93, []float64{1}, 0},          //
		{100, []float64{27, 30, 4}, 0}, // hedge at 110, third at 120 refused: in flight
		{131, []float64{44, 2, 2}, 0},  // hedge at 141 wins
		{200, []float64{80, 60, 9}, 0}, // hedges at 210, third at 220 (if tokens allow)
		{300, []float64{12, 1}, 15},    // deadline: at 310 less than the delay is left
		{400, []float64{3, 1}, 5},      // deadline nearer than the delay: no timer at all
	}
	c := cfg()
	// Plain hedging: the rules of the zero Config have their own scenario
	// below.
	c.MaxReplicaLoad, c.PayoffWinRate = hedge.AnyReplicaLoad, -1
	live := runLive(t, c, reqs, 20)
	simd := runSim(t, c, reqs, 20, sim.LeastLoaded)
	kinds := map[hedge.Refusal]int{}
	for i := range reqs {
		t.Logf("request %d: %v", i, live[i])
		if fmt.Sprint(live[i]) != fmt.Sprint(simd[i]) {
			t.Errorf("request %d: live engine %v, simulator %v", i, live[i], simd[i])
		}
		for k, n := range live[i].refused {
			kinds[k] += n
		}
	}
	// The scenario must exercise what it claims to.
	for _, k := range []hedge.Refusal{hedge.RefusedBudget, hedge.RefusedInFlight, hedge.RefusedDeadline} {
		if kinds[k] == 0 {
			t.Errorf("no copy was refused for %v: the scenario does not test it (refusals %v)", k, kinds)
		}
	}
}

// TestLiveAndSimulatorAgreeOnDefaultRules runs the zero Config's rules
// through both engines over two replicas, where two choices look at both
// (and a tie leaves the two replicas in the same state, whichever is
// taken): a primary at the head of its replica whose copy waits three
// delays, a cancelled loser that keeps counting on its replica, a hedge
// refused because its replica is busy and asked for again a delay later,
// and hedges that lose expensively until the payoff rule stops them. No
// replica ever holds two copies at once, so that the simulator's queues
// and the live engine's parallel copies take the same time, and no two
// events fall on the same instant.
func TestLiveAndSimulatorAgreeOnDefaultRules(t *testing.T) {
	cfg := hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), NoBudget: true}
	reqs := []agreeRequest{
		{0, []float64{50, 5}, 0},  // at the head: hedge held at 10, goes at 30, wins at 35; the primary's replica keeps a ghost until 115
		{40, []float64{8}, 0},     // goes to the replica without the ghost
		{50, []float64{80, 5}, 0}, // from 60 to 110 its copy's replica has the ghost (busy, which the spare-capacity rule finds first); goes at 120, past its head wait, wins at 125
	}
	// Then requests whose hedges lose, each after running four delays
	// (copies of big requests), until the payoff rule stops them.
	for i := range 60 {
		reqs = append(reqs, agreeRequest{at: float64(200 + 100*i), sizes: []float64{70, 70}})
	}
	live := runLive(t, cfg, reqs, 2)
	simd := runSim(t, cfg, reqs, 2, sim.TwoChoice)
	kinds := map[hedge.Refusal]int{}
	for i := range reqs {
		if fmt.Sprint(live[i]) != fmt.Sprint(simd[i]) {
			t.Errorf("request %d: live engine %v, simulator %v", i, live[i], simd[i])
		}
		for k, n := range live[i].refused {
			kinds[k] += n
		}
	}
	if want := "sent [0@50 1@120] refused map[busy:6]"; fmt.Sprint(live[2]) != want {
		t.Errorf("request 2: %v, want %s", live[2], want)
	}
	for _, k := range []hedge.Refusal{hedge.RefusedBusy, hedge.RefusedPayoff, hedge.RefusedHead} {
		if kinds[k] == 0 {
			t.Errorf("no copy was refused for %v: the scenario does not test it (refusals %v)", k, kinds)
		}
	}
	t.Logf("refusals %v", kinds)
}

// TestLiveAndSimulatorAgreeOnAFanOut sends the leaves of two fan-outs,
// each all at once, through both engines: the hedges of a fan-out's
// leaves come due at the same instant and compete for the budget. The
// first fan-out's eight leaves find a full bucket of 3 tokens (each leaf
// credits 0.5, but the bucket holds at most its burst): three hedges go
// and five are refused. The second's four leaves find the bucket empty
// and credit it with 2 tokens: two go, two are refused. Which leaf gets a
// token depends on the order an engine serves simultaneous events in, so
// each fan-out's decisions are compared as a multiset, and the counts
// above, worked from the budget's rules, are checked too.
func TestLiveAndSimulatorAgreeOnAFanOut(t *testing.T) {
	cfg := func() hedge.Config { // each engine spends from a fresh bucket
		b, err := hedge.NewBudget(0.5, 3)
		if err != nil {
			t.Fatal(err)
		}
		return hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), Budget: b, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}
	}
	var reqs []agreeRequest
	for range 8 {
		reqs = append(reqs, agreeRequest{at: 0, sizes: []float64{30, 5}})
	}
	for range 4 {
		reqs = append(reqs, agreeRequest{at: 100, sizes: []float64{30, 5}})
	}
	live := runLive(t, cfg(), reqs, 24)
	simd := runSim(t, cfg(), reqs, 24, sim.LeastLoaded)
	for _, fan := range [][2]int{{0, 8}, {8, 12}} {
		var l, s []string
		for i := fan[0]; i < fan[1]; i++ {
			l, s = append(l, fmt.Sprint(live[i])), append(s, fmt.Sprint(simd[i]))
		}
		slices.Sort(l)
		slices.Sort(s)
		if !slices.Equal(l, s) {
			t.Errorf("fan-out of leaves %d to %d: live engine %v, simulator %v", fan[0], fan[1]-1, l, s)
		}
		t.Logf("fan-out of leaves %d to %d: %v", fan[0], fan[1]-1, l)
	}
	count := func(from, to int) (hedged, refused int) {
		for i := from; i < to; i++ {
			if len(live[i].sent) > 1 {
				hedged++
			}
			refused += live[i].refused[hedge.RefusedBudget]
		}
		return hedged, refused
	}
	if h, r := count(0, 8); h != 3 || r != 5 {
		t.Errorf("first fan-out: %d hedged, %d refused by the budget; want 3 and 5", h, r)
	}
	if h, r := count(8, 12); h != 2 || r != 2 {
		t.Errorf("second fan-out: %d hedged, %d refused by the budget; want 2 and 2", h, r)
	}
}

// runLive runs the scenario through hedge.Do, each request on its own
// goroutine and operation class, on synctest's fake clock.
func runLive(t *testing.T, cfg hedge.Config, reqs []agreeRequest, replicas int) []decision {
	out := make([]decision, len(reqs))
	synctest.Test(t, func(t *testing.T) {
		cfg.MaxOps = len(reqs)
		cfg.Replicas = replicas
		h, err := hedge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Go(func() {
				time.Sleep(time.Duration(r.at * float64(time.Millisecond)))
				ctx := context.Background()
				if r.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.deadline*float64(time.Millisecond)))
					defer cancel()
				}
				hedge.Do(ctx, h, fmt.Sprint(i), func(ctx context.Context, a hedge.Attempt) (int, error) {
					at := float64(time.Since(t0)) / float64(time.Millisecond)
					mu.Lock()
					out[i].sent = append(out[i].sent, fmt.Sprintf("%d@%g", a.Index, at))
					mu.Unlock()
					select {
					case <-time.After(time.Duration(r.sizes[a.Index] * float64(time.Millisecond))):
						return a.Index, nil
					case <-ctx.Done():
						return 0, ctx.Err()
					}
				})
			})
		}
		wg.Wait()
		for i := range reqs {
			st := h.OpStats(fmt.Sprint(i))
			out[i].refused = refusals(map[hedge.Refusal]int64{
				hedge.RefusedBudget:   st.Refused[hedge.RefusedBudget],
				hedge.RefusedInFlight: st.Refused[hedge.RefusedInFlight],
				hedge.RefusedDeadline: st.Refused[hedge.RefusedDeadline],
				hedge.RefusedReplicas: st.Refused[hedge.RefusedReplicas],
				hedge.RefusedBusy:     st.Refused[hedge.RefusedBusy],
				hedge.RefusedPayoff:   st.Refused[hedge.RefusedPayoff],
				hedge.RefusedHead:     st.Refused[hedge.RefusedHead],
			})
			slices.Sort(out[i].sent)
		}
		time.Sleep(time.Second) // the Hedger's timer goroutine lingers
	})
	return out
}

// runSim runs the scenario through the simulator's Default strategy with
// the same hedge.Config, on servers where no copy ever queues (the
// scenario sees to it).
func runSim(t *testing.T, cfg hedge.Config, reqs []agreeRequest, servers int, routing sim.Routing) []decision {
	c := sim.DefaultConfig()
	c.Strategy = sim.Default
	c.Hedge = &cfg
	c.Servers = servers
	c.Routing = routing
	var sc sim.Script
	for _, r := range reqs {
		sc.Requests = append(sc.Requests, sim.ScriptedRequest{At: r.at, Sizes: r.sizes, Deadline: r.deadline})
	}
	out := make([]decision, len(reqs))
	raw := make([]map[hedge.Refusal]int64, len(reqs))
	var s sim.Simulator
	s.Trace = func(ev sim.TraceEvent) {
		if ev.Copy >= 0 {
			out[ev.Request].sent = append(out[ev.Request].sent, fmt.Sprintf("%d@%g", ev.Copy, math.Round(ev.At*1e6)/1e6))
			return
		}
		if raw[ev.Request] == nil {
			raw[ev.Request] = map[hedge.Refusal]int64{}
		}
		raw[ev.Request][ev.Refused]++
	}
	if _, err := s.RunScript(c, sc); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i].refused = refusals(raw[i])
		slices.Sort(out[i].sent)
	}
	return out
}

// refusals keeps the non-zero counts.
func refusals(m map[hedge.Refusal]int64) map[hedge.Refusal]int {
	out := map[hedge.Refusal]int{}
	for k, n := range m {
		if n > 0 {
			out[k] = int(n)
		}
	}
	return out
}

// TestStrategiesArePresets: the study's strategies are hedge.Configs, and
// the Default strategy runs whatever hedge.Config it is given: a preset's
// Config run through Default gives the very same run.
func TestStrategiesArePresets(t *testing.T) {
	base := sim.DefaultConfig()
	base.World, base.Load, base.Requests, base.Warmup = sim.Stalls, 0.7, 60_000, 6_000
	for _, st := range []sim.Strategy{sim.HedgeFixed, sim.HedgeP95Live, sim.HedgeQuietBudget} {
		c := base
		c.Strategy, c.Delay = st, 3
		h, ok := c.HedgeConfig()
		if !ok {
			t.Fatalf("%v has no hedge.Config", st)
		}
		c.LiveFeed = sim.FeedClient // the preset's own rule, which Default would not pick
		preset, err := sim.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		d := c
		d.Strategy, d.Hedge = sim.Default, &h
		viaDefault, err := sim.Run(d)
		if err != nil {
			t.Fatal(err)
		}
		if preset.P999 != viaDefault.P999 || preset.HedgedFraction != viaDefault.HedgedFraction || preset.ExtraWork != viaDefault.ExtraWork {
			t.Errorf("%v: preset p99.9 %v hedged %v work %v; the same hedge.Config through default: %v %v %v",
				st, preset.P999, preset.HedgedFraction, preset.ExtraWork, viaDefault.P999, viaDefault.HedgedFraction, viaDefault.ExtraWork)
		}
	}
	// Default with no Config is the zero hedge.Config: its budget bounds
	// the hedged fraction near 10% even where every request is slow.
	c := base
	c.World, c.Load, c.Strategy = sim.BigJobs, 0.9, sim.Default
	zero, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Hedge = &hedge.Config{}
	explicit, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(zero) != fmt.Sprint(explicit) {
		t.Errorf("default with a nil Hedge %+v differs from an explicit zero hedge.Config %+v", zero, explicit)
	}
	if zero.HedgedFraction <= 0 || zero.HedgedFraction > 0.1+10.0/float64(c.Requests-c.Warmup)+0.005 {
		t.Errorf("default hedged %.4f of requests, want some and at most the default budget's 10%%", zero.HedgedFraction)
	}
	if zero.Refused[hedge.RefusedBudget] == 0 && zero.HedgedFraction > 0.099 {
		t.Errorf("the budget refused nothing, yet the hedged fraction is %.4f", zero.HedgedFraction)
	}
}
