package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tailcut/hedge"
)

// ErrNoShard is the error, wrapped, of a unary call on ShardConns whose
// context names no shard (WithShard). Nothing is sent. It matches
// hedge.ErrInvalidConfig too.
var ErrNoShard = errors.New("hedgegrpc: the call names no shard")

// ShardConns is the ClientConns that DialShards made over a sharded
// service: one per distinct server, each with the Interceptor installed.
// A unary call made with WithShard(ctx, s) on any of them is hedged among
// shard s's servers, and only there. Fan runs a fan-out of one call per
// leaf. Close closes every conn.
type ShardConns struct {
	Conns
	servers []string
	shards  [][]int
}

type shardKey struct{}

// WithShard returns ctx naming shard as the shard that serves the unary
// calls made with it on ShardConns: every copy goes to one of its
// servers. Calls on ShardConns without it fail with an error matching
// ErrNoShard.
func WithShard(ctx context.Context, shard int) context.Context {
	return context.WithValue(ctx, shardKey{}, shard)
}

// DialShards makes one ClientConn per distinct server of shards, with
// grpc.NewClient and the options of WithDialOptions, and an Interceptor
// installed on each. shards[s] lists the addresses of shard s's replicas,
// one or more ("10.0.0.1:50051"). A server that holds several shards is
// listed in each, with the same address: equal addresses are one server
// (one conn).
//
// cfg gets Replicas (the number of distinct servers), Shards (each shard's
// servers) and ReplicaNames (their addresses): leave them zero. Load, the
// default's rules, probation and ORCA load reports are then per server,
// and stats and metrics name servers by address. Every mistake is
// reported at once. WithReplicas and WithTied are refused.
func DialShards(shards [][]string, cfg hedge.Config, opts ...Option) (*ShardConns, error) {
	var errs []error
	if len(shards) == 0 {
		errs = append(errs, errors.New("hedgegrpc: DialShards without shards: give the addresses of each shard's replicas, shards[s] for shard s"))
	}
	if cfg.Replicas != 0 || cfg.Shards != nil || cfg.ReplicaNames != nil {
		errs = append(errs, errors.New("hedgegrpc: DialShards: Config sets Replicas, Shards or ReplicaNames: leave them zero; DialShards sets them from the shards' addresses"))
	}
	if o, _ := collect(append(opts[:len(opts):len(opts)], dialing())); o.tied != nil {
		errs = append(errs, errors.New("hedgegrpc: DialShards with WithTied: tied requests are not sent over shards; leave WithTied out"))
	}
	sc := &ShardConns{shards: make([][]int, len(shards))}
	index := map[string]int{}
	for i, addrs := range shards {
		if len(addrs) == 0 {
			errs = append(errs, fmt.Errorf("hedgegrpc: DialShards: shards[%d] is empty: list the addresses of the shard's replicas, at least one", i))
			continue
		}
		for j, a := range addrs {
			if a == "" {
				errs = append(errs, fmt.Errorf("hedgegrpc: DialShards: shards[%d][%d] is empty: give the server's address", i, j))
				continue
			}
			k, ok := index[a]
			if !ok {
				k = len(sc.servers)
				index[a] = k
				sc.servers = append(sc.servers, a)
			} else if slices.Contains(sc.shards[i], k) {
				errs = append(errs, fmt.Errorf("hedgegrpc: DialShards: shards[%d] lists %q twice: list each replica of a shard once, so that a hedge goes to another server", i, a))
				continue
			}
			sc.shards[i] = append(sc.shards[i], k)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Replicas, cfg.Shards, cfg.ReplicaNames = len(sc.servers), sc.shards, slices.Clone(sc.servers)
	c, err := dial(sc.servers, opts, nil, func(opts []Option) (*Interceptor, error) {
		h, err := hedge.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("hedgegrpc: Config: %w", err)
		}
		ic, err := New(h, opts...)
		if err != nil {
			return nil, err
		}
		ic.shards = len(sc.shards)
		return ic, nil
	})
	if err != nil {
		return nil, err
	}
	sc.Conns = *c
	return sc, nil
}

// Hedger returns the Hedger of every call: its Stats hold the
// per-operation and per-shard counters, its ReplicaStats the per-server
// ones.
func (c *ShardConns) Hedger() *hedge.Hedger { return c.ic.all }

// Len returns the number of shards.
func (c *ShardConns) Len() int { return len(c.shards) }

// Servers returns the address of each distinct server, by server index
// (hedge.Attempt.Replica): conn i of Conns dials Servers()[i].
func (c *ShardConns) Servers() []string { return slices.Clone(c.servers) }

// Shard returns the indices in Servers of shard's servers.
func (c *ShardConns) Shard(shard int) []int { return slices.Clone(c.shards[shard]) }

// fanCopy is what a copy of a Fan leaf carries in its context to the
// Interceptor of the conn it calls on: the server, and where to put the
// pushback of a trailer.
type fanCopy struct {
	replica  int
	pushback []string // the PushbackKey values of the last call's trailer
}

type fanCopyKey struct{}

// Fan runs a fan-out of n leaves over the shards with hedge.DoFan: leaf i
// is served by shard fo.Shard(i) (i mod Len() when fo.Shard is nil), and
// each of its copies runs leaf(ctx, i, cc) with cc the conn of one of that
// shard's servers, never another's. Make the leaf's call on cc with ctx
// (pb.NewSearchClient(cc).Search(ctx, req)): the copy is marked
// (AttemptKey, PreviousAttemptsKey), its server's ORCA load report is
// read, and a PushbackKey trailer stops or holds back the leaf's next
// copy, as for a hedged call. The leaves share one budget, the sibling
// trigger, Need and GoodEnough (see hedge.DoFan). op is the operation
// class, such as the method's full name.
func Fan[T any](ctx context.Context, c *ShardConns, op string, n int, fo hedge.FanOut, leaf func(ctx context.Context, i int, cc *grpc.ClientConn) (T, error)) (hedge.FanResult[T], error) {
	if leaf == nil {
		return hedge.FanResult[T]{}, errors.New("hedgegrpc: Fan needs a leaf function")
	}
	return hedge.DoFan(ctx, c.ic.all, op, n, fo, func(ctx context.Context, i int, a hedge.Attempt) (T, error) {
		switch {
		case a.Hedge:
			ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, prevAttempts[a.Index], AttemptKey, prevAttempts[a.Index])
		case a.Index > 0:
			ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, prevAttempts[a.Index])
		}
		fc := &fanCopy{replica: a.Replica}
		v, err := leaf(context.WithValue(ctx, fanCopyKey{}, fc), i, c.conns[a.Replica])
		if err != nil && len(fc.pushback) > 0 {
			err = hedge.PushbackAfter(err, pushbackDelay(fc.pushback))
		}
		return v, err
	})
}

// fanCall passes a call of a Fan leaf's copy through, reading its
// trailer's load report and pushback.
func (ic *Interceptor) fanCall(ctx context.Context, fc *fanCopy, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	var trailer metadata.MD
	opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
	err := invoker(ctx, method, req, reply, cc, opts...)
	ic.readLoad(fc.replica, trailer)
	fc.pushback = nil
	if err != nil {
		fc.pushback = trailer[PushbackKey]
	}
	return err
}

// noShardError is the error of a call on ShardConns without WithShard.
type noShardError struct{ method string }

func (e noShardError) Error() string {
	return fmt.Sprintf("hedgegrpc: %s on ShardConns names no shard: make the call with ctx = hedgegrpc.WithShard(ctx, s), or make it a leaf of hedgegrpc.Fan", e.method)
}

func (e noShardError) Is(target error) bool {
	return target == ErrNoShard || target == hedge.ErrInvalidConfig
}
