package sim

import (
	"bytes"
	"fmt"
	"slices"
)

// shardsTable renders the shards group of res: for each topology of
// StudyShardTopologies and each world, a row per clients and load with
// none's request percentiles, the placement's own gain and the fan-out
// call's ratios to none.
func shardsTable(res []PointResult) string {
	in := func(r *PointResult) bool { return slices.Contains(r.Groups, GroupShards) }
	loads := loadsOf(res, in)
	if len(loads) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.WriteString("## Sharded fan-outs\n\n" +
		"The servers split into shards of R replicas each. Every request reads one leaf per shard (or, with 1,000 leaves over 100 shards, ten), " +
		"leaf i from shard i mod the shards, and every copy of a leaf goes to its shard's replicas only. " +
		"`none` places each leaf on the less busy of two of its shard's replicas, busy by the client's own requests in flight, and sends one copy; " +
		"its cells give the request's p99 and p99.9 in time units. " +
		"`placement` is that `none` over `none` with random placement within the shard, as the request's p50 · p99 · p99.9: the placement's own gain, which the hedging column leaves out. " +
		"`fan-out call` is the library's zero `hedge.Config` with `hedge.DoFan`'s zero `FanOut` over the shards' leaves, one Hedger per client that sees every server: " +
		"the request's p50 · p99 · p99.9 as ratios to `none` with the same clients, then the extra leaf requests.\n\n")
	find := func(tp ShardTopology, w World, ro Routing, s Strategy, clients int, load float64) *PointResult {
		for i := range res {
			r := &res[i]
			if in(r) && r.Shards == tp.Shards && r.Servers == tp.Shards*tp.Replicas && r.Fanout == tp.Width &&
				r.World == w.String() && r.Routing == ro.String() && r.Strategy == s.String() &&
				max(r.Clients, 1) == clients && r.Load == load {
				return r
			}
		}
		return nil
	}
	for _, tp := range StudyShardTopologies {
		fmt.Fprintf(&b, "### %d shards x %d replicas, %d leaves\n\n", tp.Shards, tp.Replicas, tp.Width)
		for i := range res {
			if r := &res[i]; in(r) && r.Shards == tp.Shards && r.Fanout == tp.Width && r.Servers == tp.Shards*tp.Replicas {
				fmt.Fprintf(&b, "%d runs of %d requests per point (first %d discarded), %d servers.\n\n", r.Runs, r.Requests, r.Warmup, r.Servers)
				break
			}
		}
		b.WriteString("| world | clients | load | none p99 | none p99.9 | placement | fan-out call |\n|---|---:|---:|---:|---:|---:|---:|\n")
		rows := 0
		for _, w := range StudyManyWorlds {
			for _, clients := range StudyShardClients {
				for _, l := range loads {
					n := find(tp, w, TwoChoice, None, clients, l)
					if n == nil {
						continue
					}
					rows++
					fmt.Fprintf(&b, "| %s | %d | %g | %.3g | %.3g | %s | %s |\n", w, clients, l, n.P99, n.P999,
						threeRatios(n.PlacementP50, n.PlacementP99, n.PlacementP999), manyCell(find(tp, w, TwoChoice, Default, clients, l)))
				}
			}
		}
		if rows == 0 {
			b.WriteString("| – | | | | | | |\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// threeRatios formats three ratios as "p50 · p99 · p99.9", "?" for one
// that is unknown.
func threeRatios(a, b, c *float64) string {
	f := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	return f(a) + " · " + f(b) + " · " + f(c)
}
