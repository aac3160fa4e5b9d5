package hedgerueidis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/keyslot"
)

// ClusterConfig configures a ClusterClient. The zero ClusterConfig hedges
// reads with the zero hedge.Config.
type ClusterConfig struct {
	// Hedge configures the Hedger. Replicas, Shards and ReplicaNames are
	// set from the cluster's layout: leave them zero.
	Hedge hedge.Config
}

// ClusterClient hedges reads of a Redis Cluster within each key's slot,
// over a rueidis cluster client: a read goes to a node that serves the
// key's slot, its master or one of its replicas, and a hedge to another
// node of that slot, never to a node of another slot. MGet splits its
// keys by slot and reads the slots as one fan-out (hedge.DoFan). Writes,
// and every command off the allow-list, go once through the rueidis
// cluster client, which routes them to the master and follows
// redirections. It is safe for concurrent use. Make one with NewCluster or
// NewClusterFromOptions, and Close it when done.
//
// The layout is read when the client is made. A read that every node of
// its slot answers MOVED or ASK goes once through the rueidis cluster
// client. Make a new ClusterClient to hedge over a new layout.
type ClusterClient struct {
	c      *Client
	shards [][]int // master first
}

// NewCluster returns a ClusterClient over rc, a rueidis client in cluster
// mode whose option sets SendToReplicas, so that rueidis connects to the
// replicas and sends them READONLY (NewClusterFromOptions sets one that
// sends rueidis's own commands to the masters). It reads the layout with
// CLUSTER SLOTS and takes the node clients rc keeps (rc.Nodes). The
// ClusterClient does not own rc: Close leaves it open.
//
// The Hedger has one replica per node (hedge.Config.Replicas), one shard
// per master and its replicas (Shards) and the nodes' addresses as
// ReplicaNames. The error matches ErrInvalidConfig for a mistake of
// configuration.
func NewCluster(ctx context.Context, rc rueidis.Client, cfg ClusterConfig) (*ClusterClient, error) {
	return newCluster(ctx, rc, cfg, false)
}

// NewClusterFromOptions makes the rueidis client from opt, with
// SendToReplicas set to send none of rueidis's own commands to a replica
// unless opt sets it, and returns a ClusterClient that owns it: Close
// closes it. See NewCluster.
func NewClusterFromOptions(ctx context.Context, opt rueidis.ClientOption, cfg ClusterConfig) (*ClusterClient, error) {
	if opt.SendToReplicas == nil {
		opt.SendToReplicas = func(rueidis.Completed) bool { return false }
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("hedgerueidis: connecting to the cluster: %w", err)
	}
	c, err := newCluster(ctx, rc, cfg, true)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return c, nil
}

func newCluster(ctx context.Context, rc rueidis.Client, cfg ClusterConfig, owned bool) (*ClusterClient, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: hedgerueidis: NewCluster with a nil client: make one with rueidis.NewClient", ErrInvalidConfig)
	}
	var errs []error
	if rc.Mode() != rueidis.ClientModeCluster {
		errs = append(errs, errors.New("hedgerueidis: NewCluster: the client is not in cluster mode: give the cluster's nodes as InitAddress, or use New for a primary and its replicas"))
	}
	if cfg.Hedge.Replicas != 0 || cfg.Hedge.Shards != nil || cfg.Hedge.ReplicaNames != nil {
		errs = append(errs, errors.New("hedgerueidis: ClusterConfig.Hedge sets Replicas, Shards or ReplicaNames: leave them zero; they are set from the cluster's layout"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	ranges, err := clusterSlots(ctx, rc)
	if err != nil {
		return nil, err
	}
	nodes := rc.Nodes()
	c := &Client{
		primary: 0,
		owned:   owned,
		reuse:   !cfg.Hedge.ReapInBackground,
		idle:    make(chan struct{}, 1),
		slots:   make([]int16, keyslot.Slots),
		cluster: rc,
	}
	for i := range c.slots {
		c.slots[i] = -1
	}
	cc := &ClusterClient{c: c}
	index := map[string]int{}
	byMaster := map[string]int{}
	for _, r := range ranges {
		s, ok := byMaster[r.nodes[0]]
		if !ok {
			s = len(cc.shards)
			byMaster[r.nodes[0]] = s
			var servers []int
			for _, addr := range r.nodes {
				k, seen := index[addr]
				if !seen {
					n := nodes[addr]
					if n == nil {
						return nil, fmt.Errorf("hedgerueidis: node %s of CLUSTER SLOTS has no client: set SendToReplicas on the client's option, so that rueidis connects to the replicas (NewClusterFromOptions does)", addr)
					}
					k = len(c.clients)
					index[addr] = k
					c.clients = append(c.clients, n)
					c.addrs = append(c.addrs, addr)
				}
				servers = append(servers, k)
			}
			cc.shards = append(cc.shards, servers)
		}
		for slot := r.first; slot <= r.last; slot++ {
			c.slots[slot] = int16(s)
		}
	}
	hc := cfg.Hedge
	hc.Replicas, hc.Shards, hc.ReplicaNames = len(c.clients), cc.shards, slices.Clone(c.addrs)
	h, err := hedge.New(hc)
	if err != nil {
		return nil, fmt.Errorf("%w: hedgerueidis: ClusterConfig.Hedge: %w", ErrInvalidConfig, err)
	}
	c.h = h
	c.reps = make([]replica, len(c.clients))
	return cc, nil
}

// slotRange is one range of CLUSTER SLOTS: its slots and its nodes'
// addresses, master first.
type slotRange struct {
	first, last int
	nodes       []string
}

// clusterSlots reads CLUSTER SLOTS, ranges sorted by their first slot.
func clusterSlots(ctx context.Context, rc rueidis.Client) ([]slotRange, error) {
	msgs, err := rc.Do(ctx, rc.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("hedgerueidis: reading the cluster's layout (CLUSTER SLOTS): %w", err)
	}
	var out []slotRange
	for _, m := range msgs {
		parts, err := m.ToArray()
		if err != nil || len(parts) < 3 {
			return nil, fmt.Errorf("hedgerueidis: CLUSTER SLOTS gave a range that is not [first, last, master, ...]: %v", err)
		}
		first, err1 := parts[0].AsInt64()
		last, err2 := parts[1].AsInt64()
		if err1 != nil || err2 != nil || first < 0 || last >= keyslot.Slots || first > last {
			return nil, errors.New("hedgerueidis: CLUSTER SLOTS gave a range without valid slots: the cluster is not ready; wait until CLUSTER INFO says cluster_state:ok")
		}
		r := slotRange{first: int(first), last: int(last)}
		for _, n := range parts[2:] {
			info, err := n.ToArray()
			if err != nil || len(info) < 2 {
				return nil, errors.New("hedgerueidis: CLUSTER SLOTS gave a node that is not [host, port, ...]")
			}
			host, err1 := info[0].ToString()
			port, err2 := info[1].AsInt64()
			if err1 != nil || err2 != nil {
				return nil, errors.New("hedgerueidis: CLUSTER SLOTS gave a node without host and port")
			}
			r.nodes = append(r.nodes, net.JoinHostPort(host, strconv.FormatInt(port, 10)))
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("hedgerueidis: CLUSTER SLOTS gave no slots: the cluster is not ready; wait until CLUSTER INFO says cluster_state:ok")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
	return out, nil
}

// Close stops new calls (their results carry ErrClosed), closes the
// rueidis client if the ClusterClient owns it, and returns once every copy
// and write it started has returned. It is idempotent.
func (cc *ClusterClient) Close() {
	c := cc.c
	if c.closed.Swap(true) {
		return
	}
	if c.owned {
		c.cluster.Close()
	}
	for !c.quiet() {
		<-c.idle
	}
}

// Hedger returns the Hedger: its Stats hold the per-command and per-shard
// counters (a shard is a master and its replicas), its ReplicaStats the
// per-node ones.
func (cc *ClusterClient) Hedger() *hedge.Hedger { return cc.c.h }

// Cluster returns the rueidis cluster client, for what the ClusterClient
// does not route. Nothing sent through it is hedged or counted.
func (cc *ClusterClient) Cluster() rueidis.Client { return cc.c.cluster }

// B returns a command builder, for Do.
func (cc *ClusterClient) B() rueidis.Builder { return cc.c.cluster.B() }

// Nodes returns the nodes' addresses, by server index (hedge.Attempt.
// Replica).
func (cc *ClusterClient) Nodes() []string { return slices.Clone(cc.c.addrs) }

// Shards returns each shard's servers, as indices in Nodes, its master
// first. Shard s is the s-th master in the order of its first slot.
func (cc *ClusterClient) Shards() [][]int {
	out := make([][]int, len(cc.shards))
	for i, s := range cc.shards {
		out[i] = slices.Clone(s)
	}
	return out
}

// ShardOf returns the shard that serves key's slot, or -1 if the layout
// read had no node for it.
func (cc *ClusterClient) ShardOf(key string) int { return int(cc.c.slots[keyslot.Of(key)]) }

// Stats returns the Hedger's stats per read command and each node's
// counters; ReplicaStats.Primary marks the masters. Writes are not counted
// per node: the rueidis cluster client routes them.
func (cc *ClusterClient) Stats() Stats {
	s := cc.c.Stats()
	for i := range s.Replicas {
		// Writes go through the cluster client, to no node of ours.
		s.Replicas[i].Primary, s.Replicas[i].Writes = false, 0
	}
	for _, sh := range cc.shards {
		s.Replicas[sh[0]].Primary = true
	}
	return s
}

// Get is GET key, hedged within key's slot.
func (cc *ClusterClient) Get(ctx context.Context, key string) rueidis.RedisResult {
	return cc.c.Get(ctx, key)
}

// HGetAll is HGETALL key, hedged within key's slot.
func (cc *ClusterClient) HGetAll(ctx context.Context, key string) rueidis.RedisResult {
	return cc.c.HGetAll(ctx, key)
}

// Do sends cmd, built with B. A command on the allow-list (ReadCommands)
// is hedged within the slot of its first key (rueidis refuses to build a
// command whose keys span slots); any other goes once through the rueidis
// cluster client.
func (cc *ClusterClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return cc.c.Do(ctx, cmd)
}

// Set is SET key value, with PX when expiration is positive: on key's
// master, once, through the rueidis cluster client.
func (cc *ClusterClient) Set(ctx context.Context, key, value string, expiration time.Duration) rueidis.RedisResult {
	return cc.c.Set(ctx, key, value, expiration)
}

// MGet is MGET of keys in any slots: the keys are grouped by slot, and
// each slot's MGET is a leaf of one fan-out (hedge.DoFan) on its shard,
// hedged within it. It returns one message per key, in keys' order (a
// missing key's is a nil message: IsNil), or the fan-out's error. The
// operation class is "MGET".
func (cc *ClusterClient) MGet(ctx context.Context, keys ...string) ([]rueidis.RedisMessage, error) {
	c := cc.c
	if c.closed.Load() {
		return nil, ErrClosed
	}
	order, bySlot := keyslot.Group(keys)
	for _, s := range order {
		if c.slots[s] < 0 {
			return nil, fmt.Errorf("hedgerueidis: MGet: no node served slot %d when the client was made: make a new ClusterClient once the cluster serves every slot", s)
		}
	}
	fo := hedge.FanOut{Shard: func(i int) int { return int(c.slots[order[i]]) }}
	res, err := hedge.DoFan(ctx, c.h, "MGET", len(order), fo, func(ctx context.Context, i int, a hedge.Attempt) (reply, error) {
		pos := bySlot[order[i]]
		r := &readOp{c: c, kind: argsRead, name: "MGET", keys: make([]string, len(pos))}
		for j, p := range pos {
			r.keys[j] = keys[p]
		}
		rp, err := c.runCopy(ctx, a, r)
		if err == nil && rp.res.Error() != nil {
			// The server's answer: another node would give the same.
			err = hedge.Permanent(rp.res.Error())
		}
		return rp, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]rueidis.RedisMessage, len(keys))
	for i, s := range order {
		rp := res.Values[i]
		c.reps[rp.replica].Wins.Add(1)
		vals, err := rp.res.ToArray()
		if err != nil {
			return nil, fmt.Errorf("hedgerueidis: MGet: the reply for slot %d: %w", s, err)
		}
		for j, p := range bySlot[s] {
			if j < len(vals) {
				out[p] = vals[j]
			}
		}
	}
	return out, nil
}
