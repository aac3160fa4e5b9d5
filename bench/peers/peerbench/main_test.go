package main

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/bench"
)

// Every configuration of the comparison runs the workload on the shared
// backend, answers every request, and the hedging ones really hedge when
// replicas stall. Behaviour only: no latency is asserted.
//
// Each configuration runs on its own, so that the servers' count of the
// whole run (warm-up included) can be read around it. Every run replays the
// same arrivals and stall schedules, so the unhedged run's count is the
// number of arrivals, and a hedging run's count exceeds it by the requests
// of which both copies reached a server: a count that holds however the
// run was scheduled, unlike a count over the measured span, whose start is
// read while requests are in flight.
func TestContenders(t *testing.T) {
	b, err := bench.StartHTTP(bench.HTTPOptions{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := bench.Scenario{
		Rate: 400, Duration: 700 * time.Millisecond, Warmup: 200 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.1, Repeats: 1, Seed: 3,
		MaxReruns: -1, MaxTotalReruns: -1, Settle: 10 * time.Millisecond,
	}
	served := func() int64 {
		var n int64
		for _, v := range b.Served() {
			n += v
		}
		return n
	}
	var arrivals int64 // the unhedged run's count: one copy per arrival
	for _, name := range []string{"none-random", "hedge-fixed-nobudget", "hedgedhttp", "failsafe-go"} {
		c, err := contender(name, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		before := served()
		res, err := bench.Run(context.Background(), b, s, []bench.Contender{c}, nil)
		if err != nil {
			t.Fatal(err)
		}
		copies := served() - before
		t.Logf("%s: the servers saw %d copies", name, copies)
		if len(res.Runs) != 1 {
			t.Fatalf("%s: %d runs, want 1", name, len(res.Runs))
		}
		r := res.Runs[0]
		if r.Requests == 0 || r.Errors > 0 || r.Stalls == 0 || r.Aborted != "" {
			t.Errorf("%s: %d requests, %d errors (%s), %d stalls, aborted %q", r.Config, r.Requests, r.Errors, r.FirstError, r.Stalls, r.Aborted)
		}
		// Known, not necessarily positive: the warm-up may have opened
		// every connection the measured span needs.
		if r.Dials == bench.Unknown {
			t.Errorf("%s: dials not counted (%d)", r.Config, r.Dials)
		}
		if name == "none-random" {
			arrivals = copies
			if r.ExtraPct != 0 {
				t.Errorf("%s hedged: %.2f%%", r.Config, r.ExtraPct)
			}
			continue
		}
		if r.ExtraPct <= 0 || copies <= arrivals {
			t.Errorf("%s sent no hedge: extra %.2f%% (client); the servers saw %d copies of %d arrivals", r.Config, r.ExtraPct, copies, arrivals)
		}
	}
	if _, err := contender("hope", time.Millisecond); err == nil {
		t.Error("an unknown configuration was accepted")
	}
}
