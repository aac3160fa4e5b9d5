package hedgeredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/keyslot"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestCluster runs against one real Redis Cluster on loopback: 3 masters,
// each with a replica.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	c, err := NewClusterFromOptions(ctx, &redis.ClusterOptions{
		Addrs:       cl.Addrs(),
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, PoolTimeout: time.Minute,
	}, ClusterConfig{Hedge: hedgeNow().Hedge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	// The layout is the cluster's: shard s is the s-th master by first
	// slot, with its replica; nodes are named by address.
	nodes := c.Nodes()
	shards := c.Shards()
	if err := cl.CheckLayout(nodes, shards); err != nil {
		t.Fatal(err)
	}
	for k, n := range nodes {
		if c.Hedger().ReplicaName(k) != n {
			t.Errorf("node %d is named %q, want its address %s", k, c.Hedger().ReplicaName(k), n)
		}
	}

	// Keys, and where they live; every key's slot as the server says.
	const nKeys = 120
	keyOf := func(i int) string { return fmt.Sprintf("key:%d", i) }
	byShard := make([][]string, len(shards))
	for i := range nKeys {
		k := keyOf(i)
		if err := c.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, err := c.Cluster().ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot) != keyslot.Of(k) {
			t.Fatalf("slot of %q: the server says %d, keyslot %d", k, slot, keyslot.Of(k))
		}
		s := c.ShardOf(k)
		if s != cl.ShardOf(int(slot)) {
			t.Fatalf("%q is on shard %d, the cluster says %d", k, s, cl.ShardOf(int(slot)))
		}
		byShard[s] = append(byShard[s], k)
	}
	// Each replica has every write of its master.
	for s := range shards {
		master, replica := c.nodes[shards[s][0]], c.nodes[shards[s][1]]
		waitFor(t, "the replicas to sync", func() bool {
			m, err1 := master.DBSize(ctx).Result()
			r, err2 := replica.DBSize(ctx).Result()
			return err1 == nil && err2 == nil && m == r
		})
	}

	t.Run("ReadsStayInTheirSlot", func(t *testing.T) {
		for s := range shards {
			before := c.Stats().Replicas
			for _, k := range byShard[s] {
				if v, err := c.Get(ctx, k).Result(); err != nil || v != "v"+k {
					t.Fatalf("GET %s: %q, %v", k, v, err)
				}
			}
			waitFor(t, "copies to return", func() bool { return clusterIdle(c) })
			after := c.Stats().Replicas
			for k := range nodes {
				copies := after[k].Copies - before[k].Copies
				if !slices.Contains(shards[s], k) && copies != 0 {
					t.Errorf("shard %d's reads sent %d copies to node %s of another shard", s, copies, nodes[k])
				}
			}
			// Both nodes of the slot served reads: the replica answers
			// on its READONLY connections.
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
			k := shards[s][answers]
			other := shards[s][1-answers]
			stalls := [2]*redistest.Stall{stall(t, cl.Shards[s].Master), stall(t, cl.Shards[s].Replicas[0])}
			before := c.Stats()
			done := make(chan error, 1)
			go func() {
				v, err := c.Get(ctx, key).Result()
				if err == nil && v != "v"+key {
					err = fmt.Errorf("GET %s = %q", key, v)
				}
				done <- err
			}()
			waitFor(t, "a copy on each node of the slot", func() bool {
				r := c.Stats().Replicas
				return r[k].InFlight == 1 && r[other].InFlight == 1
			})
			release(t, stalls[answers])
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			after := c.Stats()
			if after.Replicas[k].Wins != before.Replicas[k].Wins+1 {
				t.Errorf("node %s, released, did not answer", nodes[k])
			}
			if after.Replicas[other].InFlight != 1 {
				t.Errorf("the stalled node %s holds %d copies, want its one", nodes[other], after.Replicas[other].InFlight)
			}
			if got := after.Op("GET").Hedges - before.Op("GET").Hedges; got != 1 {
				t.Errorf("%d hedges, want 1", got)
			}
			for n := range nodes {
				if !slices.Contains(shards[s], n) && after.Replicas[n].Copies != before.Replicas[n].Copies {
					t.Errorf("node %s of another shard got a copy", nodes[n])
				}
			}
			release(t, stalls[1-answers])
			waitFor(t, "the loser to return", func() bool { return clusterIdle(c) })
		}
	})

	t.Run("MGetIsAFanOutBySlot", func(t *testing.T) {
		var keys []string
		slots := map[int]int{} // slot: shard
		for i := 0; i < nKeys; i += 7 {
			keys = append(keys, keyOf(i))
			slots[keyslot.Of(keyOf(i))] = c.ShardOf(keyOf(i))
		}
		keys = append(keys, "missing")
		slots[keyslot.Of("missing")] = c.ShardOf("missing")
		before := c.Hedger().OpStats("MGET")
		vals, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			want := any("v" + k)
			if k == "missing" {
				want = nil
			}
			if vals[i] != want {
				t.Errorf("MGET value %d (%s) = %v, want %v", i, k, vals[i], want)
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
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		defer cc.Close()
		_, err := NewCluster(ctx, cc, ClusterConfig{Hedge: hedge.Config{Replicas: 6}})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ReadOnly") || !strings.Contains(err.Error(), "leave them zero") {
			t.Errorf("NewCluster without ReadOnly, with Replicas: %v; want ErrInvalidConfig naming both", err)
		}
	})
}

// clusterIdle reports whether no read copy is running on any node.
func clusterIdle(c *ClusterClient) bool {
	for _, r := range c.Stats().Replicas {
		if r.InFlight != 0 {
			return false
		}
	}
	return true
}
