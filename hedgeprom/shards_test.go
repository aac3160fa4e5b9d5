package hedgeprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
)

// The per-shard series carry each shard's counts under its index, the
// replica series the servers' names, and the leaf cancelled because Need
// was met is counted in not_needed_total, not in failures_total.
func TestCollectorShards(t *testing.T) {
	h := settest.ShardedFan(t)
	s := h.OpStats("get")
	if s.NotNeeded != 1 || s.Failures != 1 || len(s.Shards) != 4 {
		t.Fatalf("%d not needed, %d failures, %d shards; want 1, 1, 4", s.NotNeeded, s.Failures, len(s.Shards))
	}
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"kv": h})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP hedge_failures_total Calls that returned an error to the caller after every copy failed, a non-retryable error, or the caller's context ending. Leaves of a fan-out that were not needed are not failures: see not_needed_total.
# TYPE hedge_failures_total counter
hedge_failures_total{hedger="kv",op="get"} 1
# HELP hedge_not_needed_total Leaves of hedge.DoFan not sent, or cancelled, because FanOut.Need leaves had answered. They are not failures, and failures leaves them out; fanout leaves cut with reason not_needed counts the cancelled ones alone.
# TYPE hedge_not_needed_total counter
hedge_not_needed_total{hedger="kv",op="get"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "hedge_failures_total", "hedge_not_needed_total"); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	b.WriteString("# HELP hedge_shard_leaves_total Requests sent to the shard: hedge.DoFan's leaves and hedge.DoShard's calls.\n# TYPE hedge_shard_leaves_total counter\n")
	for _, sh := range s.Shards {
		fmt.Fprintf(&b, "hedge_shard_leaves_total{hedger=\"kv\",op=\"get\",shard=\"%d\"} %d\n", sh.Shard, sh.Leaves)
	}
	b.WriteString("# HELP hedge_shard_failures_total The shard's requests that failed on their own, not those cancelled because their fan-out ended (not needed, late).\n# TYPE hedge_shard_failures_total counter\n")
	for _, sh := range s.Shards {
		fmt.Fprintf(&b, "hedge_shard_failures_total{hedger=\"kv\",op=\"get\",shard=\"%d\"} %d\n", sh.Shard, sh.Failures)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(b.String()), "hedge_shard_leaves_total", "hedge_shard_failures_total"); err != nil {
		t.Error(err)
	}
	if s.Shards[1].Failures != 1 || s.Shards[0].Leaves != 1 {
		t.Errorf("shards %v: want shard 1 with the one failure, each with one leaf", s.Shards)
	}
	for _, name := range []string{"hedge_shard_hedges_sent_total", "hedge_shard_hedge_wins_total", "hedge_shard_stragglers_total"} {
		if n := testutil.CollectAndCount(c, name); n != 4 {
			t.Errorf("%s: %d series, want one per shard", name, n)
		}
	}
	// The servers' series are labelled by their names.
	var copies strings.Builder
	copies.WriteString("# HELP hedge_replica_copies_total Copies sent to the replica: primaries, hedges and failovers.\n# TYPE hedge_replica_copies_total counter\n")
	for _, r := range h.ReplicaStats() {
		fmt.Fprintf(&copies, "hedge_replica_copies_total{hedger=\"kv\",replica=%q} %d\n", r.Name, r.Copies)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(copies.String()), "hedge_replica_copies_total"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(copies.String(), `replica="10.0.0.8:6379"`) {
		t.Errorf("no series labelled with the last server's address:\n%s", copies.String())
	}
}

// WithMaxShards caps the shards exported one by one; the rest are summed
// under shard="other", so the series stay bounded however many shards
// there are.
func TestCollectorMaxShards(t *testing.T) {
	h := settest.ShardedFan(t)
	s := h.OpStats("get")
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"kv": h}, hedgeprom.WithMaxShards(2))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`
# HELP hedge_shard_leaves_total Requests sent to the shard: hedge.DoFan's leaves and hedge.DoShard's calls.
# TYPE hedge_shard_leaves_total counter
hedge_shard_leaves_total{hedger="kv",op="get",shard="0"} %d
hedge_shard_leaves_total{hedger="kv",op="get",shard="1"} %d
hedge_shard_leaves_total{hedger="kv",op="get",shard="other"} %d
`, s.Shards[0].Leaves, s.Shards[1].Leaves, s.Shards[2].Leaves+s.Shards[3].Leaves)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "hedge_shard_leaves_total"); err != nil {
		t.Error(err)
	}
	c, err = hedgeprom.New("hedge", map[string]*hedge.Hedger{"kv": h}, hedgeprom.WithMaxShards(0))
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "hedge_shard_stragglers_total"); n != 1 {
		t.Errorf("WithMaxShards(0): %d straggler series, want the one of shard=\"other\"", n)
	}
	if _, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"kv": h}, hedgeprom.WithMaxShards(-1)); !errors.Is(err, hedgeprom.ErrInvalid) || !strings.Contains(err.Error(), "WithMaxShards(-1)") {
		t.Errorf("WithMaxShards(-1): %v, want an error matching ErrInvalid that names it", err)
	}
	// A Hedger without shards exports no shard series.
	flat := mustNew(t, hedge.Config{Replicas: 2})
	if _, err := hedge.Do(context.Background(), flat, "get", func(context.Context, hedge.Attempt) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	c, err = hedgeprom.New("hedge", map[string]*hedge.Hedger{"flat": flat})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "hedge_shard_leaves_total"); n != 0 {
		t.Errorf("a Hedger without shards: %d shard series", n)
	}
}
