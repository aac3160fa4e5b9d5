package hedgerueidis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/keyslot"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestCluster runs against one real Redis Cluster on loopback: 3 masters,
// each with a replica.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	// The masters alone as seeds: rueidis keeps the connection it made to
	// a seed, so a replica among them would not be sent READONLY.
	var seeds []string
	for _, sh := range cl.Shards {
		seeds = append(seeds, sh.Master.Addr)
	}
	c, err := NewClusterFromOptions(ctx, rueidis.ClientOption{InitAddress: seeds, DisableCache: true}, ClusterConfig{Hedge: hedgeNow().Hedge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	// The layout is the cluster's: shard s is the s-th master by first
	// slot, with its replica; nodes are named by address.
	nodes, shards := c.Nodes(), c.Shards()
	if err := cl.CheckLayout(nodes, shards); err != nil {
		t.Fatal(err)
	}
	for k, n := range nodes {
		if c.Hedger().ReplicaName(k) != n {
			t.Errorf("node %d is named %q, want its address %s", k, c.Hedger().ReplicaName(k), n)
		}
	}

	const nKeys = 120
	keyOf := func(i int) string { return fmt.Sprintf("key:%d", i) }
	byShard := make([][]string, len(shards))
	for i := range nKeys {
		k := keyOf(i)
		if err := c.Set(ctx, k, "v"+k, 0).Error(); err != nil {
			t.Fatal(err)
		}
		if s := c.ShardOf(k); s != cl.ShardOf(redistest.KeySlot(k)) {
			t.Fatalf("%q is on shard %d, the cluster says %d", k, s, cl.ShardOf(redistest.KeySlot(k)))
		}
		byShard[c.ShardOf(k)] = append(byShard[c.ShardOf(k)], k)
	}
	for s := range shards {
		master, replica := c.c.clients[shards[s][0]], c.c.clients[shards[s][1]]
		waitFor(t, "the replicas to sync", func() bool {
			m, err1 := master.Do(ctx, master.B().Dbsize().Build()).AsInt64()
			r, err2 := replica.Do(ctx, replica.B().Dbsize().Build()).AsInt64()
			return err1 == nil && err2 == nil && m == r
		})
	}

	t.Run("ReadsStayInTheirSlot", func(t *testing.T) {
		for s := range shards {
			before := c.Stats().Replicas
			for _, k := range byShard[s] {
				if v, err := c.Get(ctx, k).ToString(); err != nil || v != "v"+k {
					t.Fatalf("GET %s: %q, %v", k, v, err)
				}
			}
			waitFor(t, "copies to return", func() bool { return c.c.quiet() })
			after := c.Stats().Replicas
			for k := range nodes {
				if copies := after[k].Copies - before[k].Copies; !slices.Contains(shards[s], k) && copies != 0 {
					t.Errorf("shard %d's reads sent %d copies to node %s of another shard", s, copies, nodes[k])
				}
			}
			for _, k := range shards[s] {
				if after[k].Wins == before[k].Wins {
					t.Errorf("node %s of shard %d answered none of its %d reads", nodes[k], s, len(byShard[s]))
				}
			}
		}
	})

	t.Run("StalledNodeIsHedgedAroundWithinTheSlot", func(t *testing.T) {
		const s = 0
		key := byShard[s][0]
		// Both nodes of the slot stall; the read's primary and its hedge
		// are held, one on each. Then one node runs again: it answers,
		// while the other still stalls.
		for _, answers := range []int{0, 1} {
			k, other := shards[s][answers], shards[s][1-answers]
			stalls := [2]*redistest.Stall{stall(t, cl.Shards[s].Master), stall(t, cl.Shards[s].Replicas[0])}
			before := c.Stats()
			done := make(chan error, 1)
			go func() {
				v, err := c.Get(ctx, key).ToString()
				if err == nil && v != "v"+key {
					err = fmt.Errorf("GET %s = %q", key, v)
				}
				done <- err
			}()
			waitFor(t, "a copy on each node of the slot", func() bool {
				r := c.Stats().Replicas
				return r[k].InFlight == 1 && r[other].InFlight == 1
			})
			if err := stalls[answers].Release(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			after := c.Stats()
			if after.Replicas[k].Wins != before.Replicas[k].Wins+1 {
				t.Errorf("node %s, released, did not answer", nodes[k])
			}
			if got := after.Op("GET").Hedges - before.Op("GET").Hedges; got != 1 {
				t.Errorf("%d hedges, want 1", got)
			}
			for n := range nodes {
				if !slices.Contains(shards[s], n) && after.Replicas[n].Copies != before.Replicas[n].Copies {
					t.Errorf("node %s of another shard got a copy", nodes[n])
				}
			}
			if err := stalls[1-answers].Release(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the loser to return", func() bool { return c.c.quiet() })
		}
	})

	t.Run("MGetIsAFanOutBySlot", func(t *testing.T) {
		var keys []string
		slots := map[int]int{}
		for i := 0; i < nKeys; i += 7 {
			keys = append(keys, keyOf(i))
			slots[keyslot.Of(keyOf(i))] = c.ShardOf(keyOf(i))
		}
		keys = append(keys, "missing")
		slots[keyslot.Of("missing")] = c.ShardOf("missing")
		before := c.Hedger().OpStats("MGET")
		vals, err := c.MGet(ctx, keys...)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			v, err := vals[i].ToString()
			switch {
			case k == "missing" && !vals[i].IsNil():
				t.Errorf("MGET value of a missing key: %v, want nil", vals[i])
			case k != "missing" && (err != nil || v != "v"+k):
				t.Errorf("MGET value %d (%s) = %q, %v", i, k, v, err)
			}
		}
		after := c.Hedger().OpStats("MGET")
		perShard := make([]int64, len(shards))
		for _, s := range slots {
			perShard[s]++
		}
		for s := range shards {
			var got int64
			if s < len(after.Shards) {
				got = after.Shards[s].Leaves
			}
			if s < len(before.Shards) {
				got -= before.Shards[s].Leaves
			}
			if got != perShard[s] {
				t.Errorf("shard %d served %d MGET leaves, want one per slot of its keys, %d", s, got, perShard[s])
			}
		}
	})

	t.Run("Validation", func(t *testing.T) {
		_, err := NewCluster(ctx, c.Cluster(), ClusterConfig{Hedge: hedge.Config{Replicas: 6}})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "leave them zero") {
			t.Errorf("NewCluster with Replicas: %v; want ErrInvalidConfig saying to leave it zero", err)
		}
	})
}
