package hedgepgx

import (
	"context"
	"time"
)

// pollSQL reads a server's WAL position (how far a standby has replayed,
// or how far the primary has inserted, which covers every commit made
// before, flushed or not: with synchronous_commit off, a commit record
// may still be unwritten at pg_current_wal_lsn) and when its postmaster
// started: a new start time says that the server restarted, and its
// position may have gone back (a standby replays again from its last
// restartpoint).
const pollSQL = `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text, pg_postmaster_start_time()::text`

// checkSQL is the check a copy with a minimum position runs on its own
// connection, ahead of its query: the server's position, and the
// isolation level, which says whether the query that follows in the same
// implicit transaction takes a snapshot of its own (see runChecked).
const checkSQL = `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text, current_setting('transaction_isolation')`

// poll reads pool i's position every interval until ctx ends. Each read
// is bounded by the larger of five intervals and a second, so that a
// stalled server holds one connection at most that long.
func (c *Client) poll(ctx context.Context, i int, every time.Duration) {
	defer c.pollWG.Done()
	timeout := max(5*every, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c.readPosition(ctx, i, timeout)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Client) readPosition(ctx context.Context, i int, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var s, started *string
	err := c.pools[i].QueryRow(ctx, pollSQL).Scan(&s, &started)
	r := &c.reps[i]
	r.polls.Add(1)
	if err != nil || s == nil {
		r.pollErrors.Add(1)
		return
	}
	l, err := ParseLSN(*s)
	if err != nil {
		r.pollErrors.Add(1)
		return
	}
	if started != nil {
		if old := r.started.Swap(started); old != nil && *old != *started {
			// The server restarted: what it had replayed before
			// counts no more.
			r.lsn.Store(uint64(l))
		}
	}
	r.observe(l)
}

// observe records that the server was at l or past it. A known position
// only grows while the server runs: a lower one is ignored, unless the
// poll saw the server restart (readPosition) or a copy found it behind
// on its own connection (lower).
func (r *replica) observe(l LSN) {
	for {
		old := r.lsn.Load()
		if uint64(l) <= old || r.lsn.CompareAndSwap(old, uint64(l)) {
			return
		}
	}
}

// lower records that the server was found at l, below its known
// position: it restarted, or was rebuilt, since that was read. Reads
// that need more go elsewhere until it catches up.
func (r *replica) lower(l LSN) {
	for {
		old := r.lsn.Load()
		if uint64(l) >= old || r.lsn.CompareAndSwap(old, uint64(l)) {
			return
		}
	}
}

// eligible returns the set (bit i for pool i) of servers a read at least
// at position min may go to: the primary, and each replica known to have
// replayed to min (any, when min is 0) and, with MaxLag, known to be
// within MaxLag of the most advanced server. See Config.MaxLag for what
// happens when that leaves no replica.
func (c *Client) eligible(min LSN) (uint64, error) {
	var caughtUp uint64
	var head uint64
	for i := range c.reps {
		pos := c.reps[i].lsn.Load()
		head = max(head, pos)
		if i == c.primary || min == 0 || pos >= uint64(min) {
			caughtUp |= 1 << i
		}
	}
	if c.primary >= 0 {
		head = max(head, c.reps[c.primary].lsn.Load())
	}
	set := caughtUp
	if c.maxLag > 0 {
		var fresh uint64
		for i := range c.reps {
			pos := c.reps[i].lsn.Load()
			if caughtUp&(1<<i) != 0 && (i == c.primary || pos > 0 && head-pos <= c.maxLag) {
				fresh |= 1 << i
			}
		}
		if fresh != 0 {
			set = fresh
		}
	}
	if set == 0 {
		return 0, ErrNotCaughtUp
	}
	return set, nil
}
