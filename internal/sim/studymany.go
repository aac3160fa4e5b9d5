package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// manyOnly reports whether r belongs to the fan-out, clients or shards
// groups alone: its world, strategy and load do not name it, so the
// other groups' tables must not find it.
func manyOnly(r *PointResult) bool {
	if len(r.Groups) == 0 {
		return r.Clients > 1 || r.Fanout > 1 || r.Shards > 1 || r.LowPriorityCopies || r.IdleOnlyCopies
	}
	for _, g := range r.Groups {
		if g != GroupFanOut && g != GroupClients && g != GroupShards {
			return false
		}
	}
	return true
}

// manyVariant picks the points of one column of the fan-out and clients
// tables.
type manyVariant func(r *PointResult) bool

func isDefault(r *PointResult) bool { return r.Strategy == Default.String() }

var (
	plainDefault = manyVariant(func(r *PointResult) bool {
		return isDefault(r) && !r.FanCall && !r.LowPriorityCopies && r.FanoutNeed == 0
	})
	fanCallAll = manyVariant(func(r *PointResult) bool {
		return isDefault(r) && r.FanCall && r.FanCanaries == 0 && !r.LowPriorityCopies && r.FanoutNeed == 0
	})
)

// manyCell formats a point of the fan-out or clients groups: its p50,
// p99 and p99.9 as ratios to none with the same clients, width and need,
// and after them the extra leaf requests (copies per leaf, minus one).
func manyCell(r *PointResult) string {
	if r == nil {
		return "–"
	}
	f := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	extra := r.HedgedFraction
	if r.Fanout > 1 {
		extra = r.Copies/float64(r.Fanout) - 1
	}
	return fmt.Sprintf("%s · %s · %s (+%.1f%%)", f(r.RatioP50), f(r.RatioP99), f(r.RatioP999), 100*max(extra, 0))
}

// manyColumn is a column of the fan-out and clients tables: its heading
// and the points it reads.
type manyColumn struct {
	head string
	pick manyVariant
}

// manyGroup is how one of the fan-out and clients groups is tabled: per
// world, a row per clients, width and load that has a none point, giving
// none's percentile abs in time units and then each column's manyCell.
type manyGroup struct {
	group, title, intro string
	clients, widths     []int
	abs                 string // "p50" or "p99"
	columns             []manyColumn
}

// manyTables renders the fan-out and clients groups of res.
func manyTables(res []PointResult) string {
	none := manyVariant(func(r *PointResult) bool { return r.Strategy == None.String() && r.FanoutNeed == 0 })
	firstK := func(fc bool) manyVariant {
		return func(r *PointResult) bool {
			return isDefault(r) && r.FanCall == fc && r.FanCanaries == 0 && r.FanoutNeed > 0
		}
	}
	groups := []manyGroup{{
		group: GroupFanOut, title: "Fan-out requests",
		intro: "One client; each request sends its leaves at once and waits for all of them (or for the first 95% of them); the load counts leaves, and each run serves the same number of leaves whatever the width. " +
			"`none` gives the request's p99 in time units; every other cell gives the request's p50 · p99 · p99.9 as ratios to `none` with the same width (and, for the first 95%, `none` waiting for as many), " +
			"then the extra leaf requests. `default` hedges each leaf on its own; the fan-out call (`hedge.DoFan`, its zero `FanOut`) gives the request one budget and cap and the sibling trigger; with a canary, one leaf goes first and the others when it has answered.",
		clients: []int{1}, widths: StudyFanWidths, abs: "p99",
		columns: []manyColumn{
			{"default", plainDefault},
			{"fan-out call", fanCallAll},
			{"first 95%: default", firstK(false)},
			{"first 95%: fan-out call", firstK(true)},
			{"fan-out call, 1 canary", func(r *PointResult) bool { return isDefault(r) && r.FanCall && r.FanCanaries > 0 }},
		},
	}, {
		group: GroupClients, title: "Many clients",
		intro: "The servers' traffic split evenly among clients, each with a Hedger of its own that sees only its own requests; requests of one leaf or fan-outs that wait for all their leaves. " +
			"`none` gives the request's p50 in time units; every other cell gives the request's p50 · p99 · p99.9 as ratios to `none` with the same clients and width, then the extra leaf requests. " +
			"`low-priority copies` is the default with servers that run a copy only on capacity no primary wants (`LowPriorityCopies`); the fan-out call is `hedge.DoFan` with its zero `FanOut` (fan-outs only).",
		clients: StudyClientCounts, widths: StudyClientWidths, abs: "p50",
		columns: []manyColumn{
			{"default", plainDefault},
			{"low-priority copies", func(r *PointResult) bool { return isDefault(r) && r.LowPriorityCopies && !r.FanCall }},
			{"fan-out call", fanCallAll},
		},
	}}

	var b bytes.Buffer
	for _, g := range groups {
		loads := loadsOf(res, func(r *PointResult) bool { return slices.Contains(r.Groups, g.group) })
		if len(loads) == 0 {
			continue
		}
		find := func(w World, clients, width int, load float64, v manyVariant) *PointResult {
			for i := range res {
				r := &res[i]
				if r.World == w.String() && max(r.Clients, 1) == clients && max(r.Fanout, 1) == width &&
					r.Load == load && slices.Contains(r.Groups, g.group) && v(r) {
					return r
				}
			}
			return nil
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", g.title, g.intro)
		for _, w := range StudyManyWorlds {
			heads := []string{"width", "load", "none " + g.abs}
			if len(g.clients) > 1 {
				heads = append([]string{"clients"}, heads...)
			}
			for _, c := range g.columns {
				heads = append(heads, c.head)
			}
			fmt.Fprintf(&b, "### %s\n\n| %s |\n|%s\n", w, strings.Join(heads, " | "), strings.Repeat("---:|", len(heads)))
			for _, clients := range g.clients {
				for _, width := range g.widths {
					for _, l := range loads {
						n := find(w, clients, width, l, none)
						if n == nil {
							continue
						}
						if len(g.clients) > 1 {
							fmt.Fprintf(&b, "| %d ", clients)
						}
						abs := n.P99
						if g.abs == "p50" {
							abs = n.P50
						}
						fmt.Fprintf(&b, "| %d | %g | %.3g |", width, l, abs)
						for _, c := range g.columns {
							fmt.Fprintf(&b, " %s |", manyCell(find(w, clients, width, l, c.pick)))
						}
						b.WriteString("\n")
					}
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
