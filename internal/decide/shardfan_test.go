package decide_test

import (
	"testing"

	"github.com/tailcut/hedge/internal/decide"
)

// grid is n shards of r servers, shard s on servers s*r to s*r+r-1.
func grid(n, r int) [][]int {
	out := make([][]int, n)
	for s := range out {
		for j := range r {
			out[s] = append(out[s], s*r+j)
		}
	}
	return out
}

// each returns n shards of k leaves each.
func each(n, k int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = k
	}
	return out
}

func TestShardFanDefaults(t *testing.T) {
	for _, c := range []struct {
		name     string
		leaves   []int
		shards   [][]int
		servers  int
		heaviest float64
		hedges   int
		mark     float64
	}{
		// 30 leaves over 30 shards of 2: half a leaf per server. As
		// over 60 replicas, 2 hedges; the mark counts 2 replicas, not 60.
		{"30x2", each(30, 1), grid(30, 2), 60, 0.5, 2, 0.75},
		// The Tail at Scale's 1,000 leaves over 100 shards of 3.
		{"100x3", each(100, 10), grid(100, 3), 300, 10.0 / 3, 8, 0.75},
		// Every leaf on shard 0, of 2 servers: 15 leaves a server.
		{"one shard", append([]int{30}, make([]int, 29)...), grid(30, 2), 60, 15, 30, 0.5},
		// 40 leaves over 10 shards of 10: the flat default of 10 replicas.
		{"10x10", each(10, 4), grid(10, 10), 100, 0.4, 2, 0.75},
		// Server 0 holds three shards alone, and 30 of 40 leaves, which
		// no copy can help.
		{"shared", []int{10, 10, 10, 10}, [][]int{{0}, {0}, {0}, {1, 2}}, 3, 30, 60, 0.5},
		// Server 1 holds two shards of 2 servers, 10 leaves of 30.
		{"overlap", []int{10, 10, 10}, [][]int{{0, 1}, {1, 2}, {2, 0}}, 3, 10, 20, 0.5},
		// Ten shards of 5, server 0 holding all ten: a fifth of the
		// leaves, as a replica of 5 holds; the mark is 1 - 1.5/5.
		{"hub", each(10, 5), func() [][]int {
			var g [][]int
			for s := range 10 {
				g = append(g, []int{0, 1 + 4*s, 2 + 4*s, 3 + 4*s, 4 + 4*s})
			}
			return g
		}(), 41, 10, 20, 0.7},
		{"no leaf", make([]int, 3), grid(3, 2), 6, 0, 2, 0.75},
	} {
		t.Run(c.name, func(t *testing.T) {
			heaviest := decide.ShardLoad(c.leaves, c.shards, c.servers)
			if d := heaviest - c.heaviest; d > 1e-9 || d < -1e-9 {
				t.Fatalf("ShardLoad = %v; want %v", heaviest, c.heaviest)
			}
			if got := decide.DefaultShardFanHedges(heaviest); got != c.hedges {
				t.Errorf("DefaultShardFanHedges(%v) = %d; want %d", heaviest, got, c.hedges)
			}
			n := 0
			for _, k := range c.leaves {
				n += k
			}
			// The mark counts the share of the leaves one stuck server
			// holds, as the flat mark counts 1/replicas.
			if mark := decide.DefaultShardFanMark(n, heaviest); mark < c.mark-1e-9 || mark > c.mark+1e-9 {
				t.Errorf("DefaultShardFanMark(%d, %v) = %v; want %v", n, heaviest, mark, c.mark)
			}
		})
	}
}

// Over a grid, the sharded budget and mark are the flat ones of as many
// replicas as servers: DefaultFanHedges(n, servers), DefaultFanMark(servers).
func TestShardFanHedgesMatchFlat(t *testing.T) {
	for _, c := range [][3]int{{30, 2, 1}, {100, 3, 10}, {10, 10, 4}, {7, 3, 9}} {
		shards, r, k := c[0], c[1], c[2]
		heaviest := decide.ShardLoad(each(shards, k), grid(shards, r), shards*r)
		if got, want := decide.DefaultShardFanHedges(heaviest), decide.DefaultFanHedges(shards*k, shards*r); got != want {
			t.Errorf("%d shards x %d, %d leaves each: %d; want %d, as over %d replicas", shards, r, k, got, want, shards*r)
		}
		if got, want := decide.DefaultShardFanMark(shards*k, heaviest), decide.DefaultFanMark(shards*r); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%d shards x %d, %d leaves each: mark %v; want %v, as over %d replicas", shards, r, k, got, want, shards*r)
		}
	}
}
