package sim

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/tailcut/hedge"
)

// One client is the simulator as it was before clients: Clients 0 and 1
// give the same run, bit for bit. And with one client the per-client
// views (forceViews) are the queues' own counts, so keeping them changes
// nothing either: the proof that the views of runs with many clients
// count what the queues counted, for the copies of one client.
func TestOneClientIsAllTraffic(t *testing.T) {
	for _, tc := range []struct {
		w   World
		st  Strategy
		ro  Routing
		fan int
	}{
		{Noise, Default, TwoChoice, 1},
		{Stalls, Default, TwoChoice, 1},
		{Mixed, Default, TwoChoice, 4},
		{BigJobs, HedgeP95Live, TwoChoice, 1},
		{Stalls, HedgeQuietBudget, Random, 1},
		{Noise, TiedTwoChoice, TwoChoice, 1},
		{BigJobs, None, Pool, 1},
	} {
		name := fmt.Sprintf("%v/%v/%v/fanout=%d", tc.w, tc.st, tc.ro, tc.fan)
		c := base()
		c.World, c.Strategy, c.Routing, c.Fanout = tc.w, tc.st, tc.ro, tc.fan
		c.Load = 0.7
		c.Delay = 2
		c.LiveWindow = 500
		c.Requests, c.Warmup = scaled(40_000), scaled(4000)
		var s Simulator
		want, err := s.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			clients int
			views   bool
		}{{1, false}, {1, true}, {0, true}} {
			d := c
			d.Clients, d.forceViews = v.clients, v.views
			got, err := s.Run(d)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: clients=%d views=%v differs from clients=0:\n%+v\n%+v", name, v.clients, v.views, got, want)
			}
		}
	}
}

// checkViews checks that each client's view of each queue counts exactly
// that client's copies waiting or in service there, and so that the views
// of a queue add up to its own count.
func checkViews(t *testing.T, e *engine) bool {
	t.Helper()
	n := e.clientsN()
	count := make([]int32, n*e.nq)
	for i := range e.slots {
		r := &e.slots[i]
		for k := range r.n {
			if st := r.state[k]; st == cWaiting || st == cRunning {
				count[int(r.client)*e.nq+int(r.copies[k].q)]++
			}
		}
	}
	ok := true
	for q := range e.nq {
		sum := 0
		for c := range n {
			v := e.viewOf(uint16(c), int32(q))
			if v.busy != count[c*e.nq+q] {
				t.Errorf("t=%v: client %d sees %d copies on queue %d, has %d", e.now, c, v.busy, q, count[c*e.nq+q])
				ok = false
			}
			sum += int(v.busy)
		}
		if sum != e.qs[q].busy {
			t.Errorf("t=%v: queue %d: clients' views add up to %d, the queue holds %d", e.now, q, sum, e.qs[q].busy)
			ok = false
		}
	}
	return ok
}

// With ten clients, each client's view of a queue is its own copies
// there, checked at every hundredth completion and at the end, in worlds and strategies that cancel
// waiting and running copies, leave ghosts and run fan-outs.
func TestClientViewsCountOwnCopies(t *testing.T) {
	for _, tc := range []struct {
		w    World
		st   Strategy
		fan  int
		disc Discipline
	}{
		{Stalls, Default, 1, FCFS},
		{Mixed, Default, 1, PS},
		{BigJobs, HedgeFixed, 1, FCFS},
		{Noise, TiedTwoChoice, 1, FCFS},
		{Stalls, Default, 4, FCFS},
	} {
		name := fmt.Sprintf("%v/%v/fanout=%d/%v", tc.w, tc.st, tc.fan, tc.disc)
		c := base()
		c.World, c.Strategy, c.Fanout, c.Discipline = tc.w, tc.st, tc.fan, tc.disc
		c.Load, c.Delay = 0.8, 2
		c.Clients, c.ClientSkew = 10, 1
		c.Requests, c.Warmup = scaled(20_000), scaled(2000)
		var s Simulator
		done, failed := 0, false
		clients := make([]int, c.Clients)
		s.Done = func(cp Completion) {
			clients[cp.Client]++
			if done++; done%100 == 0 && !failed {
				failed = !checkViews(t, &s.e)
			}
		}
		if _, err := s.Run(c); err != nil {
			t.Fatal(err)
		}
		if !checkViews(t, &s.e) {
			t.Errorf("%s: views wrong at the end", name)
		}
		if len(s.e.pols) > 0 && len(s.e.pols) != c.Clients {
			t.Errorf("%s: %d policies for %d clients", name, len(s.e.pols), c.Clients)
		}
		for i := 1; i < len(s.e.pols); i++ {
			if s.e.pols[i] == s.e.pols[0] {
				t.Errorf("%s: client %d shares client 0's policy", name, i)
			}
		}
		if tc.fan == 1 {
			for i, n := range clients {
				if n == 0 {
					t.Errorf("%s: client %d completed no request", name, i)
				}
			}
		}
	}
}

// Each client spends its own budget: with every request asking for a
// hedge at once (delay 0) and no warm-up, the hedges are at most the sum
// of the clients' bounds (ratio x its requests + its burst), and more
// than one budget's bound, since each client starts with its own full
// bucket. An explicit Budget in Config.Hedge is one object that every
// client spends from: then one budget's bound holds.
func TestClientsSpendOwnBudgets(t *testing.T) {
	const ratio, burst, clients = 0.05, 10.0, 10
	c := base()
	c.Strategy, c.Delay, c.Budget, c.BudgetBurst = HedgeQuietBudget, 0, ratio, burst
	c.Load = 0.5
	c.Clients = clients
	c.Requests, c.Warmup = scaled(40_000), 0
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(c.Requests)
	hedges := r.HedgedFraction * float64(r.Requests)
	own, one := ratio*n+clients*burst, ratio*n+burst
	if hedges > own+0.5 || hedges < one+(clients-1)*burst*0.9 {
		t.Errorf("%d clients with their own budgets sent %v hedges; want at most %v and about that", clients, hedges, own)
	}

	b, err := hedge.NewBudget(ratio, burst)
	if err != nil {
		t.Fatal(err)
	}
	c.Strategy = Default
	c.Hedge = &hedge.Config{Delay: hedge.Fixed(0), Budget: b, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}
	r, err = Run(c)
	if err != nil {
		t.Fatal(err)
	}
	hedges = r.HedgedFraction * float64(r.Requests)
	if hedges > one+0.5 || hedges < ratio*n*0.95 {
		t.Errorf("%d clients sharing one budget sent %v hedges; want at most %v and about that", clients, hedges, one)
	}
}

// Requests go to the clients by their shares: each client's count in a
// run is within tolSE binomial standard errors of its share.
func TestClientShares(t *testing.T) {
	for _, tc := range []struct {
		clients int
		skew    float64
	}{{10, 0}, {10, 1}, {50, 1.2}, {3, 0.5}} {
		c := base()
		c.Clients, c.ClientSkew = tc.clients, tc.skew
		c.Requests, c.Warmup = scaled(400_000), 1
		want := ClientShares(c)
		if len(want) != tc.clients {
			t.Fatalf("%d shares for %d clients", len(want), tc.clients)
		}
		if tc.skew > 0 && !(want[0] > want[1]) {
			t.Errorf("skew %v: client 0's share %v is not the largest", tc.skew, want[0])
		}
		got := make([]float64, tc.clients)
		var s Simulator
		s.Done = func(cp Completion) { got[cp.Client]++ }
		if _, err := s.Run(c); err != nil {
			t.Fatal(err)
		}
		n := float64(c.Requests)
		for i, p := range want {
			if tc.skew == 0 && math.Abs(p-1/float64(tc.clients)) > 1e-12 {
				t.Errorf("even split: client %d's share %v", i, p)
			}
			se := math.Sqrt(p * (1 - p) / n)
			if f := got[i] / n; math.Abs(f-p) > tolSE*se {
				t.Errorf("%d clients, skew %v: client %d sent %.5f of requests, want %.5f ± %.5f", tc.clients, tc.skew, i, f, p, tolSE*se)
			}
		}
	}
	if s := ClientShares(Config{}); len(s) != 1 || s[0] != 1 {
		t.Errorf("one client's shares %v, want [1]", s)
	}
}

// Random routing reads no load, and unhedged requests read no Policy, so
// without hedging every latency is the same whatever the clients: the
// clients' draws come from a stream of their own.
func TestClientsDoNotChangeRandomUnhedged(t *testing.T) {
	for _, w := range []World{Noise, Stalls, BigJobs} {
		for _, fan := range []int{1, 3} {
			c := base()
			c.World, c.Routing, c.Fanout = w, Random, fan
			c.Load = 0.7
			c.Requests, c.Warmup = scaled(40_000), scaled(4000)
			var s Simulator
			want, err := s.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{10, 50} {
				d := c
				d.Clients, d.ClientSkew = n, 1
				got, err := s.Run(d)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v fanout %d: %d clients changed the run:\n%+v\n%+v", w, fan, n, got, want)
				}
			}
		}
	}
}

func TestClientsValidate(t *testing.T) {
	for _, f := range []func(*Config){
		func(c *Config) { c.Clients = -1 },
		func(c *Config) { c.Clients = MaxClients + 1 },
		func(c *Config) { c.Clients, c.ClientSkew = 10, -1 },
		func(c *Config) { c.Clients, c.ClientSkew = 10, math.NaN() },
		func(c *Config) { c.Clients, c.ClientSkew = 10, math.Inf(1) },
	} {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("no error for clients %d, skew %v", c.Clients, c.ClientSkew)
		}
	}
	c := DefaultConfig()
	c.Clients, c.ClientSkew = MaxClients, 2
	if err := c.Validate(); err != nil {
		t.Errorf("clients %d: %v", c.Clients, err)
	}
}

// A client's estimator learns from its own requests only: with two
// clients, the live percentile of each holds about its share of the
// latencies, and the delays the clients read differ.
func TestClientsHaveOwnEstimators(t *testing.T) {
	c := base()
	c.World, c.Strategy, c.Load = BigJobs, Default, 0.7
	c.Clients, c.ClientSkew = 2, 3 // client 0 sends about 8 in 9 requests
	c.Requests, c.Warmup = scaled(40_000), scaled(4000)
	var s Simulator
	if _, err := s.Run(c); err != nil {
		t.Fatal(err)
	}
	now := toDuration(s.e.now)
	d0, d1 := s.e.ests[0].Delay(now), s.e.ests[1].Delay(now)
	if d0 == d1 || d0 == hedge.Never {
		t.Errorf("the clients' delays are %v and %v: want two estimators, both warm", d0, d1)
	}
}

// TestClientsTable is a measurement, not a test: with HEDGE_CLIENTS_TABLE
// set it prints, for the worlds noise, stalls, bigjobs and mixed at loads
// 0.5, 0.7 and 0.8 and 1, 10 and 50 clients (an even split), the default
// strategy's p50, p99 and p99.9 over those of none with the same routing
// (two-choice) and clients, each one run of 200,000 requests (a tenth
// warm-up) with the same seed; and how two choices by a client's own
// view, rather than the whole queue, change none's p99:
//
//	HEDGE_CLIENTS_TABLE=1 go test -run TestClientsTable -v ./internal/sim
func TestClientsTable(t *testing.T) {
	if os.Getenv("HEDGE_CLIENTS_TABLE") == "" {
		t.Skip("a measurement: set HEDGE_CLIENTS_TABLE=1 to run it")
	}
	fmt.Println("| world | load | clients | p50 ratio | p99 ratio | p99.9 ratio | hedged | extra work | none's p99 / one client's |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, w := range []World{Noise, Stalls, BigJobs, Mixed} {
		for _, load := range []float64{0.5, 0.7, 0.8} {
			var none1 RunResult
			for _, n := range []int{1, 10, 50} {
				c := DefaultConfig()
				c.World, c.Load, c.Clients = w, load, n
				c.Requests, c.Warmup = 200_000, 20_000
				c.Seed = DeriveSeed(1, scenarioKey(c))
				none, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					none1 = none
				}
				c.Strategy = Default
				def, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("| %v | %g | %d | %.3f | %.3f | %.3f | %.2f%% | %.2f%% | %.3f |\n", w, load, n,
					def.P50/none.P50, def.P99/none.P99, def.P999/none.P999, 100*def.HedgedFraction, 100*def.ExtraWork, none.P99/none1.P99)
			}
		}
	}
}
