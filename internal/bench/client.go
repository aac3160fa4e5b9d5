package bench

import (
	"context"
	"errors"
	"time"

	"github.com/tailcut/hedge"
)

// Backend is a set of running replicas of one kind (HTTP, Redis, gRPC)
// that the runner can stall on schedule and make clients for. Backends are
// started once and serve every run of every configuration; a client is made
// fresh for each run.
type Backend interface {
	// Name is the backend's kind: "http", "redis", "grpc".
	Name() string
	// Replicas is the number of replicas.
	Replicas() int
	// Stall makes replica i answer nothing for d, starting now, and
	// returns once it answers again (or ctx ended; the stall may then
	// still run its course). It reports whether the stall happened.
	Stall(ctx context.Context, i int, d time.Duration) error
	// NewClient returns a client of the workload over all replicas whose
	// hedging is cfg (cfg.Replicas is the number of replicas). A cfg with
	// MaxAttempts 1 sends each request once, to the replica cfg.Picker
	// chooses.
	NewClient(cfg hedge.Config) (Client, error)
	// Close stops every replica (child processes by pid) and returns once
	// they are gone. It is idempotent.
	Close() error
}

// ServedCounter is implemented by backends that count the requests their
// replicas received, hedge copies and cancelled ones included: the extra
// work as the servers saw it. Served returns one count per replica, -1
// where it could not be read.
type ServedCounter interface {
	Served() []int64
}

// ProcessOwner is implemented by backends that run child processes: their
// pids, so that the runner can count their CPU as ours and a test can check
// they are gone after Close.
type ProcessOwner interface {
	Pids() []int
}

// Client sends requests of the workload. The runner makes one per run,
// calls Do concurrently from one goroutine per request, then Stats, then
// Close.
type Client interface {
	// Do sends request number i (the key it reads derives from i) and
	// returns once it has completed: the answer read, or an error. It
	// must honour ctx.
	Do(ctx context.Context, i int) error
	// Stats returns the client's counters since it was made.
	Stats() ClientStats
	// Close releases the client's connections and waits for what it
	// started.
	Close() error
}

// ClientStats are a client's counters since it was made. A counter a
// client does not know is -1 (Unknown).
type ClientStats struct {
	// Requests is the number of calls of Do the client saw.
	Requests int64
	// Hedges is the number of copies sent beyond the first, over all
	// requests.
	Hedges int64
	// HedgeWins is the number of requests answered by a hedge copy.
	HedgeWins int64
	// RefusedBudget counts hedges the budget refused.
	RefusedBudget int64
	// Wasted is the running time of copies that did not win, in requests
	// that sent more than one (hedge.Stats.WastedWork).
	Wasted time.Duration
	// Delay is the hedge delay in force at the end (hedge.Never: none).
	Delay time.Duration
	// TimerLagP50 and TimerLagP99 are quantiles of how late the hedge
	// timers fired (hedge.Stats.TimerLag), over the client's whole life,
	// warm-up included: quantiles cannot be subtracted. Unknown when no
	// timer came due, or the client has no such measure.
	TimerLagP50, TimerLagP99 time.Duration

	// PoolWaits is the number of times a request waited for a free pooled
	// connection (go-redis PoolStats.WaitCount), PoolWaitTime their total
	// time, PoolTimeouts the waits that gave up.
	PoolWaits    int64
	PoolWaitTime time.Duration
	PoolTimeouts int64
	// Dials is the number of connections opened (HTTP: counted by the
	// transport's DialContext; Redis: pool misses).
	Dials int64
}

// Unknown marks a counter a client does not have.
const Unknown = -1

// UnknownStats returns ClientStats with every counter Unknown.
func UnknownStats() ClientStats {
	return ClientStats{
		Requests: Unknown, Hedges: Unknown, HedgeWins: Unknown, RefusedBudget: Unknown,
		Wasted: Unknown, Delay: Unknown, PoolWaits: Unknown, PoolWaitTime: Unknown,
		PoolTimeouts: Unknown, Dials: Unknown, TimerLagP50: Unknown, TimerLagP99: Unknown,
	}
}

// sub returns the counters of s minus those of base, keeping Unknown, the
// instantaneous Delay and s's timer lag quantiles.
func (s ClientStats) sub(base ClientStats) ClientStats {
	d := func(a, b int64) int64 {
		if a == Unknown || b == Unknown {
			return Unknown
		}
		return a - b
	}
	return ClientStats{
		Requests:      d(s.Requests, base.Requests),
		Hedges:        d(s.Hedges, base.Hedges),
		HedgeWins:     d(s.HedgeWins, base.HedgeWins),
		RefusedBudget: d(s.RefusedBudget, base.RefusedBudget),
		Wasted:        time.Duration(d(int64(s.Wasted), int64(base.Wasted))),
		Delay:         s.Delay,
		TimerLagP50:   s.TimerLagP50,
		TimerLagP99:   s.TimerLagP99,
		PoolWaits:     d(s.PoolWaits, base.PoolWaits),
		PoolWaitTime:  time.Duration(d(int64(s.PoolWaitTime), int64(base.PoolWaitTime))),
		PoolTimeouts:  d(s.PoolTimeouts, base.PoolTimeouts),
		Dials:         d(s.Dials, base.Dials),
	}
}

// HedgerStats fills the hedging counters of ClientStats from a Hedger's
// stats of one operation class; the pool and dial counters are Unknown.
func HedgerStats(st hedge.Stats) ClientStats {
	s := UnknownStats()
	s.Requests = st.Requests
	s.Hedges = st.Hedges
	s.HedgeWins = st.HedgeWins
	s.RefusedBudget = st.Refused[hedge.RefusedBudget]
	s.Wasted = st.WastedWork
	s.Delay = st.Delay
	if st.TimerLag.Count > 0 {
		s.TimerLagP50, s.TimerLagP99 = st.TimerLag.P50, st.TimerLag.P99
	}
	return s
}

// ClientFuncs makes a Client of functions, for clients built around a peer
// library. StatsFunc and CloseFunc may be nil.
type ClientFuncs struct {
	DoFunc    func(ctx context.Context, i int) error
	StatsFunc func() ClientStats
	CloseFunc func() error
}

// Do calls DoFunc.
func (c ClientFuncs) Do(ctx context.Context, i int) error { return c.DoFunc(ctx, i) }

// Stats calls StatsFunc, or returns UnknownStats.
func (c ClientFuncs) Stats() ClientStats {
	if c.StatsFunc == nil {
		return UnknownStats()
	}
	return c.StatsFunc()
}

// Close calls CloseFunc.
func (c ClientFuncs) Close() error {
	if c.CloseFunc == nil {
		return nil
	}
	return c.CloseFunc()
}

// Contender is one configuration compared in a run: a name and a way to
// make a fresh client of it for a backend.
type Contender struct {
	// Name identifies it in the report ("default").
	Name string
	// Doc says in one line what it is, for the report.
	Doc string
	// New makes a client over b. It is called once per run.
	New func(b Backend) (Client, error)
	// NewFan, if set, makes a client over b whose requests each read w
	// leaves at once as one fan-out call (hedge.DoFan), and FanOut uses
	// it instead of sending New's requests as leaves.
	NewFan func(b Backend, w int) (Client, error)
}

// errNoContenders is returned by Run without contenders.
var errNoContenders = errors.New("bench: no configurations to run: give at least one")
