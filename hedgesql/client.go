package hedgesql

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
	"github.com/tailcut/hedge/internal/callgate"
)

var (
	// ErrClosed is the error of a call made after Close, and of a copy
	// that would have started after it.
	ErrClosed = errors.New("hedgesql: client is closed")
	// ErrNoPrimary is the error of Exec on a Client made with
	// Config.NoPrimary.
	ErrNoPrimary = errors.New("hedgesql: no primary (Config.NoPrimary): send writes through the primary's *sql.DB")
)

// Client hedges reads across the databases of a primary and its read
// replicas, and sends writes to the primary alone, once. It is safe for
// concurrent use. Make one with New, and Close it.
type Client struct {
	dbs         []*sql.DB
	primary     int // -1 with Config.NoPrimary
	h           *hedge.Hedger
	unavailable func(error) bool
	servers     []server

	gate callgate.Gate // running copies and writes; closed by Close
}

// server holds one database's counters.
type server struct {
	adapterstats.Counters
	_ [16]byte
}

// New returns a Client over dbs, one per server of the same data:
// dbs[cfg.Primary] is the primary, the others its read replicas. The
// Client does not own the databases: Close waits for the copies it
// started and leaves them open.
//
// Open the databases so that a cancelled query costs as little as the
// driver allows (see "Cancellation, by driver" in the package doc).
//
// The error, if any, lists every mistake at once and matches
// ErrInvalidConfig with errors.Is.
func New(dbs []*sql.DB, cfg Config) (*Client, error) {
	dbs = slices.Clone(dbs)
	h, err := validate(dbs, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{
		dbs:         dbs,
		primary:     cfg.Primary,
		h:           h,
		unavailable: cfg.Unavailable,
		servers:     make([]server, len(dbs)),
	}
	if cfg.NoPrimary {
		c.primary = -1
	}
	if c.unavailable == nil {
		c.unavailable = DefaultUnavailable
	}
	return c, nil
}

// Close stops new calls (they fail with ErrClosed) and waits for every
// copy and write the Client started, losing copies still being cancelled
// included. It leaves the databases open. It is idempotent.
func (c *Client) Close() error {
	c.gate.Close()
	c.gate.Wait()
	return nil
}

// Hedger returns the Client's Hedger, for SetMode, SetRollout and its own
// Stats. Do not use it with other servers.
func (c *Client) Hedger() *hedge.Hedger { return c.h }

// Primary returns the primary's database, or nil with Config.NoPrimary.
// Use it for transactions and anything else the Client does not route;
// nothing sent through it is hedged or counted.
func (c *Client) Primary() *sql.DB {
	if c.primary < 0 {
		return nil
	}
	return c.dbs[c.primary]
}

// DB returns database i (0 <= i < Len()).
func (c *Client) DB(i int) *sql.DB { return c.dbs[i] }

// Len returns the number of databases, the primary's included.
func (c *Client) Len() int { return len(c.dbs) }

// Exec runs query with args on the primary, once, on the caller's
// goroutine, as sql.DB.ExecContext does: never hedged, never sent to a
// replica, never seen by the Hedger, whatever the context carries, and
// counted in the primary's ServerStats.Writes. It fails with ErrNoPrimary
// with Config.NoPrimary.
func (c *Client) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if c.primary < 0 {
		return nil, ErrNoPrimary
	}
	if !c.gate.Enter() {
		return nil, ErrClosed
	}
	defer c.gate.Leave()
	c.servers[c.primary].Writes.Add(1)
	return c.dbs[c.primary].ExecContext(ctx, query, args...)
}

// Stats is a snapshot of a Client: the Hedger's per-class stats and each
// server's counters and pool. Counters are read one by one, each exactly;
// a snapshot taken while calls run may see one updated and a related one
// not yet.
type Stats struct {
	// Ops has one entry per read class used so far (the SQL text, or
	// Read's op), sorted (see hedge.Stats). Writes are not in it.
	Ops []hedge.Stats
	// Servers has one entry per database, in order.
	Servers []ServerStats
}

// ServerStats is one server's share of a Client's work. Of the counts it
// embeds, Failed counts copies that failed (see "Reads" in the package
// doc) while still wanted, and Writes counts Exec calls.
type ServerStats struct {
	// Index is the database's position.
	Index int
	// Primary is true for the primary.
	Primary bool
	// Counts are the server's read copies, wins, failures,
	// cancellations, writes and copies in flight.
	adapterstats.Counts
	// DB is database/sql's own snapshot: connections open and in use,
	// waits for a connection, and connections closed.
	DB sql.DBStats
}

// Stats returns a snapshot of the Client.
func (c *Client) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Servers: make([]ServerStats, len(c.dbs))}
	for i, db := range c.dbs {
		s.Servers[i] = ServerStats{
			Index:   i,
			Primary: i == c.primary,
			Counts:  c.servers[i].Load(),
			DB:      db.Stats(),
		}
	}
	return s
}

// Op returns the entry of Ops for op, or zero counts if it was never
// used.
func (s Stats) Op(op string) hedge.Stats { return adapterstats.Op(s.Ops, op) }
