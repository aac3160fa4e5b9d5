package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge/bench"
)

// A short tied comparison runs end to end on real HTTP servers with a
// worker limit, without errors, and counts what it reports.
func TestRunTiedSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers for about a second")
	}
	o := bench.TiedOptions{
		Replicas: 2, Workers: 1, MaxQueue: 64, Service: 2 * time.Millisecond,
		Loads: []float64{0.3}, Worlds: []bench.TiedWorld{{Name: "plain"}}, Configs: []string{"none", "tied"},
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Seed: 1, Timeout: time.Minute,
	}
	rs, err := bench.RunTied(context.Background(), o, bench.StartTiedHTTP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	for _, r := range rs {
		if r.Calls == 0 || r.Errors != 0 {
			t.Errorf("%s: %d calls, %d errors", r.Config, r.Calls, r.Errors)
		}
	}
	if tr := rs[1]; tr.Extra < 0.5 {
		t.Errorf("tied: extra on the wire %.2f, want about 1 (both copies are sent)", tr.Extra)
	}
}
