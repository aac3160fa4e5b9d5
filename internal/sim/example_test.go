package sim_test

import (
	"context"
	"fmt"

	"github.com/tailcut/hedge/internal/sim"
)

// Hedging after one mean service time at near-zero load: the hedged
// fraction is e^-1 and the p99 is (1 + ln 100)/2.
func ExampleRun() {
	c := sim.DefaultConfig()
	c.Load = 0.001
	c.Strategy = sim.HedgeFixed
	c.Delay = 1
	c.Requests, c.Warmup = 200_000, 1000
	r, err := sim.Run(c)
	if err != nil {
		panic(err)
	}
	fmt.Printf("hedged %.2f, p99 %.1f\n", r.HedgedFraction, r.P99)
	// Output: hedged 0.37, p99 2.8
}

// A point of the study: four runs and their standard errors, with the
// delay calibrated the way the study does it.
func ExampleRunPoint() {
	c := sim.DefaultConfig()
	c.World = sim.Stalls
	c.Strategy = sim.HedgeP95PerLoad
	c.Load = 0.7
	c.Requests, c.Warmup = 100_000, 10_000
	d, err := sim.Calibrate(context.Background(), c, 1, 0)
	if err != nil {
		panic(err)
	}
	c.Delay = sim.Units(d) // the library's hedge.Fixed, in time units
	s, err := sim.RunPoint(context.Background(), c, 4, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.P999.Value < 20, s.HedgedFraction.Value < 0.1)
	// Output: true true
}
