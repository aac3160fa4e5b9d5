package hedgeprom_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
)

// A fan-out's counters appear, labelled by hedger and op, once the class
// has run one; a class that has not has none of them.
func TestCollectorFanOut(t *testing.T) {
	h := mustNew(t, hedge.Config{Replicas: 3, MaxAttempts: 1})
	if _, err := hedge.Do(context.Background(), h, "plain", func(context.Context, hedge.Attempt) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	_, err := hedge.DoFan(context.Background(), h, "shards", 6, hedge.FanOut{Need: 4}, func(_ context.Context, i int, _ hedge.Attempt) (int, error) {
		return i, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"a": h})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP hedge_fanout_leaves_total Leaves of the fan-outs; each is also a request of the operation class.
# TYPE hedge_fanout_leaves_total counter
hedge_fanout_leaves_total{hedger="a",op="shards"} 6
# HELP hedge_fanout_requests_total Calls of hedge.DoFan.
# TYPE hedge_fanout_requests_total counter
hedge_fanout_requests_total{hedger="a",op="shards"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "hedge_fanout_requests_total", "hedge_fanout_leaves_total"); err != nil {
		t.Error(err)
	}
	buckets := len(h.OpStats("shards").Fan.ExtraCopies) // an array: one series per bucket, counted or not
	if n := testutil.CollectAndCount(c, "hedge_fanout_by_extra_total"); n != buckets {
		t.Errorf("%d series of fan-outs by extra copies; want %d, one per bucket", n, buckets)
	}
	if n := testutil.CollectAndCount(c, "hedge_fanout_latency_seconds"); n != 1 {
		t.Errorf("%d fan-out latency summaries; want one, for the class that fanned out", n)
	}
}
