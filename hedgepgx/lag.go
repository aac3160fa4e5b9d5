package hedgepgx

import (
	"context"
	"time"
)

// positionSQL reads a server's WAL position: how far a standby has
// replayed, or how far the primary has inserted (which covers every
// commit made before, flushed or not: with synchronous_commit off, a
// commit record may still be unwritten at pg_current_wal_lsn).
const positionSQL = `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text`

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
	var s *string
	err := c.pools[i].QueryRow(ctx, positionSQL).Scan(&s)
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
	r.observe(l)
}

// observe records that the server was at l or past it. A known position
// only grows: a read that returns an older one (a standby rebuilt from an
// older backup) is ignored, so a rebuilt standby must get a new pool and
// Client.
func (r *replica) observe(l LSN) {
	for {
		old := r.lsn.Load()
		if uint64(l) <= old || r.lsn.CompareAndSwap(old, uint64(l)) {
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
