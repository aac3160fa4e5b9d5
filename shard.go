package hedge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tailcut/hedge/internal/decide"
)

// ShardGrid returns the common layout of [Config.Shards]: shards shards
// of replicas servers each, shard s on servers s*replicas to
// s*replicas+replicas-1. Set [Config.Replicas] to shards*replicas with
// it. It returns nil when either count is below 1.
//
//	cfg := hedge.Config{Replicas: 30 * 2, Shards: hedge.ShardGrid(30, 2)}
func ShardGrid(shards, replicas int) [][]int {
	if shards < 1 || replicas < 1 {
		return nil
	}
	out := make([][]int, shards)
	all := make([]int, shards*replicas)
	for i := range all {
		all[i] = i
	}
	for s := range out {
		out[s] = all[s*replicas : (s+1)*replicas : (s+1)*replicas]
	}
	return out
}

// shardSet is what a [Hedger] keeps of one shard of [Config.Shards]: its
// servers, and the [Picker] that picks among them, its zones those of
// its servers.
type shardSet struct {
	servers []int
	picker  decide.Picker
}

// local returns server's position in the shard's list, or -1 when the
// shard does not hold it.
func (s *shardSet) local(server int) int {
	for j, v := range s.servers {
		if v == server {
			return j
		}
	}
	return -1
}

// newShards copies cfg's shards, each with its picker. cfg is valid.
func newShards(cfg *Config) []shardSet {
	if cfg.Shards == nil {
		return nil
	}
	out := make([]shardSet, len(cfg.Shards))
	for s, servers := range cfg.Shards {
		sh := &out[s]
		sh.servers = slices.Clone(servers)
		sh.picker.Random = cfg.Picker.Random
		if cfg.Picker.Zones != nil {
			sh.picker.Zones = make([]string, len(servers))
			for j, v := range servers {
				sh.picker.Zones[j] = cfg.Picker.Zones[v]
			}
		}
	}
	return out
}

// validateShards checks cfg.Shards, and appends what is wrong to errs.
func (cfg *Config) validateShards(errs []error) []error {
	if cfg.Shards == nil {
		return errs
	}
	if len(cfg.Shards) == 0 {
		return append(errs, errors.New("hedge: Config.Shards is empty: list the servers of each shard (hedge.ShardGrid makes the usual layout), or leave it nil for replicas that can each serve any request"))
	}
	if cfg.Replicas < 1 {
		return append(errs, fmt.Errorf("hedge: Config.Shards is set with Config.Replicas = %d: set Replicas to the number of servers (for hedge.ShardGrid(n, r), n*r)", cfg.Replicas))
	}
	shown := 0
	for s, servers := range cfg.Shards {
		var err error
		switch {
		case len(servers) == 0:
			err = fmt.Errorf("hedge: Config.Shards[%d] lists no server: give each shard at least one server", s)
		default:
			for j, v := range servers {
				if v < 0 || v >= cfg.Replicas {
					err = fmt.Errorf("hedge: Config.Shards[%d][%d] = %d is not a server: use indices in [0, %d) (Config.Replicas is the number of servers)", s, j, v, cfg.Replicas)
					break
				}
				if slices.Contains(servers[:j], v) {
					err = fmt.Errorf("hedge: Config.Shards[%d] lists server %d twice: list each server of a shard once", s, v)
					break
				}
			}
		}
		if err == nil {
			continue
		}
		if shown == 3 {
			return append(errs, errors.New("hedge: Config.Shards has more mistakes of the same kinds"))
		}
		errs = append(errs, err)
		shown++
	}
	return errs
}

// errDoShards is [Do]'s and [DoHeld]'s error on a [Hedger] with
// [Config.Shards], which cannot tell which shard's servers may serve the
// request. It matches [ErrInvalidConfig].
var errDoShards = invalidConfig{[]error{errors.New("hedge: Do on a Hedger with Config.Shards cannot tell which shard serves the request: use hedge.DoShard for a request one shard serves, or hedge.DoFan with FanOut.Shard for a fan-out over shards")}}

// errFanShard is [DoFan]'s error for a [FanOut.Shard] on a [Hedger]
// without [Config.Shards]. It matches [ErrInvalidConfig].
var errFanShard = invalidConfig{[]error{errors.New("hedge: FanOut.Shard is set on a Hedger without Config.Shards: set Config.Shards to the servers of each shard, or leave FanOut.Shard nil")}}

// errNoShards is [DoShard]'s error on a [Hedger] without [Config.Shards].
var errNoShards = invalidConfig{[]error{errors.New("hedge: DoShard on a Hedger without Config.Shards: set Config.Shards to the servers of each shard, or use hedge.Do")}}

// shardError is the error of a shard out of range, for [DoShard] (leaf
// -1) or for leaf of [DoFan]. It matches [ErrInvalidConfig].
func shardError(h *Hedger, shard, leaf int) error {
	what := "DoShard's shard"
	if leaf >= 0 {
		what = fmt.Sprintf("FanOut.Shard(%d)", leaf)
	}
	return invalidConfig{[]error{fmt.Errorf("hedge: %s = %d is not a shard: use 0 to %d (Config.Shards has %d)", what, shard, len(h.shards)-1, len(h.shards))}}
}

// DoShard is [Do] for a request that only shard's servers can serve, on a
// [Hedger] with [Config.Shards]: every copy goes to a server of
// Config.Shards[shard] ([Attempt.Replica] is that server's index, and
// [Attempt.Shard] is shard). Load, the spare-capacity and payoff rules
// and probation are those of the real servers, shared with every other
// shard they hold. A shard out of range, or a [Hedger] without Shards, is
// an error that matches [ErrInvalidConfig], and nothing is sent.
// Everything else is as in Do.
func DoShard[T any](ctx context.Context, h *Hedger, op string, shard int, attempt func(ctx context.Context, a Attempt) (T, error)) (T, error) {
	if h.shards == nil {
		var zero T
		return zero, errNoShards
	}
	if shard < 0 || shard >= len(h.shards) {
		var zero T
		return zero, shardError(h, shard, -1)
	}
	c := newCall(ctx, h, op, attempt, shard)
	c.st.shards[shard].leaves.Add(1)
	v, _, err := c.run()
	return v, err
}

// pickIn returns the [Picker]'s choice for a copy among the servers of
// shard (all of them when shard is -1), leaving out those in held, or -1
// when every one is held. The shard's picker runs over the shard's own
// list of servers: held is mapped to positions in it, and its choice
// back to a server.
func (h *Hedger) pickIn(shard int, held []int, load func(int) int) int {
	if shard < 0 {
		return h.picker.pick(len(h.replicas), held, load)
	}
	sh := &h.shards[shard]
	var buf [HardMaxAttempts + decide.MaxCandidates]int
	local := buf[:0]
	for _, v := range held {
		if j := sh.local(v); j >= 0 {
			local = append(local, j)
		}
	}
	j := sh.picker.Pick(len(sh.servers), local, func(j int) int { return load(sh.servers[j]) }, rand.Uint64())
	if j < 0 {
		return -1
	}
	return sh.servers[j]
}

// candidates returns the servers a copy for shard may go to: the shard's,
// or nil for every one (shard -1).
func (h *Hedger) candidates(shard int) []int {
	if shard < 0 {
		return nil
	}
	return h.shards[shard].servers
}

// fanLayout is where the leaves of one [DoFan] go on a [Hedger] with
// [Config.Shards]: each leaf's shard, as [FanOut.Shard] gave it (out of
// range, possibly), or leaf i on shard i mod the number of shards.
type fanLayout struct {
	shard []int // by FanOut.Shard, or nil
	mod   int   // with shard nil, the number of shards; 0 without Config.Shards
}

// sharded reports whether the leaves go to shards.
func (l fanLayout) sharded() bool { return l.shard != nil || l.mod > 0 }

// of returns leaf i's shard. l must be sharded.
func (l fanLayout) of(i int) int {
	if l.shard != nil {
		return l.shard[i]
	}
	return i % l.mod
}

// layout returns the shard of each of n leaves by f.Shard (nil: leaf i
// on shard i mod the number of shards, with nothing allocated), or the
// zero fanLayout on a [Hedger] without [Config.Shards].
func (h *Hedger) layout(f *FanOut, n int) fanLayout {
	if h.shards == nil {
		return fanLayout{}
	}
	if f.Shard == nil {
		return fanLayout{mod: len(h.shards)}
	}
	l := fanLayout{shard: make([]int, n)}
	for i := range n {
		l.shard[i] = f.Shard(i)
	}
	return l
}

// validShard reports whether s is a shard of h.
func (h *Hedger) validShard(s int) bool { return s >= 0 && s < len(h.shards) }

// fanHeaviest is the defaults of a fan-out of n leaves in the default
// layout: what fanDefaults returns for it.
type fanHeaviest struct {
	n        int
	heaviest float64
}

// fanDefaults returns what the defaults of a fan-out of n leaves laid out
// by l are made of (see decide.ShardLoad). In the default layout they
// depend on n alone, and the last one is kept.
func (h *Hedger) fanDefaults(l fanLayout, n int) (heaviest float64) {
	if !l.sharded() {
		return 0
	}
	if l.shard == nil {
		if p := h.fanHeavy.Load(); p != nil && p.n == n {
			return p.heaviest
		}
	}
	counts := make([]int, len(h.shards))
	for i := range n {
		if s := l.of(i); h.validShard(s) {
			counts[s]++
		}
	}
	heaviest = decide.ShardLoad(counts, h.shardLists(), len(h.replicas))
	if l.shard == nil {
		h.fanHeavy.Store(&fanHeaviest{n, heaviest})
	}
	return heaviest
}

// shardLists returns the servers of each shard.
func (h *Hedger) shardLists() [][]int { return h.lists }
