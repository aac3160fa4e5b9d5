package main

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge/bench"
)

// Every configuration of the comparison runs the workload on the shared
// backend, answers every request, and the hedging ones really hedge when
// replicas stall. Behaviour only: no latency is asserted.
func TestContenders(t *testing.T) {
	b, err := bench.StartHTTP(bench.HTTPOptions{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var cs []bench.Contender
	for _, name := range []string{"none-random", "hedge-fixed-nobudget", "hedgedhttp", "failsafe-go"} {
		c, err := contender(name, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	s := bench.Scenario{
		Rate: 400, Duration: 700 * time.Millisecond, Warmup: 200 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.1, Repeats: 1, Seed: 3,
		MaxReruns: -1, MaxTotalReruns: -1, Settle: 10 * time.Millisecond,
	}
	res, err := bench.Run(context.Background(), b, s, cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Requests == 0 || r.Errors > 0 || r.Stalls == 0 {
			t.Errorf("%s: %d requests, %d errors (%s), %d stalls", r.Config, r.Requests, r.Errors, r.FirstError, r.Stalls)
		}
		hedged := r.Config != "none-random"
		if hedged && (r.ExtraPct <= 0 || r.ServerExtraPct <= 0) {
			t.Errorf("%s sent no hedge: extra %.2f%% (client), %.2f%% (servers)", r.Config, r.ExtraPct, r.ServerExtraPct)
		}
		if !hedged && r.ExtraPct != 0 {
			t.Errorf("%s hedged: %.2f%%", r.Config, r.ExtraPct)
		}
		if r.Dials <= 0 {
			t.Errorf("%s: no dial counted", r.Config)
		}
	}
	if _, err := contender("hope", time.Millisecond); err == nil {
		t.Error("an unknown configuration was accepted")
	}
}
