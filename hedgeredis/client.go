package hedgeredis

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/adapterstats"
	"github.com/tailcut/hedge/internal/callgate"
	"github.com/tailcut/hedge/internal/dialerr"
)

// ErrClosed is the error of a call made after Close, and of a hedge copy
// that would have started after it.
var ErrClosed = errors.New("hedgeredis: client is closed")

var errNoCommand = errors.New("hedgeredis: Do without arguments: give the command name first, as in Do(ctx, \"GET\", key)")

// Config configures a Client. The zero Config hedges reads with the zero
// hedge.Config (a live percentile delay per command, hedge.DefaultBudget,
// the spare-capacity and payoff rules; see hedge.Config) and writes to
// replica 0.
type Config struct {
	// Hedge configures the Client's Hedger. Replicas must be 0 or the
	// number of clients; it is set to the number of clients.
	// ReapInBackground is always set, whatever its value here: go-redis
	// does not interrupt a read when its context is cancelled, so waiting
	// for the loser would make the caller wait out the very stall the
	// hedge escaped (see the package doc, "Cancelled copies").
	Hedge hedge.Config

	// Primary is the index of the write primary among the clients: every
	// command that is not a read on the allow-list goes there, once.
	// It also serves reads, like every replica.
	Primary int
}

// Client sends reads on the allow-list (ReadCommands) to N replicas of the
// same data with hedge.Do, and every other command to the primary alone,
// never hedged. It is safe for concurrent use. Make one with New or
// NewFromOptions and Close it when done.
type Client struct {
	clients []*redis.Client
	primary int
	h       *hedge.Hedger
	owned   bool // Close closes the clients
	reps    []replica

	gate callgate.Gate // running copies and writes; closed by Close
}

// replica holds the per-replica counters, padded to 64 bytes so that
// neighbouring replicas' counters seldom share a cache line.
type replica struct {
	adapterstats.Counters
	_ [16]byte
}

// New returns a Client over clients, which must be connected to replicas
// of the same data, one client per server; clients[cfg.Primary] is the
// write primary. The Client does not own the clients: Close waits for the
// copies it started and leaves the clients open for the caller to close.
//
// The error, if any, lists every mistake at once (see "Configuration" in
// the package doc) and matches ErrInvalidConfig with errors.Is.
func New(clients []*redis.Client, cfg Config) (*Client, error) {
	clients = slices.Clone(clients)
	h, err := validate("clients", clients, cfg)
	if err != nil {
		return nil, err
	}
	return newClient(clients, cfg, h, false), nil
}

// NewFromOptions makes one *redis.Client per options value, opts[i]
// becoming replica i, and returns a Client that owns them: Close closes
// them. See the package doc ("Pool sizing") for PoolSize, ReadTimeout and
// MaxRetries. The error, like New's, lists every mistake at once; no
// client is left open then.
func NewFromOptions(opts []*redis.Options, cfg Config) (*Client, error) {
	clients := make([]*redis.Client, len(opts))
	for i, o := range opts {
		if o != nil {
			clients[i] = redis.NewClient(o)
		}
	}
	h, err := validate("opts", clients, cfg)
	if err != nil {
		closeAll(clients)
		return nil, err
	}
	return newClient(clients, cfg, h, true), nil
}

func closeAll(clients []*redis.Client) {
	for _, rc := range clients {
		if rc != nil {
			_ = rc.Close()
		}
	}
}

func newClient(clients []*redis.Client, cfg Config, h *hedge.Hedger, owned bool) *Client {
	return &Client{
		clients: clients,
		primary: cfg.Primary,
		h:       h,
		owned:   owned,
		reps:    make([]replica, len(clients)),
	}
}

// Close stops new calls (they fail with ErrClosed), then, for a Client
// made by NewFromOptions, closes its clients, which also ends the reads of
// losing copies still waiting for a stalled server (and fails calls still
// running, as redis.Client.Close does); and it returns once every copy and
// write the Client started has returned. For a Client made by New, a loser
// still blocked on a stalled server is waited for until the server answers
// or the client's ReadTimeout ends the read. Close is idempotent.
func (c *Client) Close() error {
	if !c.gate.Close() {
		return nil
	}
	var errs []error
	if c.owned {
		for _, rc := range c.clients {
			errs = append(errs, rc.Close())
		}
	}
	c.gate.Wait()
	return errors.Join(errs...)
}

// Hedger returns the Client's Hedger, for SetMode, SetRollout and its own
// Stats. Do not use it with other replicas.
func (c *Client) Hedger() *hedge.Hedger { return c.h }

// Primary returns the write primary's client. Use it for what the Client
// does not route (pipelines, transactions, pub/sub, scripts, blocking
// commands); nothing sent through it is hedged or counted.
func (c *Client) Primary() *redis.Client { return c.clients[c.primary] }

// Replica returns replica i's client (0 <= i < Len()).
func (c *Client) Replica(i int) *redis.Client { return c.clients[i] }

// Len returns the number of replicas, the primary included.
func (c *Client) Len() int { return len(c.clients) }

// Do sends a command given as go-redis args, like redis.Client.Do. If the
// command name (args[0], a string or []byte, any case) is on the allow-list
// (ReadCommands), it is hedged across the replicas, its operation class in
// the Hedger's stats being the upper-case name. Any other command goes to
// the primary, once, never hedged, as with the typed writes (Set, SetNX,
// Del). Do is for single commands: MULTI, WATCH
// or SELECT sent this way would each land on some pooled connection, as
// with redis.Client.Do; use Primary for those.
func (c *Client) Do(ctx context.Context, args ...any) *redis.Cmd {
	if op, ok := classify(args); ok {
		return read(ctx, c, op, redis.NewCmd, args...)
	}
	cmd := redis.NewCmd(ctx, args...)
	if len(args) == 0 {
		cmd.SetErr(errNoCommand)
		return cmd
	}
	return write(c,
		func(rc *redis.Client) *redis.Cmd {
			_ = rc.Process(ctx, cmd)
			return cmd
		},
		func() *redis.Cmd { return cmd })
}

// reply is what one copy returns: its command and where it ran.
type reply[C redis.Cmder] struct {
	cmd     C
	replica int
}

// read runs the read command built by newCmd(ctx, args...) with hedge.Do:
// each copy builds its own command and runs it on the replica the Hedger
// picked. The result is the winning copy's command; when every copy
// failed, a command carrying Do's error.
func read[C redis.Cmder](ctx context.Context, c *Client, op string, newCmd func(context.Context, ...any) C, args ...any) C {
	if c.gate.Closed() {
		cmd := newCmd(ctx, args...)
		cmd.SetErr(ErrClosed)
		return cmd
	}
	r, err := hedge.Do(ctx, c.h, op, func(ctx context.Context, a hedge.Attempt) (reply[C], error) {
		return runCopy(ctx, c, a, newCmd, args)
	})
	if err != nil {
		cmd := newCmd(ctx, args...)
		cmd.SetErr(err)
		return cmd
	}
	c.reps[r.replica].Wins.Add(1)
	return r.cmd
}

// runCopy runs one copy of a read on replica a.Replica. A reply from the
// server is the answer, even an error reply (WRONGTYPE would be the same
// on every replica), unless the error says that this replica cannot serve
// now (isReplicaStateError). Transport errors (a timeout, a closed or
// exhausted pool) are returned to hedge.Do, which then sends the next copy
// at once.
func runCopy[C redis.Cmder](ctx context.Context, c *Client, a hedge.Attempt, newCmd func(context.Context, ...any) C, args []any) (reply[C], error) {
	return runOn(ctx, &c.gate, c.reps, c.clients, isAnswer, a, newCmd, args)
}

// runOn runs one copy of a read on nodes[a.Replica], counted in
// reps[a.Replica], while gate is open. An error for which answer is true
// is the server's answer; any other fails the copy.
func runOn[C redis.Cmder](ctx context.Context, gate *callgate.Gate, reps []replica, nodes []*redis.Client, answer func(error) bool, a hedge.Attempt, newCmd func(context.Context, ...any) C, args []any) (reply[C], error) {
	if !gate.Enter() {
		return reply[C]{}, hedge.Permanent(ErrClosed)
	}
	rs := &reps[a.Replica]
	rs.Copies.Add(1)
	rs.InFlight.Add(1)
	defer func() {
		rs.InFlight.Add(-1)
		gate.Leave()
	}()
	if a.Hedge {
		// Copies run at the same time; none shares the caller's slice.
		args = slices.Clone(args)
	}
	cmd := newCmd(ctx, args...)
	_ = nodes[a.Replica].Process(ctx, cmd)
	err := cmd.Err()
	if err == nil || answer(err) {
		return reply[C]{cmd: cmd, replica: a.Replica}, nil
	}
	if ctx.Err() != nil {
		// A loser, or the caller gave up: go-redis returns early only
		// while waiting for a connection (see the package doc).
		rs.Cancelled.Add(1)
	} else {
		rs.Failed.Add(1)
	}
	// A connection that could not be made sent nothing: the Hedger sends
	// the read to another replica at once.
	return reply[C]{cmd: cmd, replica: a.Replica}, dialerr.Mark(err)
}

// replicaStatePrefixes are error replies that say "not this replica, not
// now": another replica may well answer.
var replicaStatePrefixes = []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}

// isAnswer reports whether err is a reply from the server that any replica
// would give (redis.Nil, WRONGTYPE, a syntax error), as opposed to a
// transport error or a replica-state error.
func isAnswer(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range replicaStatePrefixes {
		if redis.HasErrorPrefix(err, p) {
			return false
		}
	}
	return !strings.Contains(re.Error(), "max number of clients reached")
}
