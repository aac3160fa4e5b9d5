package decide

import (
	"math"
	"sync/atomic"
	"time"
)

// DefaultFanHedges is the request budget (hedge.FanOut.Hedges) of a fan-out of
// n leaves over replicas replicas (hedge.Config.Replicas; 0, when the attempt
// function chooses, counts as ten) when the FanOut leaves it zero: twice the
// leaves one stuck replica holds, n/replicas rounded up, and at least
// two. Twice, because the leaves' timers come due together when the
// sibling trigger starts, and the tokens go to the first leaves asked
// for, which are not always the stuck replica's.
func DefaultFanHedges(n, replicas int) int {
	r := fanReplicas(replicas)
	return max(2, 2*((n+r-1)/r))
}

// DefaultFanMark is the sibling trigger's mark (hedge.FanOut.Mark) over
// replicas replicas when the FanOut leaves it zero: 1 - 1.5/replicas, within
// [0.5, 0.75]. One stuck replica holds about 1/replicas of the leaves;
// a mark above 1 - 1/replicas would wait for them.
func DefaultFanMark(replicas int) float64 {
	return min(max(1-1.5/float64(fanReplicas(replicas)), 0.5), 0.75)
}

// ShardLoad returns the leaves that the server holding the most of a
// fan-out's leaves holds, what the defaults of a fan-out over shards
// count (hedge.Config.Shards). leaves[s] is how many leaves go to shard
// s, and shards[s] lists its servers, in [0, servers). A shard's leaves
// are divided among its servers, and a server holds its share of every
// shard it serves: one stuck server holds that many of the request's
// leaves.
func ShardLoad(leaves []int, shards [][]int, servers int) (heaviest float64) {
	held := make([]float64, servers)
	for s, c := range leaves {
		if c == 0 {
			continue
		}
		for _, v := range shards[s] {
			held[v] += float64(c) / float64(len(shards[s]))
		}
	}
	for _, x := range held {
		heaviest = max(heaviest, x)
	}
	return heaviest
}

// DefaultShardFanMark is DefaultFanMark for a fan-out of n leaves over
// shards whose heaviest server holds heaviest of them (ShardLoad): one
// less 1.5 times the share of the leaves one stuck server holds, within
// [0.5, 0.75]. Over replicas that each hold n/replicas leaves, it is
// DefaultFanMark(replicas); over 30 shards of 2 servers, one stuck
// server holds 1/60 of the leaves and the mark is 0.75, while 30 leaves
// all on one shard of 2 servers get 0.5. The simulator's shards group
// measured the mark by the servers a request spreads over: the fewer
// servers of one shard set it at 0.5 for every layout, and sent twice
// the extra leaves for less of the gain (30 shards x 3, stalls, load 0.3).
func DefaultShardFanMark(n int, heaviest float64) float64 {
	if n <= 0 || heaviest <= 0 {
		return DefaultFanMark(0)
	}
	return min(max(1-1.5*heaviest/float64(n), 0.5), 0.75)
}

// DefaultShardFanHedges is DefaultFanHedges for a fan-out over shards
// whose heaviest server holds heaviest leaves (ShardLoad): twice that,
// rounded up, and at least two. Over replicas that each hold n/replicas
// leaves, it is DefaultFanHedges.
func DefaultShardFanHedges(heaviest float64) int {
	return max(2, 2*int(math.Ceil(heaviest-1e-9)))
}

// fanReplicas is replicas, or ten when the attempt function chooses.
func fanReplicas(replicas int) int {
	if replicas <= 0 {
		return 10
	}
	return replicas
}

// FanConfig is what the decision of one fan-out request is made of: the
// hedge budget and cap its leaves share, and its sibling trigger. Package
// hedge fills it, defaults applied, from a hedge.FanOut.
type FanConfig struct {
	// Hedges is the most extra copies the request's leaves may send in
	// all: the request's own budget, spent on top of the Hedger's.
	Hedges int
	// InFlight is the most extra copies of the request's leaves in flight
	// at once.
	InFlight int
	// Mark is how many leaves must have answered before the sibling
	// trigger starts; 0 turns it off.
	Mark int
	// Straggle is the sibling trigger's multiple: a leaf that has not
	// answered Straggle times as long after it went as the Mark-th answer
	// took is a straggler.
	Straggle float64
}

// Fan is the decision state of one fan-out request, which its leaves'
// Plans share (Plan.Fan): the request's budget and cap on extra copies,
// and the sibling trigger.
//
// The sibling trigger reads the leaves as one sample of how long this
// request's work takes now, on these replicas: once Mark of the leaves
// have answered, a leaf still running Straggle times as long after it
// went as the Mark-th answer took is a straggler whatever the Hedger's
// delay says, and its next copy is due then (Policy.Due). A leaf sent
// after the mark (after canaries) gets as long from its own start. Load that slows every leaf
// slows the Mark-th answer too, so the trigger moves with it; a stuck
// replica slows only its own leaves.
//
// A Fan is safe for concurrent use by its leaves. The zero Fan is not
// ready: call Reset first.
type Fan struct {
	mark        int32
	straggle    float64
	maxInFlight int32
	tokens      atomic.Int32 // extra copies the request may still send
	inFlight    atomic.Int32 // its extra copies in flight
	answered    atomic.Int32 // leaves that answered
	wait        atomic.Int64 // how long after it went a leaf is a straggler; Never before the mark
	extra       atomic.Int32 // extra copies sent
	peak        atomic.Int32 // the most extra copies in flight at once
}

// Reset makes f the state of a new fan-out request.
func (f *Fan) Reset(cfg FanConfig) {
	f.mark, f.straggle = int32(cfg.Mark), cfg.Straggle
	f.maxInFlight = int32(cfg.InFlight)
	f.tokens.Store(int32(cfg.Hedges))
	f.inFlight.Store(0)
	f.answered.Store(0)
	f.wait.Store(int64(Never))
	f.extra.Store(0)
	f.peak.Store(0)
}

// Answered records a leaf that went at start and answered at now. It
// reports whether this answer is the Mark-th, which starts the sibling
// trigger: the engine should then bring forward the timers of the leaves
// still running (see Policy.Due), for their stragglers' copies are due
// earlier now.
func (f *Fan) Answered(now, start time.Duration) bool {
	n := f.answered.Add(1)
	if f.mark <= 0 || n != f.mark {
		return false
	}
	wait := Never
	if d := float64(max(now-start, 0)) * f.straggle; d < float64(math.MaxInt64/2) {
		wait = time.Duration(d)
	}
	f.wait.Store(int64(wait))
	return true
}

// Straggler returns how long after it went a leaf still running is a
// straggler, or Never before Mark leaves have answered.
func (f *Fan) Straggler() time.Duration { return time.Duration(f.wait.Load()) }

// InFlight returns the extra copies of the request in flight now.
func (f *Fan) InFlight() int { return int(f.inFlight.Load()) }

// Extra returns the extra copies the request's leaves sent.
func (f *Fan) Extra() int { return int(f.extra.Load()) }

// Peak returns the most extra copies of the request that were in flight
// at once.
func (f *Fan) Peak() int { return int(f.peak.Load()) }

// Done gives back the slot of an extra copy that returned (one whose
// Grant.HoldsFanSlot was true when it went).
func (f *Fan) Done() { f.inFlight.Add(-1) }

// take takes a token and a slot for one extra copy, or reports false and
// takes nothing.
func (f *Fan) take() bool {
	for {
		n := f.inFlight.Load()
		if n >= f.maxInFlight {
			return false
		}
		if f.inFlight.CompareAndSwap(n, n+1) {
			break
		}
	}
	if f.tokens.Add(-1) < 0 {
		f.tokens.Add(1)
		f.inFlight.Add(-1)
		return false
	}
	f.extra.Add(1)
	n := f.inFlight.Load()
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return true
}

// give gives back what take took, for a copy that did not go.
func (f *Fan) give() {
	f.extra.Add(-1)
	f.tokens.Add(1)
	f.inFlight.Add(-1)
}

// FanFrom returns the FanConfig of a hedge.FanOut (passed as any, since
// this package cannot name it) for a fan-out of n leaves over replicas
// replicas, validated and with its defaults, as hedge.DoFan makes it. Package hedge sets it when
// it is initialised, so that the simulator decides for a fan-out request
// as DoFan does.
var FanFrom func(f any, n, replicas int) (FanConfig, error)

// ShardFanFrom is FanFrom for a fan-out over shards: leaves[s] of the n
// leaves go to shard s, whose servers shards[s] lists, in [0, servers).
// Its defaults are DefaultShardFanHedges and DefaultShardFanMark, both
// of the leaves one stuck server holds (ShardLoad). These are
// hedge.DoFan's defaults on a Hedger with hedge.Config.Shards. Package hedge sets
// it when it is initialised.
var ShardFanFrom func(f any, n int, leaves []int, shards [][]int, servers int) (FanConfig, error)
