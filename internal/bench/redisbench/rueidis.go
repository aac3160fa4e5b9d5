package redisbench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgerueidis"
	"github.com/tailcut/hedge/internal/bench"
)

// rueidisClient is the bench.Client of ClientRueidis: GET k:N through a
// hedgerueidis.Client, one rueidis client per server.
type rueidisClient struct {
	c    *hedgerueidis.Client
	keys []string
	// dials counts the connections rueidis opened, through its
	// ClientOption.DialCtxFn.
	dials atomic.Int64
}

// newRueidis returns the client of ClientRueidis over the servers,
// hedging as cfg says. Each server has a rueidis client of its own:
//
//   - ForceSingleClient: a standalone server, not probed for a cluster;
//   - DisableCache: no client-side caching, so that every read goes to a
//     server (a cached GET would answer without one, and skip the stall);
//   - DisableRetry: rueidis retries read-only commands on network errors
//     unless told not to, and GET is read-only; with it off, every copy
//     sent is one the Hedger decided. (rueidis still sends a command again
//     when its connection was closed for having outlived
//     ClientOption.ConnLifetime before the command went out; that is left
//     unset, so it never happens.)
//   - a dial timeout of 2 s, as for go-redis, and a dialer that counts the
//     connections made.
//
// hedgerueidis itself hides each copy's deadline from rueidis, so that
// copies go through the pipeline, where cancellation works (its package
// docs say why).
//
// rueidis opens its pipelined connections to a server (2^n of them, n
// being log2(GOMAXPROCS) up to 2: two on two cores) when a command first
// lands on each, and runs the new connection's handshake (HELLO) on that
// command's goroutine, bounded by the dial timeout and deaf to
// cancellation. A copy that opens a connection to a stalled server so
// holds its read for up to 2 s, hedge or no hedge. The bench's warm-up,
// which reads before any stall, opens them all.
func (b *Backend) newRueidis(cfg hedge.Config) (*rueidisClient, error) {
	rc := &rueidisClient{keys: b.keys}
	dial := func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			rc.dials.Add(1)
		}
		return c, err
	}
	opts := make([]rueidis.ClientOption, len(b.servers))
	for i, s := range b.servers {
		opts[i] = rueidis.ClientOption{
			InitAddress:       []string{s.Addr},
			ForceSingleClient: true,
			DisableCache:      true,
			DisableRetry:      true,
			Dialer:            net.Dialer{Timeout: 2 * time.Second},
			DialCtxFn:         dial,
		}
	}
	c, err := hedgerueidis.NewFromOptions(opts, hedgerueidis.Config{Hedge: cfg})
	if err != nil {
		return nil, fmt.Errorf("redisbench: rueidis client: %w", err)
	}
	rc.c = c
	return rc, nil
}

// get reads key k:N (N is i modulo bench.Keys) and returns its value. A
// missing key is an error naming it.
func (rc *rueidisClient) get(ctx context.Context, i int) (string, error) {
	key := rc.keys[i%bench.Keys]
	v, err := rc.c.Get(ctx, key).ToString()
	if rueidis.IsRedisNil(err) {
		return "", fmt.Errorf("key %s missing", key)
	}
	return v, err
}

// Do reads key k:N (N is i modulo bench.Keys), as the go-redis client
// does: the reply is checked, not copied out.
func (rc *rueidisClient) Do(ctx context.Context, i int) error {
	key := rc.keys[i%bench.Keys]
	err := rc.c.Get(ctx, key).Error()
	if rueidis.IsRedisNil(err) {
		return fmt.Errorf("key %s missing", key)
	}
	return err
}

// Stats returns the Hedger's counters of GET and the connections dialled.
//
// The pool counters are zero, because there is no pool to wait for:
// rueidis writes every GET into the pipeline of a connection it shares
// among all callers, so a read never waits for a free connection, and
// never gives up waiting for one. What a read may wait for instead is room
// in that connection's queue of commands awaiting replies (1,024 by
// default); rueidis does not count those waits, and so they are not
// reported.
func (rc *rueidisClient) Stats() bench.ClientStats {
	s := bench.HedgerStats(rc.c.Stats().Op("GET"))
	s.PoolWaits, s.PoolWaitTime, s.PoolTimeouts = 0, 0, 0
	s.Dials = rc.dials.Load()
	return s
}

// Close closes the rueidis clients and returns once every copy has
// returned.
func (rc *rueidisClient) Close() error {
	rc.c.Close()
	return nil
}
