package sim

import "github.com/tailcut/hedge/internal/decide"

// The hedge placements TestDefaultAlternatives measures besides the
// Picker's (Config.placement):
const (
	placeLeastOfFour    = 4  // the least loaded of four replicas drawn
	placeLeastOfAll     = -1 // the least loaded of every replica
	placeKeepOneIdle    = -2 // as placeLeastOfAll while two replicas are idle, else a busy one (refused)
	placeLeastForBehind = -3 // placeLeastOfAll for a primary stuck behind an unanswered request, else the Picker's

	// placeLeastWhenSpare - 100*s is placeLeastOfAll while the Policy's
	// Spare (the share of recent primaries that found their replica
	// idle) is at least s, else the Picker's; placeBehindWhenSpare - 100*s
	// is placeLeastForBehind under the same condition.
	placeLeastWhenSpare  = -100
	placeBehindWhenSpare = -200
)

func init() { hedgePlacement = placeHedge }

// placeHedge places the second copy of r, whose primary is on queue h,
// as e.c.placement says. The first replica is drawn as the Picker draws
// it, so that the runs share their random streams with the default's.
func placeHedge(e *engine, r *request, h int) int32 {
	k, n := e.c.placement, e.serversN
	if k <= placeLeastWhenSpare {
		base, behind := placeLeastWhenSpare, false
		if k <= placeBehindWhenSpare {
			base, behind = placeBehindWhenSpare, true
		}
		if e.pol.Spare() < float64(base-k)/100 || behind && e.evidence(r) != decide.EvidenceBehind {
			return int32(e.picker.Pick(n, []int{h}, e.load, e.rM.Uint64()))
		}
		k = placeLeastOfAll
	}
	if k == placeLeastForBehind {
		if e.evidence(r) != decide.EvidenceBehind {
			return int32(e.picker.Pick(n, []int{h}, e.load, e.rM.Uint64()))
		}
		k = placeLeastOfAll
	}
	a := e.rM.IntN(n - 1)
	if a >= h {
		a++
	}
	if k < 0 || k >= n-1 {
		// Every replica but the primary's, from a at random.
		best, bl, idle := -1, 0, 0
		for j := range n {
			i := (a + j) % n
			if i == h {
				continue
			}
			l := e.load(i)
			if l <= 0 {
				idle++
			}
			if best < 0 || l < bl {
				best, bl = i, l
			}
		}
		if k == placeKeepOneIdle && idle < 2 {
			// Leave the last idle replica to new work: a busy one,
			// which the spare-capacity rule refuses.
			for j := range n {
				if j != h && e.load(j) > 0 {
					return int32(j)
				}
			}
		}
		return int32(best)
	}
	best, bl := a, e.load(a)
	for range k - 1 {
		i := e.rM.IntN(n)
		for i == h {
			i = e.rM.IntN(n)
		}
		if l := e.load(i); l < bl {
			best, bl = i, l
		}
	}
	return int32(best)
}
