package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/bench"
)

// A short tied comparison runs end to end on real HTTP servers with a
// worker limit, without errors, and counts what it reports.
func TestRunTiedSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers for about a second")
	}
	o := bench.TiedOptions{
		Replicas: 2, Workers: 1, MaxQueue: 1024, Service: 2 * time.Millisecond,
		Loads: []float64{0.3}, Worlds: []bench.TiedWorld{{Name: "plain"}}, Configs: []string{"none", "tied", bench.TiedSymmetricConfig},
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Seed: 1, Timeout: time.Minute,
	}
	rs, err := bench.RunTied(context.Background(), o, bench.StartTiedHTTP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3", len(rs))
	}
	for _, r := range rs {
		if r.Calls == 0 || r.Errors != 0 {
			t.Errorf("%s: %d calls, %d errors", r.Config, r.Calls, r.Errors)
		}
	}
	// The symmetric form sends both copies; the spare form its spare
	// only when the servers' reports do not say it cannot help.
	if sym := rs[2]; sym.Extra < 0.5 {
		t.Errorf("tied-symmetric: extra on the wire %.2f, want about 1 (both copies are sent)", sym.Extra)
	}
	if tr := rs[1]; tr.Extra > 1 {
		t.Errorf("tied: extra on the wire %.2f, want at most one spare a call", tr.Extra)
	}
	// Only a copy that started without its claim answered can run twice.
	for _, tr := range rs[1:] {
		if tr.Unclaimed == 0 && tr.Duplicated > 0 {
			t.Errorf("%s: %.2f%% duplicated with every claim answered", tr.Config, 100*tr.Duplicated)
		}
	}
}

// MedianTied takes the median of each percentile and share and the total
// of each count; one run is returned as it is.
func TestMedianTied(t *testing.T) {
	ms := time.Millisecond
	rs := []bench.TiedResult{
		{Config: "tied", Calls: 10, Errors: 1, P50: 5 * ms, P99: 30 * ms, P999: 90 * ms, Duplicated: 0.02, Dropped: 9, Unclaimed: 1, ClaimP50: 3 * ms},
		{Config: "tied", Calls: 20, P50: 7 * ms, P99: 10 * ms, P999: 50 * ms, Duplicated: 0, Dropped: 19, ClaimP50: 1 * ms},
		{Config: "tied", Calls: 30, P50: 6 * ms, P99: 20 * ms, P999: 70 * ms, Duplicated: 0.01, Dropped: 29, Unclaimed: 2, ClaimP50: 2 * ms},
	}
	got := bench.MedianTied(rs)
	want := bench.TiedResult{Config: "tied", Runs: 3, Calls: 60, Errors: 1, P50: 6 * ms, P99: 20 * ms, P999: 70 * ms, Duplicated: 0.01, Dropped: 57, Unclaimed: 3, ClaimP50: 2 * ms}
	if got != want {
		t.Errorf("MedianTied = %+v\nwant %+v", got, want)
	}
	if one := bench.MedianTied(rs[:1]); one.P99 != 30*ms || one.Runs != 1 || one.Calls != 10 {
		t.Errorf("one run: %+v", one)
	}
}
