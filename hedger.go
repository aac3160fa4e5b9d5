package hedge

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tailcut/hedge/quantile"

	"github.com/tailcut/hedge/internal/decide"
)

// AnyReplicaLoad, as [Config.MaxReplicaLoad], lets a copy go to a replica
// whatever its load.
const AnyReplicaLoad = -1

// HardMaxAttempts is the most copies of one request a [Hedger] will ever
// send, as in gRPC.
const HardMaxAttempts = 5

// OtherOp is the operation class that absorbs operations beyond
// [Config.MaxOps]. A caller passing raw paths or IDs as operation names
// cannot grow a [Hedger]'s memory without bound.
const OtherOp = "(other)"

// Config configures a [Hedger]. The zero Config is valid. It means a live
// p95 delay per operation class ([Percentile]), at most two copies per
// request, and hedges budgeted to 10% of requests ([DefaultBudget]).
// Every error but [Permanent] ones is retryable. Losers are reaped before
// [Do] returns, and the mode is [On].
//
// With Replicas, the zero Config also hedges the server rather than the
// request: see MaxReplicaLoad, PayoffWinRate and [Picker].
// Config{MaxReplicaLoad: [AnyReplicaLoad], PayoffWinRate: -1} turns those
// rules off, leaving the live percentile and the budget.
type Config struct {
	// Delay says when to send the next copy: [Fixed] or [Percentile].
	// Nil means Percentile{}: the p95 of the last 1,000 primary
	// latencies of the operation class, and no hedging until 100 were
	// seen.
	Delay Delay

	// Budget limits hedges relative to requests. It is shared by every
	// operation class of the [Hedger], and by Hedgers given the same one.
	// Nil means a fresh [DefaultBudget] unless NoBudget is set.
	Budget *Budget
	// NoBudget removes the default budget. Hedges are then limited only
	// by MaxAttempts and MaxHedgesInFlight: this is the configuration that
	// doubles a backend's load when everything is slow at once.
	NoBudget bool

	// MaxAttempts is the most copies of one request, the primary included:
	// 1 to [HardMaxAttempts]. Zero means 2.
	MaxAttempts int
	// MaxHedgesInFlight caps hedge copies running at once across the
	// [Hedger]. Zero means no cap.
	MaxHedgesInFlight int
	// MaxReplicaLoad is the spare-capacity rule. A further copy goes only
	// to a replica with at most this many of this [Hedger]'s requests in
	// flight, and is refused ([RefusedBusy]) otherwise. Zero, the
	// default, means an idle replica: hedges stop by themselves when
	// every replica is busy. [AnyReplicaLoad] turns the rule off. It
	// applies only when the [Hedger] picks replicas (Replicas > 0).
	MaxReplicaLoad int
	// PayoffWinRate sets the payoff rule: a kind of hedge goes on only
	// while it pays. It pays while its losing copies waste little of a
	// delay, or while at least this share of its hedges win; otherwise
	// it is refused ([RefusedPayoff]). The copy of a primary at the head
	// of its replica also waits three delays first ([RefusedHead]). Zero
	// means 1: no kind goes on for winning alone. A negative value turns
	// the rule and the head wait off. The full rule is in the package doc
	// of [github.com/tailcut/hedge/internal/decide]; docs/default.md has
	// the measurements.
	PayoffWinRate float64

	// Replicas, if positive, is the number of replicas the [Hedger] chooses
	// among for each copy ([Attempt].Replica), using Picker. Zero means
	// the attempt function chooses, and [Attempt.Replica] is -1.
	Replicas int
	// Picker chooses replicas by their in-flight copies. Its Zones, if
	// set, must have Replicas entries.
	Picker Picker

	// Shards, if not nil, groups the servers into shards: Shards[s]
	// lists the servers (indices in [0, Replicas)) that hold shard s.
	// A request then goes only to its shard's servers ([DoShard], and
	// [DoFan] with [FanOut.Shard]), and [Do] refuses to run. Each shard
	// has at least one server, each listed once. A server may hold
	// several shards. Replicas is then the number of real servers, and
	// everything the [Hedger] keeps per replica is per server: load in
	// flight, the spare-capacity and payoff rules' evidence, probation,
	// load reports and [ReplicaStats]. [ShardGrid] makes the common
	// layout of N shards of R servers each.
	Shards [][]int
	// ReplicaNames, if not nil, names each of the Replicas servers,
	// with its address for instance. [ReplicaStats] and the metrics
	// exporters label a server with its name. Nil labels it with its
	// index.
	ReplicaNames []string

	// Retryable reports whether a failed copy may be followed by another
	// copy at once. Nil means [DefaultRetryable]: every error but those
	// marked [Permanent]. The caller's own context ending is always
	// final, and a copy that never reached its server ([ErrNotSent]) is
	// always replaced.
	Retryable func(err error) bool

	// ReapInBackground makes Do return as soon as the outcome is known.
	// Losers are still cancelled, but finish on their own goroutines,
	// holding their connections until they return. The primary then runs
	// on a goroutine too, which costs allocations per call. Set it for
	// clients that do not stop a request when its context is cancelled
	// (go-redis v9, once a command holds a connection): without it, a
	// hedge that wins still waits for the stalled loser.
	ReapInBackground bool

	// AttemptTimeout, if positive, bounds each copy: its context ends
	// that long after the copy starts. A copy that runs out fails with
	// context.DeadlineExceeded and is retryable: the next copy goes at
	// once, as far as the budget and caps allow. The caller's own
	// deadline always ends the call. With [DoHeld], the winner's context
	// stays bounded until release. Zero means no bound but the caller's.
	AttemptTimeout time.Duration

	// PreciseTimers makes hedge timers fire within tens of microseconds,
	// instead of the runtime's granularity (about a millisecond on many
	// Linux machines). The timer goroutine sleeps in the kernel until
	// shortly before each timer and spins the last stretch, within 5% of
	// a core. Use it for delays under a few milliseconds.
	PreciseTimers bool

	// MaxOps bounds the number of operation classes with their own state.
	// Zero means 100. Further classes share the state of [OtherOp].
	MaxOps int

	// OnEvent, if set, is told what the [Hedger] does: hedges sent, refused
	// and won, panics, mode changes (see [Event]; [LogEvents] writes them
	// to a slog.Logger). It runs on the goroutine that made the decision,
	// with the call's state locked: it must return quickly, and must not
	// block or call Do. Unset, it costs nothing.
	OnEvent func(Event)

	// Mode is the [Hedger]'s mode: a [Mode] ([On], [Shadow] or [Off]), its
	// initial mode, or a *[ModeVar], shared with every [Hedger] given the
	// same one. Nil means On.
	Mode Moder
	// Rollout is the initial fraction of requests hedged in mode On; the
	// rest run in Shadow (see [Hedger.SetRollout]). Zero means 1: all of
	// them.
	Rollout float64
}

// Hedger sends hedged requests: see Do. It is safe for concurrent use and
// keeps per-operation-class state (delay estimate and stats). Make one with
// New and share it.
type Hedger struct {
	pol            *decide.Policy  // the decision its calls consult
	delay          Delay           // Config.Delay, or the default
	budget         *Budget         // the budget in force, nil when unlimited
	mode           *ModeVar        // Config.Mode's ModeVar, or the Hedger's own
	replicas       []atomic.Int64  // copies in flight on each replica
	left           []atomic.Int64  // copies each replica answered (not cancelled ones)
	ghost          []atomic.Int64  // until when a cancelled loser counts as load on each replica (decide.Policy.Ghost); 0: none
	fanOuts        []replicaFanOut // which fan-out holds each replica, if only one does (decide.Policy.Placed)
	lost           []atomic.Int64  // copies cancelled as losers on each replica since it last answered
	replicaReports                 // the replicas' own reports of their load (ReportLoad)
	loadFn         func(int) int   // ownLoad: what the picker reads, reports or not
	// unhedgedLoad is the load the rollout's control group is placed by.
	unhedgedLoad func(int) int
	reps         []replicaState // per-replica stats (ReplicaStats)
	shards       []shardSet     // Config.Shards, each with its picker; nil without
	lists        [][]int        // each shard's servers, as shards holds them
	names        []string       // Config.ReplicaNames
	prob         *probation     // replicas on probation (probationFailures)
	picker       Picker
	retryable    func(error) bool
	bgReap       bool
	onEvent      func(Event)
	attemptTO    time.Duration
	maxOps       int
	epoch        time.Time
	timers       *timerQueue
	calls        sync.Pool // of *call[T], for whatever T the Hedger's calls return

	// fanHeavy holds the defaults of the last sharded DoFan in the
	// default layout (fanDefaults).
	fanHeavy atomic.Pointer[fanHeaviest]

	liveMu   sync.Mutex                // serialises SetLive
	live     atomic.Pointer[liveState] // SetLive's settings; nil: the Config's
	liveBase decide.Live               // what requests begin with before any SetLive

	opsMu    sync.Mutex
	ops      atomic.Pointer[map[string]*opState] // by name, and by the raw form of a name made valid UTF-8
	nClasses int                                 // classes in ops, OtherOp included; guarded by opsMu
	// firstOp is the first class looked up in ops: most Hedgers serve one
	// operation, and comparing two strings that share their bytes costs
	// less than a map lookup. It is set once, so that callers of several
	// classes never write to it.
	firstOp atomic.Pointer[opState]
}

// ErrInvalidConfig is matched by every error [New] returns for a
// mistaken [Config], by [DoFan]'s for a mistaken [FanOut] or a context it
// cannot fan out, by a leaf's whose [FanOut.Shard] is out of range, by
// [DoShard]'s for a shard out of range, and by [Do]'s on a [Hedger] with
// [Config.Shards]. errors.Is(err, hedge.ErrInvalidConfig)
// tells a configuration mistake from other errors.
var ErrInvalidConfig = errors.New("hedge: invalid Config")

// New validates cfg and returns a [Hedger]. The error lists every mistake
// found, each with what to do about it, and matches [ErrInvalidConfig].
func New(cfg Config) (*Hedger, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b, mv := budgetOf(cfg), modeVarOf(cfg)
	h := &Hedger{
		pol:       newPolicy(cfg, b, mv),
		delay:     delayOf(cfg),
		budget:    b,
		mode:      mv,
		picker:    cfg.Picker,
		retryable: cfg.Retryable,
		bgReap:    cfg.ReapInBackground,
		attemptTO: cfg.AttemptTimeout,
		onEvent:   cfg.OnEvent,
		maxOps:    cfg.MaxOps,
		epoch:     time.Now(),
		shards:    newShards(&cfg),
		names:     slices.Clone(cfg.ReplicaNames),
	}
	for s := range h.shards {
		h.lists = append(h.lists, h.shards[s].servers)
	}
	h.timers = newTimerQueue(h.epoch)
	h.timers.precise = cfg.PreciseTimers
	if h.maxOps == 0 {
		h.maxOps = 100
	}
	if cfg.Replicas > 0 {
		h.replicas = make([]atomic.Int64, cfg.Replicas)
		h.left = make([]atomic.Int64, cfg.Replicas)
		h.ghost = make([]atomic.Int64, cfg.Replicas)
		h.fanOuts = make([]replicaFanOut, cfg.Replicas)
		h.lost = make([]atomic.Int64, cfg.Replicas)
		h.reps = make([]replicaState, cfg.Replicas)
		h.prob = newProbation(cfg.Replicas)
		h.reports = make([]atomic.Pointer[decide.Report], cfg.Replicas)
		h.sent = make([]atomic.Int64, cfg.Replicas)
		h.loadFn = h.ownLoad
		// The rollout's control group is placed as a client that never
		// hedges would place it: there, the copies that hedging
		// cancelled on a replica would still be in flight until the
		// replica answers, so a stalled replica keeps looking busy.
		h.unhedgedLoad = func(i int) int { return int(h.replicas[i].Load() + h.lost[i].Load()) }
	}
	if h.retryable == nil {
		h.retryable = DefaultRetryable
	}
	m := map[string]*opState{}
	h.ops.Store(&m)
	return h, nil
}

func (cfg *Config) validate() error {
	var errs []error
	if cfg.Delay != nil {
		if err := cfg.Delay.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Budget != nil && cfg.Budget.t.Max == 0 {
		errs = append(errs, errors.New("hedge: Config.Budget is a zero Budget, which holds no tokens and would refuse every hedge: make it with NewBudget or NewThrottle, or set NoBudget for no limit"))
	}
	if cfg.Budget != nil && cfg.NoBudget {
		errs = append(errs, errors.New("hedge: Config sets both Budget and NoBudget: keep one"))
	}
	if cfg.MaxAttempts < 0 || cfg.MaxAttempts > HardMaxAttempts {
		errs = append(errs, fmt.Errorf("hedge: Config.MaxAttempts = %d: use 1 to %d copies per request (2 is the usual choice; 0 means 2)", cfg.MaxAttempts, HardMaxAttempts))
	}
	if cfg.MaxHedgesInFlight < 0 {
		errs = append(errs, fmt.Errorf("hedge: Config.MaxHedgesInFlight = %d is negative: use 0 for no cap, or a positive cap", cfg.MaxHedgesInFlight))
	}
	if math.IsNaN(cfg.PayoffWinRate) || cfg.PayoffWinRate > 1 {
		errs = append(errs, fmt.Errorf("hedge: Config.PayoffWinRate = %v: use a share of hedges in (0, 1], e.g. 0.5, zero for the default, or a negative value for no payoff rule", cfg.PayoffWinRate))
	}
	if cfg.MaxReplicaLoad < AnyReplicaLoad {
		errs = append(errs, fmt.Errorf("hedge: Config.MaxReplicaLoad = %d: use 0 (hedge only to an idle replica, the default), a positive number of requests in flight, or AnyReplicaLoad (-1) for no rule", cfg.MaxReplicaLoad))
	}
	if cfg.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("hedge: Config.AttemptTimeout = %v is negative: use 0 for no bound but the caller's deadline, or the longest one copy may run", cfg.AttemptTimeout))
	}
	if cfg.Replicas < 0 {
		errs = append(errs, fmt.Errorf("hedge: Config.Replicas = %d is negative: use 0 to let the attempt function choose, or the number of replicas", cfg.Replicas))
	}
	if cfg.Replicas == 1 && cfg.MaxAttempts != 1 {
		errs = append(errs, errors.New("hedge: Config.Replicas = 1 leaves no other replica for a hedge, so none would ever be sent: list every replica (at least 2), use 0 to let the attempt function choose, or set MaxAttempts to 1 to send each request once"))
	}
	if cfg.Picker.Zones != nil && len(cfg.Picker.Zones) != cfg.Replicas {
		errs = append(errs, fmt.Errorf("hedge: Config.Picker.Zones has %d entries for %d replicas: give one zone per replica", len(cfg.Picker.Zones), cfg.Replicas))
	}
	errs = cfg.validateShards(errs)
	if cfg.ReplicaNames != nil && len(cfg.ReplicaNames) != cfg.Replicas {
		errs = append(errs, fmt.Errorf("hedge: Config.ReplicaNames has %d names for %d replicas: give one name per server, or leave it nil to label servers by index", len(cfg.ReplicaNames), cfg.Replicas))
	}
	if cfg.MaxOps < 0 {
		errs = append(errs, fmt.Errorf("hedge: Config.MaxOps = %d is negative: use 0 for the default of 100", cfg.MaxOps))
	}
	if err := estimatorMemory(cfg.Delay, cfg.MaxOps); err != nil {
		errs = append(errs, err)
	}
	if mv, ok := cfg.Mode.(*ModeVar); ok && mv == nil {
		errs = append(errs, errors.New("hedge: Config.Mode is a nil *ModeVar: use new(hedge.ModeVar), a Mode, or leave it nil for On"))
	} else if m, ok := cfg.Mode.(Mode); ok && (m < On || m > Off) {
		errs = append(errs, fmt.Errorf("hedge: Config.Mode = %d is not a mode: use hedge.On, hedge.Shadow or hedge.Off", m))
	}
	if math.IsNaN(cfg.Rollout) || cfg.Rollout < 0 || cfg.Rollout > 1 {
		errs = append(errs, fmt.Errorf("hedge: Config.Rollout = %v is outside [0, 1]: use e.g. 0.01 to hedge 1%% of requests (0 means all)", cfg.Rollout))
	}
	if len(errs) == 0 {
		return nil
	}
	return invalidConfig{errs}
}

// invalidConfig is New's error: the mistakes, one per line as errors.Join
// prints them. It unwraps to each mistake, as a joined error does, and
// also matches [ErrInvalidConfig].
type invalidConfig struct{ errs []error }

func (e invalidConfig) Error() string        { return errors.Join(e.errs...).Error() }
func (e invalidConfig) Unwrap() []error      { return e.errs }
func (e invalidConfig) Is(target error) bool { return target == ErrInvalidConfig }

// maxEstimatorMemory is the most memory that the delay estimators of one
// [Hedger] may hold, over all its operation classes ([Config.MaxOps] of them,
// plus [OtherOp]). New refuses a [Percentile] whose Window, times that many
// classes, would need more. The default, a window of 1,000 latencies over
// 100 classes, holds about 1.2 MB.
const maxEstimatorMemory = 64 << 20

// estimatorMemory checks that the per-class windows of delay fit in
// maxEstimatorMemory. Delays of other types are not sized.
func estimatorMemory(delay Delay, maxOps int) error {
	var p Percentile
	switch d := delay.(type) {
	case nil:
	case Percentile:
		p = d
	case *Percentile:
		if d == nil {
			return nil
		}
		p = *d
	default:
		return nil
	}
	p = p.withDefaults()
	if p.Window < 1 || p.Window > 1<<24 {
		return nil // reported by Percentile.validate
	}
	if maxOps <= 0 {
		maxOps = 100
	}
	classes := int64(maxOps) + 1
	per := int64(quantile.WindowBytes(p.Window))
	if total := per * classes; total > maxEstimatorMemory {
		most := (maxEstimatorMemory/classes - int64(quantile.WindowBytes(0))) / 2
		return fmt.Errorf("hedge: Percentile.Window = %d with %d operation classes (Config.MaxOps + 1) can hold %s of latency windows, over the limit of %s: use a Window of at most %d (1,000 is plenty for a p95), or lower Config.MaxOps",
			p.Window, classes, byteSize(total), byteSize(maxEstimatorMemory), most)
	}
	return nil
}

// byteSize formats n bytes with a binary unit.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// SetMode switches the [Hedger]'s mode at run time (and that of every
// [Hedger] sharing its [ModeVar]). Calls already started keep the mode they
// started with. It is a single atomic store.
func (h *Hedger) SetMode(m Mode) error {
	if err := h.mode.Set(m); err != nil {
		return err
	}
	if h.onEvent != nil {
		h.onEvent(Event{Kind: ModeChanged, Mode: m, Copy: -1, Replica: -1})
	}
	return nil
}

// Mode returns the current mode.
func (h *Hedger) Mode() Mode { return h.mode.Mode() }

// ModeVar returns the [Hedger]'s mode switch: [Config.Mode] when that is a
// *ModeVar, or the [Hedger]'s own.
func (h *Hedger) ModeVar() *ModeVar { return h.mode }

// SetRollout sets the fraction of requests, in [0, 1], that hedge for real
// in mode On; the others run in Shadow. It is a single atomic store.
func (h *Hedger) SetRollout(f float64) error { return h.pol.SetRollout(f) }

// Rollout returns the fraction set by SetRollout.
func (h *Hedger) Rollout() float64 { return h.pol.Rollout() }

// Replicas returns [Config.Replicas]: how many replicas the [Hedger] picks
// among (0 when the attempt function chooses). With [Config.Shards], it
// is the number of servers.
func (h *Hedger) Replicas() int { return len(h.replicas) }

// MaxAttempts returns the most copies of one request the [Hedger] sends.
func (h *Hedger) MaxAttempts() int { return h.pol.MaxAttempts() }

// Budget returns the budget in force (nil when unlimited).
func (h *Hedger) Budget() *Budget { return h.budget }

// String describes the [Hedger]'s decision in a few words, for labels and
// logs: "p95 of the last 1000 primary latencies (none before 100), budget
// ratio(0.1, burst=10), at most 2 copies, ...", then the rollout and mode
// when they are not 1 and On.
func (h *Hedger) String() string {
	if m := h.Mode(); m != On {
		return fmt.Sprintf("%v, mode %v", h.pol, m)
	}
	return h.pol.String()
}

// now is the monotonic reading passed to policies.
func (h *Hedger) now() time.Duration { return time.Since(h.epoch) }

// ownLoad is replica i's load as this [Hedger] sees it alone: its copies in
// flight there, and one more while a copy cancelled there as a loser has
// had no answer from the replica since (decide.Policy.Ghost).
func (h *Hedger) ownLoad(i int) int {
	n := int(h.replicas[i].Load())
	if g := h.ghost[i].Load(); g != 0 && int64(h.now()) < g {
		n++
	}
	return n
}

// replicaFanOut is which fan-out ([WithFanOut]) made a replica busy with
// this [Hedger]'s copies, and whether every copy there since is of it. It
// is kept with atomics, not a lock: copies launched at the same moment on
// one replica may see a stale value, and a leaf then counts its replica
// as busy (or, rarely, as idle), which moves the spare share by a
// thousandth of a placement.
type replicaFanOut struct {
	fan  atomic.Pointer[fanOut]
	pure atomic.Bool
}

// opState is the per-operation-class state of a [Hedger].
type opState struct {
	name string
	est  decide.Estimator
	live atomic.Pointer[liveOf] // the class's live settings, when they are per class (see liveFor)

	requests     atomic.Int64
	hedges       atomic.Int64
	hedgeWins    atomic.Int64
	primaryWins  atomic.Int64                     // primary wins but those alone counts (see stats)
	refused      [decide.NumRefusals]atomic.Int64 // the refusals Counted says to count
	shadowHedges atomic.Int64
	failovers    atomic.Int64
	unhedgeable  atomic.Int64
	failures     atomic.Int64
	censored     atomic.Int64
	wasted       atomic.Int64 // nanoseconds
	rescued      atomic.Int64
	saved        atomic.Int64 // nanoseconds
	byReport     atomic.Int64 // hedge decisions that read a replica's load from its fresh report
	byOwnView    atomic.Int64 // and those that read the Hedger's own view

	latency quantile.Histogram // winner's latency: what the caller saw
	primary quantile.Histogram // the primary alone; censored at cancellation
	// alone holds the latency of each call whose primary won with no
	// other copy sent: a value that latency and primary both hold, and a
	// win primaryWins counts, in one record instead of two and a count.
	// The Latency and Primary distributions and histograms add it to
	// theirs, and PrimaryWins its count.
	alone   quantile.Histogram
	hedge   quantile.Histogram // hedge copies on their own, from send to success
	holdout quantile.Histogram // what callers saw in the rollout's control group
	// timerLag is how late each hedge timer fired after it was due.
	timerLag quantile.Histogram
	fan      fanState     // DoFan's
	shards   []shardState // per shard of Config.Shards (ShardStats); nil without
}

// op returns the state of operation class name, creating it if needed.
// The lookup is a comparison with the first class looked up, then a
// lock-free map read; creation copies the map under a lock, which happens
// at most MaxOps times.
//
// This is where operation names enter the [Hedger], and so where they are
// made fit for every exporter: a name that is not valid UTF-8 (one built
// from raw request bytes) is recorded with each invalid byte sequence
// replaced by U+FFFD, as strings.ToValidUTF8 does. Such a name is mapped
// to its class under its raw form too, so that later calls find it at
// once; names that become the same share one class.
func (h *Hedger) op(name string) *opState {
	first := h.firstOp.Load()
	if first != nil && first.name == name {
		return first
	}
	if st, ok := (*h.ops.Load())[name]; ok {
		if first == nil {
			h.firstOp.CompareAndSwap(nil, st)
		}
		return st
	}
	h.opsMu.Lock()
	defer h.opsMu.Unlock()
	old := *h.ops.Load()
	if st, ok := old[name]; ok {
		return st
	}
	raw := name
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "\uFFFD")
	}
	st, ok := old[name]
	if !ok && h.nClasses >= h.maxOps {
		if st, ok := old[OtherOp]; ok {
			return st
		}
		name = OtherOp
	}
	if !ok {
		st = &opState{name: name, est: h.newEstimator(name)}
		if h.shards != nil {
			st.shards = make([]shardState, len(h.shards))
		}
		h.nClasses++
	}
	m := make(map[string]*opState, len(old)+2)
	for k, v := range old {
		m[k] = v
	}
	m[name] = st
	if raw != name && name != OtherOp && len(old) < 2*h.maxOps {
		m[raw] = st // an alias, so that the raw name is found at once
	}
	h.ops.Store(&m)
	return st
}

// classes returns each operation class once (the map holds aliases too).
func (h *Hedger) classes() []*opState {
	ops := *h.ops.Load()
	out := make([]*opState, 0, len(ops))
	for k, st := range ops {
		if k == st.name {
			out = append(out, st)
		}
	}
	return out
}
