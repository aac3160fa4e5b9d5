package hedgeredis

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
)

// Stats is a snapshot of a Client: the Hedger's per-command stats and each
// replica's counters and connection pool. Counters are read one by one,
// each exactly; a snapshot taken while calls run may see one updated and a
// related one not yet.
type Stats struct {
	// Ops has one entry per read command class used so far (the
	// upper-case command name), sorted by name: requests, hedges sent,
	// hedge wins, budget denials, latency distributions, the delay in
	// force (see hedge.Stats). Writes are not in it: they never go
	// through the Hedger.
	Ops []hedge.Stats
	// Replicas has one entry per replica, in client order.
	Replicas []ReplicaStats
}

// Op returns the entry of Ops for op (an upper-case command name), or
// zero counts if it was never used.
func (s Stats) Op(op string) hedge.Stats { return adapterstats.Op(s.Ops, op) }

// ReplicaStats is one replica's share of a Client's work, and its go-redis
// connection pool. Of the counts it embeds, Failed counts read copies
// that failed with a transport error or a replica-state error reply
// (LOADING, BUSY, ...) while still wanted. Cancelled counts, with
// go-redis, copies that were still waiting for a free connection (a read
// already sent is not interrupted by cancellation), so a high count
// means an exhausted pool; go-redis's own Pool stats do not count such
// abandoned waits. InFlight counts losers still waiting for a stalled
// server too; each copy holds one connection of the pool (or waits for
// one).
type ReplicaStats struct {
	// Index is the replica's position among the clients.
	Index int
	// Addr is the client's address (redis.Options.Addr).
	Addr string
	// Primary is true for the write primary.
	Primary bool

	// Counts are the replica's read copies, wins, failures,
	// cancellations, writes (commands Do sent here as writes) and copies
	// in flight.
	adapterstats.Counts

	// Pool is go-redis's pool snapshot (redis.Client.PoolStats):
	// TotalConns and IdleConns now; Hits, Misses, Timeouts (a pool wait
	// that hit PoolTimeout), WaitCount and WaitDurationNs (waits for a
	// free connection, and their total time), StaleConns (connections
	// removed: idle too long, or found bad after an error, such as a read
	// cut short by a deadline), since the client was made.
	Pool redis.PoolStats
}

// PoolWait returns the total time calls spent waiting for a free
// connection of this replica's pool (Pool.WaitDurationNs). It grows when
// the pool is too small for the copies sent here, or when a stalled
// replica holds its connections.
func (r ReplicaStats) PoolWait() time.Duration { return time.Duration(r.Pool.WaitDurationNs) }

// Stats returns a snapshot of the Client.
func (c *Client) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Replicas: make([]ReplicaStats, len(c.clients))}
	for i, rc := range c.clients {
		s.Replicas[i] = ReplicaStats{
			Index:   i,
			Addr:    rc.Options().Addr,
			Primary: i == c.primary,
			Counts:  c.reps[i].Load(),
			Pool:    *rc.PoolStats(),
		}
	}
	return s
}
