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

// ReplicaStats is one replica's share of a Client's work. Of the counts
// it embeds, Failed counts read copies that failed with a transport error
// or a replica-state error reply (LOADING, BUSY, ...) while still wanted,
// and Cancelled copies that returned because their context ended, whose
// replies rueidis reads and drops when the server sends them.
type ReplicaStats struct {
	// Index is the replica's position among the clients.
	Index int
	// Addr is the server's address, as its rueidis.Client names it.
	Addr string
	// Primary is true for the write primary.
	Primary bool
	// Counts are the replica's read copies, wins, failures,
	// cancellations, writes and copies in flight.
	adapterstats.Counts
}

// Stats returns a snapshot of the Client.
func (c *Client) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Replicas: make([]ReplicaStats, len(c.clients))}
	for i := range c.clients {
		s.Replicas[i] = ReplicaStats{
			Index:   i,
			Addr:    c.addrs[i],
			Primary: i == c.primary,
			Counts:  c.reps[i].Load(),
		}
	}
	return s
}
