package hedge

import (
	"fmt"
	"math"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// FanOut says how [DoFan] runs a fan-out request: how many of its leaves it
// needs, how long it waits, whether canaries go first, and the hedge
// budget, cap and sibling trigger its leaves share. The zero FanOut waits
// for every leaf, sends no canary, and sizes the budget from the number
// of leaves (see Hedges).
type FanOut struct {
	// Need is how many leaves must answer: [DoFan] returns once Need have,
	// and cancels the others (quorum and erasure-coded reads). 0 means
	// every leaf.
	Need int
	// GoodEnough, when positive, is how long after the call started the
	// answer is good enough as it stands: [DoFan] then returns with the
	// leaves that have answered, and cancels the others, whose errors
	// match [ErrLate]. It is not a deadline for the leaves' work: use the
	// context for that.
	GoodEnough time.Duration
	// Canaries is how many leaves go first: leaves 0 to Canaries-1. The
	// others go only once every canary has answered; a canary that fails
	// ends the request, and the leaves that never went match
	// [ErrNotSentCanary]. When the canaries are all the leaves Need asks
	// for, the others never go, and match [ErrNotSentNeedMet]. 0 sends
	// every leaf at once.
	Canaries int
	// Shard, on a [Hedger] with [Config.Shards], returns the shard of
	// leaf i: its copies go only to that shard's servers. Nil means
	// leaf i is on shard i mod len(Config.Shards). A leaf whose shard is
	// out of range is not sent, and fails with an error that matches
	// [ErrInvalidConfig]. DoFan calls Shard once per leaf, before any
	// leaf goes. Set on a [Hedger] without Shards, it is an error.
	Shard func(leaf int) int
	// Hedges is the most extra copies (hedges and retries) the request's
	// leaves may send in all, on top of the [Hedger]'s own budget and caps.
	// 0 means twice the leaves one stuck server holds, and at least two.
	// Without [Config.Shards], that is n over [Config.Replicas], rounded
	// up (over ten without replicas). With Shards, each shard's leaves
	// are divided among its servers, and a server holds its share of
	// every shard it serves: 30 leaves over 30 shards of 2 servers give
	// a server half a leaf, so 2. Negative means none. Values of 2^31 or
	// more are as good as no limit.
	Hedges int
	// InFlight is the most extra copies of the request's leaves in flight
	// at once. 0 means Hedges. Values of 2^31 or more are as good as no
	// limit.
	InFlight int
	// Mark is the share of the needed leaves that must have answered
	// before the sibling trigger starts: see Straggle. 0 means
	// 1 - 1.5/replicas, within [0.5, 0.75]: 0.75 over ten replicas or
	// more, less over fewer, so that one stuck replica's leaves cannot
	// keep the mark from being reached. With [Config.Shards], 1/replicas
	// is the share of the leaves one stuck server holds: 0.75 for a leaf
	// on each of 30 shards of 2 servers, 0.5 for 30 leaves on one shard
	// of 2 servers.
	Mark float64
	// Straggle is the sibling trigger's multiple (0 means 3; negative
	// turns the trigger off). Once Mark of the needed leaves have
	// answered, a leaf still running Straggle times as long after the
	// request started as that took is a straggler: its hedge is due then,
	// if the [Hedger]'s own delay has not made it due earlier, and it goes
	// if the [Hedger]'s rules and the request's budget allow.
	Straggle float64
}

const defaultFanStraggle = 3

// validate checks f for a fan-out of n leaves.
func (f *FanOut) validate(n int) error {
	var errs []error
	if n < 0 {
		errs = append(errs, fmt.Errorf("hedge: DoFan with %d leaves: use 0 or more", n))
	}
	if f.Need < 0 || f.Need > n {
		errs = append(errs, fmt.Errorf("hedge: FanOut.Need = %d for %d leaves: use 0 (every leaf) to %d", f.Need, n, n))
	}
	if f.GoodEnough < 0 {
		errs = append(errs, fmt.Errorf("hedge: FanOut.GoodEnough = %v is negative: use 0 to wait for the leaves needed, or how long an answer may take", f.GoodEnough))
	}
	if f.Canaries < 0 || f.Canaries > n {
		errs = append(errs, fmt.Errorf("hedge: FanOut.Canaries = %d for %d leaves: use 0 (none) to %d", f.Canaries, n, n))
	}
	if f.InFlight < 0 {
		errs = append(errs, fmt.Errorf("hedge: FanOut.InFlight = %d is negative: use 0 for FanOut.Hedges, or a positive cap", f.InFlight))
	}
	if math.IsNaN(f.Mark) || f.Mark < 0 || f.Mark > 1 {
		errs = append(errs, fmt.Errorf("hedge: FanOut.Mark = %v: use a share of the needed leaves in (0, 1], e.g. 0.75, or 0 for the default", f.Mark))
	}
	if math.IsNaN(f.Straggle) || math.IsInf(f.Straggle, 0) || (f.Straggle > 0 && f.Straggle < 1) {
		errs = append(errs, fmt.Errorf("hedge: FanOut.Straggle = %v: use a multiple of at least 1, e.g. 3, 0 for the default, or a negative value for no sibling trigger", f.Straggle))
	}
	if len(errs) > 0 {
		return invalidConfig{errs}
	}
	return nil
}

// fanConfig applies f's defaults for a fan-out of n leaves over replicas
// replicas. This is the one place where a FanOut's decision fields get
// their defaults.
func (f *FanOut) fanConfig(n, replicas int) decide.FanConfig {
	return f.fanConfigWith(n, decide.DefaultFanHedges(n, replicas), decide.DefaultFanMark(replicas))
}

// fanConfigShards is fanConfig for a fan-out over shards: heaviest is
// the leaves that the server holding the most of them holds (see
// decide.ShardLoad).
func (f *FanOut) fanConfigShards(n int, heaviest float64) decide.FanConfig {
	return f.fanConfigWith(n, decide.DefaultShardFanHedges(heaviest), decide.DefaultShardFanMark(n, heaviest))
}

// fanConfigWith applies f's defaults for a fan-out of n leaves, hedges
// and mark being those of Hedges and Mark.
func (f *FanOut) fanConfigWith(n, hedges int, defaultMark float64) decide.FanConfig {
	need := f.Need
	if need == 0 {
		need = n
	}
	fc := decide.FanConfig{Hedges: f.Hedges, InFlight: f.InFlight, Straggle: f.Straggle}
	switch {
	case fc.Hedges == 0:
		fc.Hedges = hedges
	case fc.Hedges < 0:
		fc.Hedges = 0
	}
	if fc.InFlight == 0 {
		fc.InFlight = fc.Hedges
	}
	// The decision counts in 32 bits: a larger budget or cap is as good
	// as none, and saturates.
	fc.Hedges, fc.InFlight = min(fc.Hedges, math.MaxInt32), min(fc.InFlight, math.MaxInt32)
	mark := f.Mark
	if mark == 0 {
		mark = defaultMark
	}
	switch {
	case fc.Straggle == 0:
		fc.Straggle = defaultFanStraggle
	case fc.Straggle < 0:
		fc.Straggle = 0
	}
	if fc.Straggle > 0 {
		fc.Mark = max(1, int(math.Ceil(mark*float64(need))))
	}
	return fc
}

func init() {
	decide.FanFrom = func(f any, n, replicas int) (decide.FanConfig, error) {
		fo := f.(FanOut)
		if err := fo.validate(n); err != nil {
			return decide.FanConfig{}, err
		}
		return fo.fanConfig(n, replicas), nil
	}
	decide.ShardFanFrom = func(f any, n int, leaves []int, shards [][]int, servers int) (decide.FanConfig, error) {
		fo := f.(FanOut)
		if err := fo.validate(n); err != nil {
			return decide.FanConfig{}, err
		}
		return fo.fanConfigShards(n, decide.ShardLoad(leaves, shards, servers)), nil
	}
}
