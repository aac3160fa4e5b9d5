package sim

import (
	"math"
	"testing"
)

// stallConfig is a one-server stalls world without hedging, for scripted
// runs, with the default slowdown.
func stallConfig(seed uint64, share, mean float64, d Discipline) Config {
	c := DefaultConfig()
	c.World, c.Strategy, c.Routing, c.Discipline = Stalls, None, Random, d
	c.Servers, c.Seed = 1, seed
	c.StallShare, c.StallMean = share, mean
	c.Load = 0.01
	return c
}

// scriptLatencies runs sc on c and returns each request's latency, by
// arrival order.
func scriptLatencies(t *testing.T, c Config, sc Script) []float64 {
	t.Helper()
	lat := make([]float64, len(sc.Requests))
	seen := make([]bool, len(sc.Requests))
	s := Simulator{Done: func(cp Completion) {
		for i, r := range sc.Requests {
			if r.At == cp.Arrival && !seen[i] {
				lat[i], seen[i] = cp.Latency, true
				return
			}
		}
		t.Fatalf("a completion arrived at %v, not in the script", cp.Arrival)
	}}
	if _, err := s.RunScript(c, sc); err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("request %d did not complete", i)
		}
	}
	return lat
}

func clockEqual(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestStalledServerSpeed checks that a stalled server works at
// 1/StallSlowdown of its speed, 1/20 by default: on a server stalled from
// the start (share 1-1e-9, stretches of 1e9 units on average), a request
// of size 1 takes 20 units and one of size 0.25 takes 5, exactly. The
// default stalls world's capacity is 1 - 0.02*(1-1/20) = 0.981.
func TestStalledServerSpeed(t *testing.T) {
	def := DefaultConfig()
	def.World = Stalls
	if def.StallSlowdown != 20 || def.StallShare != 0.02 || def.StallMean != 50 {
		t.Fatalf("default stalls: slowdown %v, share %v, mean %v; want 20, 0.02, 50", def.StallSlowdown, def.StallShare, def.StallMean)
	}
	if got := def.Capacity(); !clockEqual(got, 0.981) {
		t.Fatalf("default stalls world's capacity %v, want 0.981", got)
	}
	for _, d := range []Discipline{FCFS, PS} {
		c := stallConfig(1, 1-1e-9, 1e9, d)
		lat := scriptLatencies(t, c, Script{Requests: []ScriptedRequest{
			{At: 0, Sizes: []float64{1}},
			{At: 100, Sizes: []float64{0.25}},
		}})
		if !clockEqual(lat[0], 20) || !clockEqual(lat[1], 5) {
			t.Errorf("%v: latencies %v on a stalled server with slowdown 20, want [20 5]", d, lat)
		}
	}
}

// TestStallMidJob checks the speed change when a stall begins and ends
// during a request, exactly on the simulated clock. A server's stall
// process is its own stream (seedRNG(seed, 0x5)): a uniform draw for the
// stationary start (stalled below StallShare), then exponential
// stretches, StallMean long when stalled and StallMean*(1-share)/share
// when not. The test follows that stream to find a seed whose server
// starts normal, stalls at t1 and recovers at t2 with room around them,
// then runs:
//
//   - a request of size 1 at t1-0.25: 0.25 done at speed 1, 0.75 left at
//     1/20, latency 0.25 + 15 = 15.25;
//   - one of size 0.5 at t1+20, inside the stall: latency 10;
//   - one of size 1 at t2-1: 1/20 done during the stall, 0.95 after,
//     latency 1.95.
func TestStallMidJob(t *testing.T) {
	const share, mean = 0.5, 100.0
	var seed uint64
	var t1, t2 float64
	for s := uint64(1); s < 1000; s++ {
		r := seedRNG(s, 0x5)
		if r.Float64() < share {
			continue // starts stalled
		}
		a := r.ExpFloat64() * mean * (1 - share) / share
		b := a + r.ExpFloat64()*mean
		c := b + r.ExpFloat64()*mean*(1-share)/share
		if a > 1 && b-a > 40 && c-b > 5 {
			seed, t1, t2 = s, a, b
			break
		}
	}
	if seed == 0 {
		t.Fatal("no seed below 1000 with a stall that fits")
	}
	t.Logf("seed %d: stalled from %v to %v", seed, t1, t2)
	for _, d := range []Discipline{FCFS, PS} {
		c := stallConfig(seed, share, mean, d)
		lat := scriptLatencies(t, c, Script{Requests: []ScriptedRequest{
			{At: t1 - 0.25, Sizes: []float64{1}},
			{At: t1 + 20, Sizes: []float64{0.5}},
			{At: t2 - 1, Sizes: []float64{1}},
		}})
		want := []float64{15.25, 10, 1.95}
		for i := range want {
			if !clockEqual(lat[i], want[i]) {
				t.Errorf("%v, seed %d, stall from %v to %v: latencies %v, want %v", d, seed, t1, t2, lat, want)
				break
			}
		}
	}
}
