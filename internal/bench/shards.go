package bench

import (
	"errors"
	"fmt"

	"github.com/tailcut/hedge"
)

// ReplicaNamer is implemented by backends whose servers have names, such
// as their addresses: a sharded configuration passes them on as
// hedge.Config.ReplicaNames.
type ReplicaNamer interface {
	ReplicaNames() []string
}

// ShardedContender turns a strategy into a Contender over a backend of
// shards x replicas servers laid out as hedge.ShardGrid: each request is
// one hedge.DoFan of Scenario.FanOut leaves, leaf j to shard j mod
// shards (the zero FanOut.Shard), through one Hedger whose Config is the
// strategy's with Replicas, Shards and ReplicaNames (the backend's names,
// when it has them) set. The strategy's FanOut options are used if it has
// them, else the zero FanOut. The backend must be a LeafReader.
func ShardedContender(s Strategy, o StrategyOptions, shards, replicas int) Contender {
	fan := hedge.FanOut{}
	if s.Fan != nil {
		fan = *s.Fan
	}
	c := Contender{
		Name: s.Name,
		Doc:  fmt.Sprintf("%s Sharded: %d shards x %d replicas (hedge.Config.Shards = hedge.ShardGrid(%d, %d)), each request one hedge.DoFan, leaf j to shard j mod %d.", s.Doc, shards, replicas, shards, replicas, shards),
	}
	c.NewFan = func(b Backend, w int) (Client, error) {
		if b.Replicas() != shards*replicas {
			return nil, fmt.Errorf("bench: %d shards x %d replicas need %d servers; the %s backend has %d", shards, replicas, shards*replicas, b.Name(), b.Replicas())
		}
		cfg, err := s.Config(o)
		if err != nil {
			return nil, err
		}
		cfg.Replicas = b.Replicas()
		cfg.Shards = hedge.ShardGrid(shards, replicas)
		if rn, ok := b.(ReplicaNamer); ok {
			cfg.ReplicaNames = rn.ReplicaNames()
		}
		return newFanCallClient(b, cfg, fan, w)
	}
	c.New = func(Backend) (Client, error) { return nil, errShardedNew }
	return c
}

// errShardedNew is the error of a sharded Contender's New: its requests
// are fan-outs, made by NewFan (FanOut, which Run applies).
var errShardedNew = errors.New("bench: a sharded configuration sends fan-out calls only: wrap it with FanOut")
