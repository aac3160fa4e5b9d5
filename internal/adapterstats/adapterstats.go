// Package adapterstats holds what the Stats of the adapter packages
// (hedgepgx, hedgesql, hedgeredis, hedgerueidis) share: each server's
// counters, and the lookup of an operation class among the Hedger's
// stats. Each package embeds Counters in a struct of its own, with its
// own extra counters and padding, and copies the counts into its own
// exported stats types.
package adapterstats

import (
	"sync/atomic"

	"github.com/tailcut/hedge"
)

// Counters are one server's share of a Client's work. They take 48
// bytes, with no padding of their own: the embedding struct pads them to
// keep neighbouring servers' counters off one cache line.
type Counters struct {
	// Copies counts read copies started on the server: primaries and
	// hedges.
	Copies atomic.Int64
	// Wins counts reads answered by the server.
	Wins atomic.Int64
	// Failed counts copies that failed while still wanted.
	Failed atomic.Int64
	// Cancelled counts copies that ended with an error after their
	// context ended: losers, or reads whose caller gave up.
	Cancelled atomic.Int64
	// Writes counts writes sent to the server.
	Writes atomic.Int64
	// InFlight is the number of read copies running on the server now.
	InFlight atomic.Int64
}

// Op returns the entry of ops for op, or zero counts (and the delay
// hedge.Never) if there is none: what each adapter's Stats.Op returns.
func Op(ops []hedge.Stats, op string) hedge.Stats {
	for _, st := range ops {
		if st.Op == op {
			return st
		}
	}
	return hedge.Stats{Op: op, Delay: hedge.Never}
}
