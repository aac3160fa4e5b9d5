package hedgerueidis

import (
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
)

// Stats is a snapshot of a Client: the Hedger's per-command stats and each
// replica's counters. Counters are read one by one, each exactly; a
// snapshot taken while calls run may see one updated and a related one
// not yet.
type Stats struct {
	// Ops has one entry per read command class used so far (the
	// upper-case command name), sorted by name (see hedge.Stats). Writes
	// are not in it: they never go through the Hedger.
	Ops []hedge.Stats
	// Replicas has one entry per replica, in client order.
	Replicas []ReplicaStats
}

// Op returns the entry of Ops for op (an upper-case command name), or
// zero counts if it was never used.
func (s Stats) Op(op string) hedge.Stats { return adapterstats.Op(s.Ops, op) }

// ReplicaStats is one replica's share of a Client's work.
type ReplicaStats struct {
	// Index is the replica's position among the clients.
	Index int
	// Addr is the server's address, as its rueidis.Client names it.
	Addr string
	// Primary is true for the write primary.
	Primary bool
	// Copies counts read copies started here: primaries and hedges.
	Copies int64
	// Wins counts reads answered by this replica (the copy the caller got).
	Wins int64
	// Failed counts read copies that failed with a transport error or a
	// replica-state error reply (LOADING, BUSY, ...) while still wanted.
	Failed int64
	// Cancelled counts read copies that returned because their context
	// ended: losers, or calls whose caller gave up. rueidis reads and
	// drops their replies when the server sends them.
	Cancelled int64
	// Writes counts commands sent here as writes. It stays zero on every
	// replica but the primary.
	Writes int64
	// InFlight is the number of read copies running here now.
	InFlight int64
}

// Stats returns a snapshot of the Client.
func (c *Client) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Replicas: make([]ReplicaStats, len(c.clients))}
	for i := range c.clients {
		rs := &c.reps[i]
		s.Replicas[i] = ReplicaStats{
			Index:     i,
			Addr:      c.addrs[i],
			Primary:   i == c.primary,
			Copies:    rs.Copies.Load(),
			Wins:      rs.Wins.Load(),
			Failed:    rs.Failed.Load(),
			Cancelled: rs.Cancelled.Load(),
			Writes:    rs.Writes.Load(),
			InFlight:  rs.InFlight.Load(),
		}
	}
	return s
}
