package hedgeredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/callgate"
	"github.com/tailcut/hedge/internal/cfgerr"
	"github.com/tailcut/hedge/internal/keyslot"
	"github.com/tailcut/hedge/internal/rediscmd"
)

// ClusterConfig configures a ClusterClient. The zero ClusterConfig hedges
// reads with the zero hedge.Config.
type ClusterConfig struct {
	// Hedge configures the Hedger. Replicas, Shards and ReplicaNames are
	// set from the cluster's layout: leave them zero. ReapInBackground is
	// always set, as for Client.
	Hedge hedge.Config
}

// ClusterClient hedges reads of a Redis Cluster within each key's slot: a
// read goes to a node that serves the key's slot, its master or one of
// its replicas, and a hedge to another node of that slot, never to a node
// of another slot. MGet splits its keys by slot and reads the slots as
// one fan-out (hedge.DoFan). Writes, and every command off the allow-list,
// go once through the go-redis ClusterClient, which routes them to the
// master and follows redirections. It is safe for concurrent use. Make
// one with NewCluster or NewClusterFromOptions, and Close it when done.
//
// The layout (which nodes serve which slots) is read when the client is
// made. A read that every node of its slot answers MOVED or ASK, after a
// resharding or a failover, is sent once through the ClusterClient, which
// follows the redirection. Make a new ClusterClient to hedge over the new
// layout.
type ClusterClient struct {
	cc     *redis.ClusterClient
	owned  bool
	nodes  []*redis.Client // by server index
	addrs  []string
	master []bool
	shards [][]int // master first
	slots  []int16 // slot: shard
	h      *hedge.Hedger
	reps   []replica
	gate   callgate.Gate

	redirects atomic.Int64 // reads sent through cc after a redirection
}

// NewCluster returns a ClusterClient over cc, whose options must have
// ReadOnly set: without it, the replicas answer reads MOVED. It reads the
// cluster's layout with CLUSTER SLOTS, and takes the node clients cc
// keeps (ForEachShard), so that reads share cc's pools. The ClusterClient
// does not own cc: Close leaves it open.
//
// The Hedger has one replica per node (hedge.Config.Replicas), one shard
// per master and its replicas (Shards) and the nodes' addresses as
// ReplicaNames. The error lists every mistake and matches
// ErrInvalidConfig.
func NewCluster(ctx context.Context, cc *redis.ClusterClient, cfg ClusterConfig) (*ClusterClient, error) {
	return newCluster(ctx, cc, cfg, false)
}

// NewClusterFromOptions makes the go-redis ClusterClient from opt, with
// ReadOnly set, and returns a ClusterClient that owns it: Close closes it.
// See NewCluster.
func NewClusterFromOptions(ctx context.Context, opt *redis.ClusterOptions, cfg ClusterConfig) (*ClusterClient, error) {
	if opt == nil {
		return nil, fmt.Errorf("%w: hedgeredis: NewClusterFromOptions(nil): give the cluster's options, such as &redis.ClusterOptions{Addrs: seeds}", ErrInvalidConfig)
	}
	o := *opt
	o.ReadOnly = true
	cc := redis.NewClusterClient(&o)
	c, err := newCluster(ctx, cc, cfg, true)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	return c, nil
}

func newCluster(ctx context.Context, cc *redis.ClusterClient, cfg ClusterConfig, owned bool) (*ClusterClient, error) {
	var errs []error
	if cc == nil {
		return nil, fmt.Errorf("%w: hedgeredis: NewCluster with a nil *redis.ClusterClient: make one with redis.NewClusterClient", ErrInvalidConfig)
	}
	if !cc.Options().ReadOnly {
		errs = append(errs, errors.New("hedgeredis: the ClusterClient's options do not set ReadOnly: set redis.ClusterOptions.ReadOnly, or replicas answer reads MOVED (NewClusterFromOptions sets it)"))
	}
	if cfg.Hedge.Replicas != 0 || cfg.Hedge.Shards != nil || cfg.Hedge.ReplicaNames != nil {
		errs = append(errs, errors.New("hedgeredis: ClusterConfig.Hedge sets Replicas, Shards or ReplicaNames: leave them zero; they are set from the cluster's layout"))
	}
	if len(errs) > 0 {
		return nil, &cfgerr.Error{Errs: errs, Sentinel: ErrInvalidConfig}
	}
	// CLUSTER SLOTS, not CLUSTER SHARDS: Redis 6 has only the former,
	// and Redis 7 still serves it.
	//lint:ignore SA1019 CLUSTER SLOTS is the form every Redis Cluster version serves.
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("hedgeredis: reading the cluster's layout (CLUSTER SLOTS): %w", err)
	}
	clients := map[string]*redis.Client{}
	var mu sync.Mutex
	err = cc.ForEachShard(ctx, func(_ context.Context, rc *redis.Client) error {
		mu.Lock()
		clients[rc.Options().Addr] = rc
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hedgeredis: reaching the cluster's nodes: %w", err)
	}
	c := &ClusterClient{cc: cc, owned: owned, slots: make([]int16, keyslot.Slots)}
	for i := range c.slots {
		c.slots[i] = -1
	}
	index := map[string]int{}    // address: server
	byMaster := map[string]int{} // master's address: shard
	// Masters in the order of their first slot, so that shard numbers
	// are stable.
	sort.Slice(slots, func(i, j int) bool { return slots[i].Start < slots[j].Start })
	for _, r := range slots {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= keyslot.Slots || r.Start > r.End {
			return nil, fmt.Errorf("hedgeredis: CLUSTER SLOTS gave the range %d-%d with %d nodes: the cluster is not ready; wait until CLUSTER INFO says cluster_state:ok", r.Start, r.End, len(r.Nodes))
		}
		s, ok := byMaster[r.Nodes[0].Addr]
		if !ok {
			s = len(c.shards)
			byMaster[r.Nodes[0].Addr] = s
			var servers []int
			for j, n := range r.Nodes {
				rc := clients[n.Addr]
				if rc == nil {
					return nil, fmt.Errorf("hedgeredis: node %s of CLUSTER SLOTS is not among the ClusterClient's nodes: the cluster's layout is changing; try again once CLUSTER INFO says cluster_state:ok", n.Addr)
				}
				k, seen := index[n.Addr]
				if !seen {
					k = len(c.nodes)
					index[n.Addr] = k
					c.nodes = append(c.nodes, rc)
					c.addrs = append(c.addrs, n.Addr)
					c.master = append(c.master, j == 0)
				}
				servers = append(servers, k)
			}
			c.shards = append(c.shards, servers)
		}
		for slot := r.Start; slot <= r.End; slot++ {
			c.slots[slot] = int16(s)
		}
	}
	if len(c.shards) == 0 {
		return nil, errors.New("hedgeredis: CLUSTER SLOTS gave no slots: the cluster is not ready; wait until CLUSTER INFO says cluster_state:ok")
	}
	hc := cfg.Hedge
	hc.Replicas, hc.Shards, hc.ReplicaNames = len(c.nodes), c.shards, slices.Clone(c.addrs)
	hc.ReapInBackground = true
	h, err := hedge.New(hc)
	if err != nil {
		return nil, &cfgerr.Error{Errs: fromHedge(err, cfg.Hedge.Delay), Sentinel: ErrInvalidConfig}
	}
	c.h = h
	c.reps = make([]replica, len(c.nodes))
	return c, nil
}

// Close stops new calls (they fail with ErrClosed), then, for a
// ClusterClient made by NewClusterFromOptions, closes the go-redis
// ClusterClient, and returns once every copy and write it started has
// returned. It is idempotent.
func (c *ClusterClient) Close() error {
	if !c.gate.Close() {
		return nil
	}
	var err error
	if c.owned {
		err = c.cc.Close()
	}
	c.gate.Wait()
	return err
}

// Hedger returns the Hedger: its Stats hold the per-command and per-shard
// counters (a shard is a master and its replicas), its ReplicaStats the
// per-node ones.
func (c *ClusterClient) Hedger() *hedge.Hedger { return c.h }

// Cluster returns the go-redis ClusterClient, for what the ClusterClient
// does not route (pipelines, transactions, pub/sub, scripts). Nothing
// sent through it is hedged or counted.
func (c *ClusterClient) Cluster() *redis.ClusterClient { return c.cc }

// Nodes returns the nodes' addresses, by server index (hedge.Attempt.
// Replica).
func (c *ClusterClient) Nodes() []string { return slices.Clone(c.addrs) }

// Shards returns each shard's servers, as indices in Nodes, its master
// first. Shard s is the s-th master in the order of its first slot.
func (c *ClusterClient) Shards() [][]int {
	out := make([][]int, len(c.shards))
	for i, s := range c.shards {
		out[i] = slices.Clone(s)
	}
	return out
}

// ShardOf returns the shard that serves key's slot, or -1 if the layout
// read had no node for it.
func (c *ClusterClient) ShardOf(key string) int { return int(c.slots[keyslot.Of(key)]) }

// Stats returns the Hedger's stats per read command, and each node's
// counters and pool.
func (c *ClusterClient) Stats() Stats {
	s := Stats{Ops: c.h.Stats(), Replicas: make([]ReplicaStats, len(c.nodes))}
	for i, rc := range c.nodes {
		s.Replicas[i] = ReplicaStats{
			Index:   i,
			Addr:    c.addrs[i],
			Primary: c.master[i],
			Counts:  c.reps[i].Load(),
			Pool:    *rc.PoolStats(),
		}
	}
	return s
}

// Get is GET key, hedged within key's slot.
func (c *ClusterClient) Get(ctx context.Context, key string) *redis.StringCmd {
	return clusterRead(ctx, c, "GET", key, redis.NewStringCmd, "get", key)
}

// HGetAll is HGETALL key, hedged within key's slot.
func (c *ClusterClient) HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd {
	return clusterRead(ctx, c, "HGETALL", key, redis.NewMapStringStringCmd, "hgetall", key)
}

// Set is SET key value, on key's master, once, through the go-redis
// ClusterClient (see Client.Set).
func (c *ClusterClient) Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd {
	if !c.gate.Enter() {
		cmd := redis.NewStatusCmd(ctx, "set", key, value)
		cmd.SetErr(ErrClosed)
		return cmd
	}
	defer c.gate.Leave()
	return c.cc.Set(ctx, key, value, expiration)
}

// Do sends a command given as go-redis args. A read on the allow-list
// (ReadCommands) whose first key is args[1] is hedged within that key's
// slot; every other command goes once through the go-redis ClusterClient.
// A read of several keys must keep them in one slot (hash tags), as Redis
// Cluster requires; use MGet for keys of any slots.
func (c *ClusterClient) Do(ctx context.Context, args ...any) *redis.Cmd {
	if op, ok := classify(args); ok && len(args) > 1 {
		if key, ok := args[1].(string); ok {
			return clusterRead(ctx, c, op, key, redis.NewCmd, args...)
		}
	}
	if len(args) == 0 {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errNoCommand)
		return cmd
	}
	if !c.gate.Enter() {
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetErr(ErrClosed)
		return cmd
	}
	defer c.gate.Leave()
	return c.cc.Do(ctx, args...)
}

// MGet is MGET of keys in any slots: the keys are grouped by slot, and
// each slot's MGET is a leaf of one fan-out (hedge.DoFan) on its shard,
// hedged within it. The values come back in keys' order; a missing key's
// is nil, as with MGET. The operation class is "MGET".
func (c *ClusterClient) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	out := redis.NewSliceCmd(ctx, keyArgs("mget", keys)...)
	if c.gate.Closed() {
		out.SetErr(ErrClosed)
		return out
	}
	order, bySlot := keyslot.Group(keys)
	for _, s := range order {
		if c.slots[s] < 0 {
			out.SetErr(fmt.Errorf("hedgeredis: MGet: no node served slot %d when the client was made: make a new ClusterClient once the cluster serves every slot", s))
			return out
		}
	}
	fo := hedge.FanOut{Shard: func(i int) int { return int(c.slots[order[i]]) }}
	res, err := hedge.DoFan(ctx, c.h, "MGET", len(order), fo, func(ctx context.Context, i int, a hedge.Attempt) (reply[*redis.SliceCmd], error) {
		pos := bySlot[order[i]]
		args := make([]any, 1+len(pos))
		args[0] = "mget"
		for j, p := range pos {
			args[1+j] = keys[p]
		}
		r, err := runClusterCopy(ctx, c, a, redis.NewSliceCmd, args)
		if err == nil && r.cmd.Err() != nil {
			// The server's answer: another node would give the same.
			err = hedge.Permanent(r.cmd.Err())
		}
		return r, err
	})
	if err != nil {
		out.SetErr(err)
		return out
	}
	vals := make([]any, len(keys))
	for i, s := range order {
		r := res.Values[i]
		c.reps[r.replica].Wins.Add(1)
		got := r.cmd.Val()
		for j, p := range bySlot[s] {
			if j < len(got) {
				vals[p] = got[j]
			}
		}
	}
	out.SetVal(vals)
	return out
}

// clusterRead runs a read of key with hedge.DoShard on the shard of key's
// slot. When every copy was redirected (MOVED, ASK), it sends the command
// once through the ClusterClient.
func clusterRead[C redis.Cmder](ctx context.Context, c *ClusterClient, op, key string, newCmd func(context.Context, ...any) C, args ...any) C {
	if c.gate.Closed() {
		cmd := newCmd(ctx, args...)
		cmd.SetErr(ErrClosed)
		return cmd
	}
	shard := int(c.slots[keyslot.Of(key)])
	if shard < 0 {
		return redirected(ctx, c, newCmd, args)
	}
	r, err := hedge.DoShard(ctx, c.h, op, shard, func(ctx context.Context, a hedge.Attempt) (reply[C], error) {
		return runClusterCopy(ctx, c, a, newCmd, args)
	})
	if err != nil {
		if isRedirect(err) {
			return redirected(ctx, c, newCmd, args)
		}
		cmd := newCmd(ctx, args...)
		cmd.SetErr(err)
		return cmd
	}
	c.reps[r.replica].Wins.Add(1)
	return r.cmd
}

// redirected sends a read once through the ClusterClient, which follows
// MOVED and ASK.
func redirected[C redis.Cmder](ctx context.Context, c *ClusterClient, newCmd func(context.Context, ...any) C, args []any) C {
	cmd := newCmd(ctx, args...)
	if !c.gate.Enter() {
		cmd.SetErr(ErrClosed)
		return cmd
	}
	defer c.gate.Leave()
	c.redirects.Add(1)
	_ = c.cc.Process(ctx, cmd)
	return cmd
}

// runClusterCopy runs one copy of a read on node a.Replica, as runCopy
// does on a replica; a redirection (MOVED, ASK) fails the copy.
func runClusterCopy[C redis.Cmder](ctx context.Context, c *ClusterClient, a hedge.Attempt, newCmd func(context.Context, ...any) C, args []any) (reply[C], error) {
	return runOn(ctx, &c.gate, c.reps, c.nodes, isClusterAnswer, a, newCmd, args)
}

// isClusterAnswer reports whether err is the server's answer on a cluster:
// an answer (isAnswer) other than a redirection.
func isClusterAnswer(err error) bool { return isAnswer(err) && !isRedirect(err) }

// isRedirect reports whether err is, or wraps only, MOVED or ASK replies.
func isRedirect(err error) bool { return rediscmd.Redirect(err, isRedirectReply) }

// isRedirectReply reports whether err is one MOVED or ASK reply.
func isRedirectReply(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}
