package sim

import (
	"bytes"
	"fmt"
	"slices"
)

// manyOnly reports whether r belongs to the fan-out or clients groups
// alone: its world, strategy and load do not name it, so the other
// groups' tables must not find it.
func manyOnly(r *PointResult) bool {
	if len(r.Groups) == 0 {
		return r.Clients > 1 || r.Fanout > 1 || r.LowPriorityCopies || r.IdleOnlyCopies
	}
	for _, g := range r.Groups {
		if g != GroupFanOut && g != GroupClients {
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

// manyTables renders the fan-out and clients groups of res.
func manyTables(res []PointResult) string {
	var b bytes.Buffer
	in := func(g string) func(r *PointResult) bool {
		return func(r *PointResult) bool { return slices.Contains(r.Groups, g) }
	}
	find := func(g string, w World, clients, width int, load float64, v manyVariant) *PointResult {
		for i := range res {
			r := &res[i]
			if r.World == w.String() && max(r.Clients, 1) == clients && max(r.Fanout, 1) == width &&
				r.Load == load && slices.Contains(r.Groups, g) && v(r) {
				return r
			}
		}
		return nil
	}
	none := manyVariant(func(r *PointResult) bool { return r.Strategy == None.String() && r.FanoutNeed == 0 })

	if loads := loadsOf(res, in(GroupFanOut)); len(loads) > 0 {
		firstK := func(fc bool) manyVariant {
			return manyVariant(func(r *PointResult) bool {
				return isDefault(r) && r.FanCall == fc && r.FanCanaries == 0 && r.FanoutNeed > 0
			})
		}
		canary := manyVariant(func(r *PointResult) bool { return isDefault(r) && r.FanCall && r.FanCanaries > 0 })
		b.WriteString("## Fan-out requests\n\n" +
			"One client; each request sends its leaves at once and waits for all of them (or for the first 95% of them); the load counts leaves, and each run serves the same number of leaves whatever the width. " +
			"`none` gives the request's p99 in time units; every other cell gives the request's p50 · p99 · p99.9 as ratios to `none` with the same width (and, for the first 95%, `none` waiting for as many), " +
			"then the extra leaf requests. `default` hedges each leaf on its own; the fan-out call (`hedge.DoFan`, its zero `FanOut`) gives the request one budget and cap and the sibling trigger; with a canary, one leaf goes first and the others when it has answered.\n\n")
		for _, w := range StudyManyWorlds {
			fmt.Fprintf(&b, "### %s\n\n| width | load | none p99 | default | fan-out call | first 95%%: default | first 95%%: fan-out call | fan-out call, 1 canary |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n", w)
			for _, width := range StudyFanWidths {
				for _, l := range loads {
					n := find(GroupFanOut, w, 1, width, l, none)
					if n == nil {
						continue
					}
					fmt.Fprintf(&b, "| %d | %g | %.3g | %s | %s | %s | %s | %s |\n", width, l, n.P99,
						manyCell(find(GroupFanOut, w, 1, width, l, plainDefault)), manyCell(find(GroupFanOut, w, 1, width, l, fanCallAll)),
						manyCell(find(GroupFanOut, w, 1, width, l, firstK(false))), manyCell(find(GroupFanOut, w, 1, width, l, firstK(true))),
						manyCell(find(GroupFanOut, w, 1, width, l, canary)))
				}
			}
			b.WriteString("\n")
		}
	}

	if loads := loadsOf(res, in(GroupClients)); len(loads) > 0 {
		lowPriority := manyVariant(func(r *PointResult) bool {
			return isDefault(r) && r.LowPriorityCopies && !r.FanCall
		})
		b.WriteString("## Many clients\n\n" +
			"The servers' traffic split evenly among clients, each with a Hedger of its own that sees only its own requests; requests of one leaf or fan-outs that wait for all their leaves. " +
			"`none` gives the request's p50 in time units; every other cell gives the request's p50 · p99 · p99.9 as ratios to `none` with the same clients and width, then the extra leaf requests. " +
			"`low-priority copies` is the default with servers that run a copy only on capacity no primary wants (`LowPriorityCopies`); the fan-out call is `hedge.DoFan` with its zero `FanOut`.\n\n")
		for _, w := range StudyManyWorlds {
			fmt.Fprintf(&b, "### %s\n\n| clients | width | load | none p50 | default | low-priority copies | fan-out call |\n|---:|---:|---:|---:|---:|---:|---:|\n", w)
			for _, clients := range StudyClientCounts {
				for _, width := range StudyClientWidths {
					for _, l := range loads {
						n := find(GroupClients, w, clients, width, l, none)
						if n == nil {
							continue
						}
						fc := "–"
						if width > 1 {
							fc = manyCell(find(GroupClients, w, clients, width, l, fanCallAll))
						}
						fmt.Fprintf(&b, "| %d | %d | %g | %.3g | %s | %s | %s |\n", clients, width, l, n.P50,
							manyCell(find(GroupClients, w, clients, width, l, plainDefault)),
							manyCell(find(GroupClients, w, clients, width, l, lowPriority)), fc)
					}
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
