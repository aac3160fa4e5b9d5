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

// Counts is a snapshot of Counters: the counts that every adapter's
// per-server stats share. Each adapter's server or replica stats embed
// it, and say there what their driver makes of each count.
type Counts struct {
	// Copies counts read copies started on the server: primaries and
	// hedges.
	Copies int64
	// Wins counts reads answered by the server (the copy the caller
	// got).
	Wins int64
	// Failed counts read copies that failed while still wanted: a
	// transport error, or an answer that says the server cannot serve
	// now (each adapter's package doc lists them).
	Failed int64
	// Cancelled counts read copies that ended with an error after their
	// context ended: losers, or reads whose caller gave up.
	Cancelled int64
	// Writes counts writes sent to the server. It stays zero on every
	// server but the primary.
	Writes int64
	// InFlight is the number of read copies running on the server now,
	// losers being cancelled included.
	InFlight int64
}

// Load reads the counters one by one, each exactly: a snapshot taken
// while calls run may see one updated and a related one not yet.
func (c *Counters) Load() Counts {
	return Counts{
		Copies:    c.Copies.Load(),
		Wins:      c.Wins.Load(),
		Failed:    c.Failed.Load(),
		Cancelled: c.Cancelled.Load(),
		Writes:    c.Writes.Load(),
		InFlight:  c.InFlight.Load(),
	}
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
