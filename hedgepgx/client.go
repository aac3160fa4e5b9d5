package hedgepgx

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
	"github.com/tailcut/hedge/internal/callgate"
)

var (
	// ErrClosed is the error of a call made after Close, and of a copy
	// that would have started after it.
	ErrClosed = errors.New("hedgepgx: client is closed")
	// ErrNoPrimary is the error of a write, or of PrimaryLSN, on a Client
	// made with Config.NoPrimary.
	ErrNoPrimary = errors.New("hedgepgx: no primary (Config.NoPrimary): send writes through a pool of the primary")
	// ErrNotCaughtUp is matched (errors.Is) by the error of a read, on a
	// Client without a primary, that no replica is known to serve at its
	// minimum position (WithMinLSN), and by that of a read whose copies
	// all found their servers behind it on their own connections. Retry
	// it later, once a replica has replayed that far, or read from the
	// primary.
	ErrNotCaughtUp = errors.New("hedgepgx: no replica is known to have replayed up to the read's minimum position")
)

// Client hedges reads across the pools of a PostgreSQL primary and its
// read replicas, and sends writes to the primary alone, once. It is safe
// for concurrent use. Make one with New or NewFromConfigs, and Close it.
type Client struct {
	pools   []*pgxpool.Pool
	primary int // -1 with Config.NoPrimary
	h       *hedge.Hedger
	owned   bool // Close closes the pools
	maxLag  uint64
	reps    []replica

	gate callgate.Gate // running copies and writes; closed by Close

	stopPoll context.CancelFunc
	pollWG   sync.WaitGroup
}

// replica holds one pool's counters and its last known WAL position.
type replica struct {
	adapterstats.Counters
	redirected atomic.Int64
	behind     atomic.Int64
	polls      atomic.Int64
	pollErrors atomic.Int64
	lsn        atomic.Uint64          // 0: never read
	started    atomic.Pointer[string] // pg_postmaster_start_time, as the poll last read it
	_          [24]byte
}

// New returns a Client over pools, one per server of the same data:
// pools[cfg.Primary] is the primary, the others its streaming replicas.
// The Client does not own the pools: Close stops its goroutines and waits
// for the copies it started, and leaves the pools open.
//
// Make the pools with KeepConnsOnCancel applied to their configs, or
// every lost hedge will cost a new connection (see "Cancellation" in the
// package doc); NewFromConfigs does it for you.
//
// The error, if any, lists every mistake at once and matches
// ErrInvalidConfig with errors.Is.
func New(pools []*pgxpool.Pool, cfg Config) (*Client, error) {
	pools = slices.Clone(pools)
	h, err := validate("pools", pools, cfg)
	if err != nil {
		return nil, err
	}
	return newClient(pools, cfg, h, false), nil
}

// NewFromConfigs makes one pool per config, configs[i] becoming pool i,
// after KeepConnsOnCancel on a copy of each (the caller's configs are not
// changed), and returns a Client that owns them: Close closes them. No
// connection is made before the first query, as with
// pgxpool.NewWithConfig. On error no pool is left open.
func NewFromConfigs(configs []*pgxpool.Config, cfg Config) (*Client, error) {
	pools := make([]*pgxpool.Pool, len(configs))
	var errs []error
	for i, pc := range configs {
		if pc == nil {
			continue // reported by validate
		}
		pc = pc.Copy()
		KeepConnsOnCancel(pc)
		p, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pools[i] = p
	}
	if len(errs) == 0 {
		h, err := validate("configs", pools, cfg)
		if err == nil {
			return newClient(pools, cfg, h, true), nil
		}
		errs = append(errs, err)
	}
	for _, p := range pools {
		if p != nil {
			p.Close()
		}
	}
	return nil, errors.Join(errs...)
}

func newClient(pools []*pgxpool.Pool, cfg Config, h *hedge.Hedger, owned bool) *Client {
	c := &Client{
		pools:   pools,
		primary: cfg.Primary,
		h:       h,
		owned:   owned,
		maxLag:  cfg.MaxLag,
		reps:    make([]replica, len(pools)),
	}
	if cfg.NoPrimary {
		c.primary = -1
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopPoll = cancel
	if cfg.LagInterval >= 0 {
		every := cfg.LagInterval
		if every == 0 {
			every = DefaultLagInterval
		}
		for i := range pools {
			c.pollWG.Add(1)
			go c.poll(ctx, i, every)
		}
	}
	return c
}

// Close stops new calls (they fail with ErrClosed) and the reading of WAL
// positions, waits for every copy and write the Client started, losing
// copies still being cancelled included, and then, for a Client made by
// NewFromConfigs, closes the pools. It is idempotent.
func (c *Client) Close() error {
	if !c.gate.Close() {
		return nil
	}
	c.stopPoll()
	c.pollWG.Wait()
	c.gate.Wait()
	if c.owned {
		for _, p := range c.pools {
			p.Close()
		}
	}
	return nil
}

// Hedger returns the Client's Hedger, for SetMode, SetRollout and its own
// Stats. Do not use it with other servers.
func (c *Client) Hedger() *hedge.Hedger { return c.h }

// Primary returns the primary's pool, or nil with Config.NoPrimary. Use it
// for transactions, COPY, LISTEN and anything else the Client does not
// route; nothing sent through it is hedged or counted.
func (c *Client) Primary() *pgxpool.Pool {
	if c.primary < 0 {
		return nil
	}
	return c.pools[c.primary]
}

// Pool returns pool i (0 <= i < Len()).
func (c *Client) Pool(i int) *pgxpool.Pool { return c.pools[i] }

// Len returns the number of pools, the primary's included.
func (c *Client) Len() int { return len(c.pools) }
