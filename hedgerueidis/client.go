package hedgerueidis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
	"github.com/tailcut/hedge/internal/dialerr"
	"github.com/tailcut/hedge/internal/keyslot"
	"github.com/tailcut/hedge/internal/rediscmd"
)

// Config configures a Client. The zero Config hedges with hedge.Config's
// defaults, replica 0 being the primary.
type Config struct {
	// Primary is the index of the client that takes writes. Zero means
	// the first.
	Primary int
	// Hedge configures the Client's Hedger. Replicas is set to the number
	// of clients (leave it 0, or give that number). ReapInBackground is
	// left as given, but there is no need for it: rueidis returns when a
	// copy's context ends, so losers do not hold the caller either way,
	// and with it each read allocates its state afresh, since its copies
	// may outlive hedge.Do.
	Hedge hedge.Config
}

// ErrClosed is returned, in the result, by every call made after Close.
var ErrClosed = errors.New("hedgerueidis: client is closed")

// Client hedges reads across a primary and its replicas, each a
// rueidis.Client over one standalone server, and sends writes to the
// primary once. It is safe for concurrent use. Make one with New or
// NewFromOptions; Close it when done.
type Client struct {
	clients []rueidis.Client
	addrs   []string
	primary int
	h       *hedge.Hedger
	owned   bool
	// reuse is true when hedge.Do returns only after every copy has
	// (not ReapInBackground): a read's state is then free once Do
	// returns, and is used again (reads).
	reuse bool
	reads sync.Pool // of *readOp
	reps  []replica

	// closed is set by Close. A copy or a write counts itself in flight
	// before it looks at closed, and Close sets closed before it looks at
	// the counts (sequentially consistent atomics), so either the call
	// sees closed and stays away, or Close sees it and waits for it; and
	// no call writes to memory that every call shares.
	closed atomic.Bool
	// idle receives a token when a call leaves after Close began.
	idle chan struct{}

	// slots maps a Redis Cluster's slots to their shards (ClusterClient);
	// nil for a Client over a primary and its replicas.
	slots []int16
	// cluster takes the writes of a ClusterClient; nil for a Client.
	cluster rueidis.Client
	// redirects counts reads sent through cluster after every copy was
	// redirected (MOVED, ASK).
	redirects atomic.Int64
}

// replica holds one replica's counters, on cache lines of their own: the
// calls sent to one replica do not slow down those sent to another.
type replica struct {
	adapterstats.Counters              // InFlight: read copies running
	writing               atomic.Int64 // writes running
	_                     [128 - 7*8]byte
}

// New returns a Client over clients (replica i is clients[i]; at least
// two, each connected to a different standalone server). The Client does
// not own them: Close leaves them open for the caller to close. The error
// lists every mistake at once and matches ErrInvalidConfig.
func New(clients []rueidis.Client, cfg Config) (*Client, error) {
	clients = append([]rueidis.Client(nil), clients...)
	h, addrs, err := validate("clients", clients, cfg)
	if err != nil {
		return nil, err
	}
	return newClient(clients, addrs, cfg, h, false), nil
}

// NewFromOptions makes one rueidis.Client per options value (opts[i]
// becoming replica i, its InitAddress naming one standalone server) and
// returns a Client that owns them: Close closes them. rueidis connects as
// it makes a client; a failure to connect is returned wrapped (errors.Is
// reaches rueidis's error), and no client is left open then. Mistakes in
// the configuration are reported as by New.
func NewFromOptions(opts []rueidis.ClientOption, cfg Config) (*Client, error) {
	clients := make([]rueidis.Client, len(opts))
	var errs []error
	for i, o := range opts {
		rc, err := rueidis.NewClient(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("hedgerueidis: opts[%d] (%s): %w", i, strings.Join(o.InitAddress, ","), err))
			continue
		}
		clients[i] = rc
	}
	if len(errs) > 0 {
		closeAll(clients)
		return nil, errors.Join(errs...)
	}
	h, addrs, err := validate("opts", clients, cfg)
	if err != nil {
		closeAll(clients)
		return nil, err
	}
	return newClient(clients, addrs, cfg, h, true), nil
}

func closeAll(clients []rueidis.Client) {
	for _, rc := range clients {
		if rc != nil {
			rc.Close()
		}
	}
}

func newClient(clients []rueidis.Client, addrs []string, cfg Config, h *hedge.Hedger, owned bool) *Client {
	return &Client{
		clients: clients,
		addrs:   addrs,
		primary: cfg.Primary,
		h:       h,
		owned:   owned,
		reuse:   !cfg.Hedge.ReapInBackground,
		reps:    make([]replica, len(clients)),
		idle:    make(chan struct{}, 1),
	}
}

// enter counts a call in flight on *n, or reports false after Close. A
// call that comes after Close returned is not counted even for a moment.
func (c *Client) enter(n *atomic.Int64) bool {
	if c.closed.Load() {
		return false
	}
	n.Add(1)
	if c.closed.Load() {
		c.leave(n)
		return false
	}
	return true
}

// leave ends a call counted by enter, and tells Close if it waits.
func (c *Client) leave(n *atomic.Int64) {
	n.Add(-1)
	if c.closed.Load() {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// quiet reports whether no copy or write is in flight.
func (c *Client) quiet() bool {
	for i := range c.reps {
		if c.reps[i].InFlight.Load() != 0 || c.reps[i].writing.Load() != 0 {
			return false
		}
	}
	return true
}

// Close stops new calls (their results carry ErrClosed), closes the
// clients if the Client owns them (NewFromOptions), which fails the calls
// still waiting for a server, and returns once every copy and write the
// Client started has returned. Close is idempotent.
func (c *Client) Close() {
	if c.closed.Swap(true) {
		return
	}
	if c.owned {
		closeAll(c.clients)
	}
	for !c.quiet() {
		<-c.idle
	}
}

// Hedger returns the Client's Hedger, for SetMode, SetRollout and its own
// Stats. Do not use it with other replicas.
func (c *Client) Hedger() *hedge.Hedger { return c.h }

// Primary returns the write primary's client, for what the Client does not
// route (pipelines, transactions, pub/sub, blocking commands, DoCache);
// nothing sent through it is hedged or counted.
func (c *Client) Primary() rueidis.Client { return c.clients[c.primary] }

// Replica returns replica i's client (0 <= i < Len()).
func (c *Client) Replica(i int) rueidis.Client { return c.clients[i] }

// Len returns the number of replicas, the primary included.
func (c *Client) Len() int { return len(c.clients) }

// B returns a command builder, for Do.
func (c *Client) B() rueidis.Builder { return c.clients[c.primary].B() }

// Do sends cmd, built with B. A command on the allow-list (ReadCommands)
// is hedged across the replicas, its operation class being the upper-case
// name; it is pinned first (copies share it), so rueidis does not recycle
// it. Any other command goes to the primary, once, never hedged. Do is for
// single commands: use Primary for MULTI, WATCH and the like.
func (c *Client) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	if len(args) > 0 {
		if op, ok := rediscmd.ReadOp(args[0]); ok {
			r := c.newRead()
			r.kind, r.cmd = pinnedRead, cmd.Pin()
			return c.read(ctx, op, r)
		}
	}
	return c.write(ctx, cmd)
}

// readKind says how a readOp builds its command.
type readKind uint8

const (
	getRead    readKind = iota // GET key
	argsRead                   // name keys... args..., read-only
	pinnedRead                 // cmd, the same pinned command on every copy
)

// readOp is one hedged read: what each copy sends, and the attempt
// function given to hedge.Do, bound to the readOp once, when it is made,
// so that a read whose readOp is used again allocates no closure.
type readOp struct {
	c       *Client
	attempt func(context.Context, hedge.Attempt) (reply, error)

	kind       readKind
	cmd        rueidis.Completed // pinnedRead
	name       string            // argsRead
	key        string            // getRead
	keys, args []string          // argsRead
}

// newRead returns a readOp to fill in, used again if one is free.
func (c *Client) newRead() *readOp {
	if c.reuse {
		if r, ok := c.reads.Get().(*readOp); ok {
			return r
		}
	}
	r := &readOp{c: c}
	r.attempt = r.run
	return r
}

// build returns the command of one copy, for the client it goes to.
func (r *readOp) build(rc rueidis.Client) rueidis.Completed {
	switch r.kind {
	case getRead:
		return rc.B().Get().Key(r.key).Build()
	case argsRead:
		return rc.B().Arbitrary(r.name).Keys(r.keys...).Args(r.args...).ReadOnly()
	}
	return r.cmd
}

// firstKey returns the read's first key, or "" if it has none.
func (r *readOp) firstKey() string {
	switch r.kind {
	case getRead:
		return r.key
	case argsRead:
		if len(r.keys) > 0 {
			return r.keys[0]
		}
	case pinnedRead:
		if args := r.cmd.Commands(); len(args) > 1 {
			return args[1]
		}
	}
	return ""
}

// run is the attempt function: one copy of the read.
func (r *readOp) run(ctx context.Context, a hedge.Attempt) (reply, error) {
	return r.c.runCopy(ctx, a, r)
}

// reply is what one copy returns: the server's reply and where it ran.
type reply struct {
	res     rueidis.RedisResult
	replica int
}

// read runs a read with hedge.Do: each copy builds its command with r and
// sends it to the replica the Hedger picked. The result is the winning
// copy's; when every copy failed, a result carrying Do's error. r is
// used again once Do has returned, unless copies may outlive Do
// (ReapInBackground).
func (c *Client) read(ctx context.Context, op string, r *readOp) rueidis.RedisResult {
	var rp reply
	var err error
	if c.slots != nil {
		rp, err = hedge.DoShard(ctx, c.h, op, int(c.slots[keyslot.Of(r.firstKey())]), r.attempt)
	} else {
		rp, err = hedge.Do(ctx, c.h, op, r.attempt)
	}
	if c.reuse {
		*r = readOp{c: c, attempt: r.attempt}
		c.reads.Put(r)
	}
	if err != nil {
		if c.cluster != nil && isRedirect(err) {
			// The layout changed since the ClusterClient was made: the
			// rueidis cluster client follows the redirection.
			c.redirects.Add(1)
			return c.cluster.Do(ctx, r.build(c.cluster))
		}
		return rueidis.NewErrorResult(err)
	}
	c.reps[rp.replica].Wins.Add(1)
	return rp.res
}

// runCopy sends one copy of a read to replica a.Replica.
func (c *Client) runCopy(ctx context.Context, a hedge.Attempt, r *readOp) (reply, error) {
	rs := &c.reps[a.Replica]
	if !c.enter(&rs.InFlight) {
		return reply{}, hedge.Permanent(ErrClosed)
	}
	defer c.leave(&rs.InFlight)
	rs.Copies.Add(1)
	rc := c.clients[a.Replica]
	res := rc.Do(pipelined(ctx), r.build(rc))
	err := res.Error()
	if err == nil || (isAnswer(err) && (c.slots == nil || !isRedirect(err))) {
		return reply{res: res, replica: a.Replica}, nil
	}
	if ctx.Err() != nil {
		rs.Cancelled.Add(1)
	} else {
		rs.Failed.Add(1)
	}
	// A connection that could not be made sent nothing: the Hedger sends
	// the read to another replica at once.
	return reply{res: res, replica: a.Replica}, dialerr.Mark(fmt.Errorf("hedgerueidis: replica %d (%s): %w", a.Replica, c.addrs[a.Replica], err))
}

// noDeadline is a context without its deadline: Done still closes when
// the deadline passes, but rueidis, seeing no deadline, sends the command
// through its pipeline, where cancellation ends the wait, rather than
// reading the reply synchronously until the deadline (see the package
// doc).
type noDeadline struct{ context.Context }

// Deadline reports no deadline.
func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

func pipelined(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); ok {
		return noDeadline{ctx}
	}
	return ctx
}

// write sends cmd to the primary, once, on the caller's goroutine, and
// counts it in the primary's ReplicaStats.Writes.
func (c *Client) write(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	rs := &c.reps[c.primary]
	if !c.enter(&rs.writing) {
		return rueidis.NewErrorResult(ErrClosed)
	}
	defer c.leave(&rs.writing)
	rs.Writes.Add(1)
	if c.cluster != nil {
		return c.cluster.Do(ctx, cmd)
	}
	return c.clients[c.primary].Do(ctx, cmd)
}

// replicaStatePrefixes are error replies that say "not this replica, not
// now": another replica may well answer.
var replicaStatePrefixes = []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}

// isAnswer reports whether err is a reply from the server that any replica
// would give (a nil reply, WRONGTYPE, a syntax error), as opposed to a
// transport error or a replica-state error.
func isAnswer(err error) bool {
	if rueidis.IsRedisNil(err) {
		return true
	}
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := re.Error()
	for _, p := range replicaStatePrefixes {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return !strings.Contains(msg, "max number of clients reached")
}

// isRedirect reports whether err is, or wraps only, MOVED or ASK replies:
// the node no longer serves the key's slot.
func isRedirect(err error) bool { return rediscmd.Redirect(err, isRedirectReply) }

// isRedirectReply reports whether err is one MOVED or ASK reply.
func isRedirectReply(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		var rerr *rueidis.RedisError
		if !errors.As(err, &rerr) {
			return false
		}
		re = rerr
	}
	return rediscmd.IsRedirectMessage(re.Error())
}
