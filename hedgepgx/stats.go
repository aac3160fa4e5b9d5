package hedgepgx

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
)

// Stats is a snapshot of a Client: the Hedger's per-class stats and each
// server's counters, position and pool. Counters are read one by one,
// each exactly; a snapshot taken while calls run may see one updated and
// a related one not yet.
type Stats struct {
	// Ops has one entry per read class used so far (the SQL text, or
	// Read's op), sorted: requests, hedges, wins, refusals, latency
	// distributions, the delay in force (see hedge.Stats). Reads that one
	// server only could serve count in Unhedgeable. Writes are not in it.
	Ops []hedge.Stats
	// Servers has one entry per pool, in pool order.
	Servers []ServerStats
}

// ServerStats is one server's share of a Client's work. Of the counts it
// embeds, Failed counts copies that failed (a connection error, a
// SQLSTATE that says the server cannot serve now) while still wanted,
// Writes counts Exec and ExecLSN calls, and InFlight counts copies that
// each hold one connection of the pool.
type ServerStats struct {
	// Index is the pool's position.
	Index int
	// Primary is true for the primary.
	Primary bool
	// Counts are the server's read copies, wins, failures,
	// cancellations, writes and copies in flight.
	adapterstats.Counts
	// Redirected counts copies run here although the Hedger had picked
	// another server, which was not fresh enough for the read (WithMinLSN,
	// MaxLag) or already held a copy of it.
	Redirected int64
	// Behind counts copies that found the server, on their own
	// connection, short of the read's minimum position (WithMinLSN)
	// although it was known to have replayed that far: it restarted, or
	// was rebuilt, since. Such a copy's answer is dropped and the read
	// goes to another server at once.
	Behind int64
	// LSN is the server's known WAL position (replayed, on a standby;
	// inserted, on the primary): the highest read from it since the poll
	// last saw it restart, or lower, where a copy found it behind; 0 if
	// none was read yet.
	LSN LSN
	// Polls and PollErrors count the reads of the position, and those
	// that failed.
	Polls, PollErrors int64
	// Pool is the pool's own snapshot: connections acquired and idle,
	// and NewConnsCount, the connections made since the pool was, which
	// grows by one per lost copy unless the pool keeps its connections
	// on cancel (KeepConnsOnCancel).
	Pool *pgxpool.Stat
}

// Stats returns a snapshot of the Client.
func (c *Client) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Servers: make([]ServerStats, len(c.pools))}
	for i, p := range c.pools {
		r := &c.reps[i]
		s.Servers[i] = ServerStats{
			Index:      i,
			Primary:    i == c.primary,
			Counts:     r.Load(),
			Redirected: r.redirected.Load(),
			Behind:     r.behind.Load(),
			LSN:        LSN(r.lsn.Load()),
			Polls:      r.polls.Load(),
			PollErrors: r.pollErrors.Load(),
			Pool:       p.Stat(),
		}
	}
	return s
}

// Op returns the entry of Ops for op, or zero counts if it was never used.
func (s Stats) Op(op string) hedge.Stats { return adapterstats.Op(s.Ops, op) }
