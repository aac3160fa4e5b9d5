package hedgeotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// register registers h as "kv" with opts on a fresh SDK reader, and
// returns what one collection observed.
func register(t *testing.T, h *hedge.Hedger, opts ...hedgeotel.Option) points {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if _, err := hedgeotel.Register(mp.Meter("github.com/tailcut/hedge"), map[string]*hedge.Hedger{"kv": h}, opts...); err != nil {
		t.Fatal(err)
	}
	return collect(t, reader)
}

// The per-shard points carry each shard's counts under its index, the
// replica points the servers' names, and the leaf cancelled because Need
// was met is counted in hedge.not_needed, not in hedge.failures.
func TestRegisterShards(t *testing.T) {
	h := settest.ShardedFan(t)
	s := h.OpStats("get")
	if s.NotNeeded != 1 || s.Failures != 1 || len(s.Shards) != 4 {
		t.Fatalf("%d not needed, %d failures, %d shards; want 1, 1, 4", s.NotNeeded, s.Failures, len(s.Shards))
	}
	got := register(t, h)
	want := points{
		key("hedge.failures", "hedger=kv", "op=get"):   {1, "{request}", "counter"},
		key("hedge.not_needed", "hedger=kv", "op=get"): {1, "{request}", "counter"},
	}
	for _, sh := range s.Shards {
		attrs := []string{"hedger=kv", "op=get", fmt.Sprintf("shard=%d", sh.Shard)}
		want[key("hedge.shard.leaves", attrs...)] = point{float64(sh.Leaves), "{request}", "counter"}
		want[key("hedge.shard.hedges.sent", attrs...)] = point{float64(sh.Hedges), "{hedge}", "counter"}
		want[key("hedge.shard.hedge.wins", attrs...)] = point{float64(sh.HedgeWins), "{request}", "counter"}
		want[key("hedge.shard.stragglers", attrs...)] = point{float64(sh.Stragglers), "{request}", "counter"}
		want[key("hedge.shard.failures", attrs...)] = point{float64(sh.Failures), "{request}", "counter"}
	}
	for _, r := range h.ReplicaStats() {
		want[key("hedge.replica.copies", "hedger=kv", "replica="+r.Name)] = point{float64(r.Copies), "{copy}", "counter"}
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s = %+v (observed %v); want %+v", k, g, ok, w)
		}
	}
	if _, ok := got[key("hedge.replica.copies", "hedger=kv", "replica=10.0.0.8:6379")]; !ok {
		t.Error("no replica point labelled with the last server's address")
	}
	shardPoints := 0
	for k := range got {
		if strings.HasPrefix(k, "hedge.shard.") {
			shardPoints++
		}
	}
	if shardPoints != 4*5 {
		t.Errorf("%d shard points, want 5 for each of 4 shards", shardPoints)
	}
}

// WithMaxShards caps the shards observed one by one; the rest are summed
// under shard="other", so the attribute sets stay bounded however many
// shards there are.
func TestRegisterMaxShards(t *testing.T) {
	h := settest.ShardedFan(t)
	s := h.OpStats("get")
	got := register(t, h, hedgeotel.WithMaxShards(2))
	for shard, leaves := range map[string]int64{"0": s.Shards[0].Leaves, "1": s.Shards[1].Leaves, "other": s.Shards[2].Leaves + s.Shards[3].Leaves} {
		k := key("hedge.shard.leaves", "hedger=kv", "op=get", "shard="+shard)
		if g := got[k]; g.value != float64(leaves) {
			t.Errorf("%s = %v, want %d", k, g.value, leaves)
		}
	}
	if _, ok := got[key("hedge.shard.leaves", "hedger=kv", "op=get", "shard=2")]; ok {
		t.Error("shard 2 observed on its own beyond WithMaxShards(2)")
	}
	got = register(t, h, hedgeotel.WithMaxShards(0))
	if _, ok := got[key("hedge.shard.stragglers", "hedger=kv", "op=get", "shard=other")]; !ok {
		t.Error("WithMaxShards(0): no point of shard=\"other\"")
	}
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())
	_, err := hedgeotel.Register(mp.Meter("m"), map[string]*hedge.Hedger{"kv": h}, hedgeotel.WithMaxShards(-1))
	if !errors.Is(err, hedgeotel.ErrInvalid) || !strings.Contains(err.Error(), "WithMaxShards(-1)") {
		t.Errorf("WithMaxShards(-1): %v, want an error matching ErrInvalid that names it", err)
	}
}
