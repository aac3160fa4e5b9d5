package hedge

import (
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/internal/decide"
	"github.com/tailcut/hedge/quantile"
)

// Stats is a snapshot of one operation class. Counters are exact: each is
// one atomic integer. A snapshot taken while calls run may see one counter
// updated and a related one not yet.
type Stats struct {
	Op string // operation class

	Requests    int64 // calls of Do
	Hedges      int64 // hedge copies sent (copies beyond the primary)
	HedgeWins   int64 // calls won by a hedge copy
	PrimaryWins int64 // calls won by the primary, or by a failover copy in its place
	Failures    int64 // calls that returned an error, but for leaves DoFan did not need (NotNeeded)
	// NotNeeded counts the leaves of [DoFan] that were cancelled, or
	// never sent, because [FanOut.Need] leaves had answered. They are not
	// failures: Failures leaves them out.
	NotNeeded int64
	// Refused counts the hedges not sent, by the [Refusal] that kept
	// each: Refused[RefusedBusy] those refused for want of an idle
	// replica, and so on. A copy that is asked for again later
	// ([RefusedBusy], [RefusedFanOut], [RefusedHead]) counts each time.
	Refused Refusals
	// LoadByReport counts hedge decisions that read the load of the
	// replica the copy would go to from that replica's own fresh report
	// ([Load], [Hedger.ReportLoad]), and LoadByOwnView those that read this
	// [Hedger]'s own requests in flight there, for want of one. Both are
	// zero for a [Hedger] without Replicas.
	LoadByReport, LoadByOwnView int64
	// ShadowHedges counts hedges that [Shadow] mode would have sent.
	ShadowHedges int64
	// Failovers counts copies sent at once in place of one that never
	// reached its server ([ErrNotSent]), outside the budget: not hedges.
	Failovers int64
	// Unhedgeable counts calls marked [NotIdempotent] without a key, sent
	// once.
	Unhedgeable int64
	// WastedWork is the running time of copies that did not win, from
	// their start until they returned, in calls that sent more than one
	// copy.
	WastedWork time.Duration

	// Latency is what callers waited: from the call to Do's return,
	// the losers reaped (unless [Config.ReapInBackground]). A loser that
	// ignores its cancellation makes the caller wait, and shows here.
	Latency Distribution
	// Primary is the primary copy on its own, from send to return. A
	// primary cancelled because a hedge won is recorded at its running
	// time then, a lower bound; PrimaryCensored counts them. Failed
	// primaries are not recorded. Primary is not the latency without
	// hedging: Holdout is.
	Primary         Distribution
	PrimaryCensored int64
	// Holdout is what callers saw in the rollout's control group: the
	// requests that a rollout below 1 ([Hedger.SetRollout]) kept in
	// Shadow. They share the replicas and the picker with the hedged
	// ones, so Holdout against Latency compares latency without and with
	// hedging. It measures what hedging does to each call, not to the
	// servers: for that, alternate blocks of time with hedging on and
	// off ([Hedger.SetMode]). It is empty unless a rollout below 1 is in
	// force.
	Holdout Distribution
	// Rescued counts calls won by a hedge while their primary was still
	// running (not those won by a copy that replaced a failed primary).
	Rescued int64
	// SavedAtLeast is a lower bound of the time hedges saved: for each
	// rescued call whose primary later returned a success, how much
	// later it did. A primary that stops when cancelled adds nothing, so
	// Holdout is the measure to compare.
	SavedAtLeast time.Duration

	// HedgePath is hedge copies on their own, from the moment each was
	// sent to its success, whether it won or not. A hedge path far slower
	// than the primary (another zone, a cold cache) holds resources longer
	// than the hedge rate suggests.
	HedgePath Distribution

	// TimerLag is how late the hedge timers fired: for each timer that
	// came due, the time from when it was due to when the [Hedger] acted
	// on it. The runtime's timers fire up to about a millisecond late
	// under load ([Config.PreciseTimers] brings that to tens of
	// microseconds). A TimerLag near the delay means hedges leave far
	// later than asked.
	TimerLag Distribution

	// Delay is the delay in force now: [Never] while it is still being
	// learnt, which String prints as "never".
	Delay time.Duration

	// Fan counts the class's fan-outs ([DoFan]). Their leaves are requests
	// of the class too, counted above like any.
	Fan FanStats

	// Shards holds one entry per shard of [Config.Shards], in shard
	// order: which shard's leaves straggle, fail, or are saved by a
	// hedge. It is nil without Shards.
	Shards []ShardStats
}

// ShardStats is one shard's share of an operation class's requests on a
// [Hedger] with [Config.Shards]. Its servers' own share is in
// [ReplicaStats].
type ShardStats struct {
	Shard int // index in Config.Shards
	// Leaves counts the requests sent to the shard: [DoFan]'s leaves
	// and [DoShard]'s calls.
	Leaves int64
	// Hedges counts the hedge copies sent to the shard's servers, and
	// HedgeWins the requests a hedge won there.
	Hedges, HedgeWins int64
	// Stragglers counts the fan-outs whose last answer, the one that
	// completed [FanOut.Need], was the shard's. A shard with far more
	// than its share holds up the requests.
	Stragglers int64
	// Failures counts the shard's leaves and [DoShard] calls that failed
	// on their own (not those cancelled because the fan-out ended).
	Failures int64
}

// String summarises the shard's counts on one line.
func (s ShardStats) String() string {
	return fmt.Sprintf("shard %d: %d leaves, %d hedges, %d hedge wins, %d stragglers, %d failures", s.Shard, s.Leaves, s.Hedges, s.HedgeWins, s.Stragglers, s.Failures)
}

// shardState is what [ShardStats] reads.
type shardState struct {
	leaves, hedges, hedgeWins, stragglers, failures atomic.Int64
}

// Refusals counts hedges not sent, by [Refusal]: [Stats.Refused]. Index
// it by a [Refusal]:
//
//	busy := s.Refused[hedge.RefusedBusy]
//
// [Refusals.All] yields the refusals counted. The other indexes stay
// zero.
type Refusals [13]int64

// Refusals has a count for every [Refusal] of the decision.
var _ [decide.NumRefusals]int64 = Refusals{}

// All yields each counted [Refusal] and its count, zeros included, in the
// order of the [Refusal] values. Each [Refusal]'s String is the name the
// metrics (the "reason" label) and hedgectl give it.
func (c Refusals) All() iter.Seq2[Refusal, int64] {
	return func(yield func(Refusal, int64) bool) {
		for i, n := range c {
			if why := Refusal(i); decide.Counted(why) && !yield(why, n) {
				return
			}
		}
	}
}

// String lists the counts by name, as "budget 3, in_flight 0, ...".
func (c Refusals) String() string {
	var b strings.Builder
	for why, n := range c.All() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v %d", why, n)
	}
	return b.String()
}

// FanStats counts an operation class's fan-outs ([DoFan]).
type FanStats struct {
	Requests int64 // DoFan calls
	Leaves   int64 // their leaves
	// Partial counts calls that returned without the leaves they needed
	// (a *FanError): a leaf failed, a canary failed, the good-enough time
	// came first, or the caller gave up.
	Partial int64
	// NotNeeded counts leaves cancelled because [FanOut.Need] leaves had
	// answered (not failures: [Stats.Failures] leaves them out), and Late
	// those cancelled at [FanOut.GoodEnough]. [Stats.NotNeeded] adds the
	// leaves never sent because the canaries were all that Need asked
	// for.
	NotNeeded, Late int64
	// Extra is the extra copies (hedges and retries) the leaves sent, in
	// all; ExtraCopies counts fan-outs by how many each sent: [0] none,
	// [1] one, [2] two, [3] three or four, [4] five to eight, [5] 9 to
	// 16, [6] 17 to 32, [7] more.
	Extra       int64
	ExtraCopies [8]int64
	// Latency is what callers of [DoFan] waited.
	Latency Distribution
}

// extraBucket returns the index of ExtraCopies that counts a fan-out
// with extra extra copies.
func extraBucket(extra int) int {
	if extra <= 2 {
		return max(extra, 0)
	}
	return min(bits.Len(uint(extra-1))+1, 7)
}

// fanState is an operation class's fan-out counters ([FanStats]).
type fanState struct {
	requests, leaves, partial, notNeeded, late, extra atomic.Int64
	unneeded                                          atomic.Int64 // leaves never sent: the canaries were enough
	extraCopies                                       [8]atomic.Int64
	latency                                           quantile.Histogram
}

// record counts a fan-out's end: its extra copies and latency.
func (f *fanState) record(extra int, latency time.Duration) {
	f.extra.Add(int64(extra))
	f.extraCopies[extraBucket(extra)].Add(1)
	f.latency.Record(int64(latency))
}

func (f *fanState) stats() FanStats {
	s := FanStats{
		Requests:  f.requests.Load(),
		Leaves:    f.leaves.Load(),
		Partial:   f.partial.Load(),
		NotNeeded: f.notNeeded.Load(),
		Late:      f.late.Load(),
		Extra:     f.extra.Load(),
		Latency:   distribution(&f.latency),
	}
	for i := range s.ExtraCopies {
		s.ExtraCopies[i] = f.extraCopies[i].Load()
	}
	return s
}

// String summarises the snapshot on one line, for logs. A delay of Never
// reads "never".
func (s Stats) String() string {
	return fmt.Sprintf("%s: %d requests, %d hedges (%.1f%%), %d hedge wins (%.1f%% of hedges), %d primary wins, %d failures; "+
		"refused: %v; shadow hedges %d, failovers %d, unhedgeable %d; wasted %v; delay %s; "+
		"latency %v; primary %v (%d censored); hedge path %v; holdout %v; rescued %d, saved at least %v; timer lag %v",
		s.Op, s.Requests, s.Hedges, 100*s.hedgeRate(), s.HedgeWins, 100*s.winRate(), s.PrimaryWins, s.Failures,
		s.Refused, s.ShadowHedges, s.Failovers, s.Unhedgeable, s.WastedWork,
		formatDelay(s.Delay), s.Latency, s.Primary, s.PrimaryCensored, s.HedgePath, s.Holdout, s.Rescued, s.SavedAtLeast, s.TimerLag) +
		s.shardsString()
}

// shardsString is String's part on shards: how many, and the shard with
// the most stragglers, if any.
func (s Stats) shardsString() string {
	if len(s.Shards) == 0 {
		return ""
	}
	worst := s.Shards[0]
	for _, sh := range s.Shards[1:] {
		if sh.Stragglers > worst.Stragglers {
			worst = sh
		}
	}
	if worst.Stragglers == 0 {
		return fmt.Sprintf("; %d shards", len(s.Shards))
	}
	return fmt.Sprintf("; %d shards, most stragglers: %v", len(s.Shards), worst)
}

// formatDelay formats a delay as time.Duration does, except that Never
// reads "never" rather than 2562047h47m16.854775807s.
func formatDelay(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return d.String()
}

// hedgeRate returns hedges sent per request.
func (s Stats) hedgeRate() float64 { return ratio(s.Hedges, s.Requests) }

// winRate returns the share of hedges sent that won their call.
func (s Stats) winRate() float64 { return ratio(s.HedgeWins, s.Hedges) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Distribution summarises latencies, each quantile within
// quantile.RelativeError of the exact one.
type Distribution struct {
	Count                     int64
	Mean, P50, P90, P99, P999 time.Duration
	Max                       time.Duration
	// Sum is the exact total of the latencies recorded: it never
	// decreases, so it suits a metric's running sum (Mean is truncated to
	// a nanosecond, and Mean*Count can dip between two snapshots).
	Sum time.Duration
}

// String summarises the distribution on one line.
func (d Distribution) String() string {
	if d.Count == 0 {
		return "n=0"
	}
	return fmt.Sprintf("n=%d mean=%v p50=%v p90=%v p99=%v p99.9=%v max=%v", d.Count, d.Mean, d.P50, d.P90, d.P99, d.P999, d.Max)
}

func distribution(h *quantile.Histogram) Distribution {
	s := h.Snapshot()
	return distributionOf(&s)
}

// withAlone returns the [Distribution] of the values of h and of alone,
// the snapshot of opState.alone, whose values h counts as its own.
func withAlone(h *quantile.Histogram, alone *quantile.Snapshot) Distribution {
	s := h.Snapshot()
	s.Add(alone)
	return distributionOf(&s)
}

// distributionOf summarises a histogram's snapshot.
func distributionOf(s *quantile.Snapshot) Distribution {
	return Distribution{
		Count: s.Count,
		Mean:  time.Duration(s.Mean()),
		P50:   time.Duration(s.Quantile(0.50)),
		P90:   time.Duration(s.Quantile(0.90)),
		P99:   time.Duration(s.Quantile(0.99)),
		P999:  time.Duration(s.Quantile(0.999)),
		Max:   time.Duration(s.Max),
		Sum:   time.Duration(s.Sum),
	}
}

func (st *opState) stats(now time.Duration) Stats {
	// The calls whose primary won alone are in none of latency, primary
	// and primaryWins: st.alone's one record stands for all three.
	alone := st.alone.Snapshot()
	s := Stats{
		Op:              st.name,
		Requests:        st.requests.Load(),
		Hedges:          st.hedges.Load(),
		HedgeWins:       st.hedgeWins.Load(),
		PrimaryWins:     st.primaryWins.Load() + alone.Count,
		Failures:        st.failures.Load(),
		LoadByReport:    st.byReport.Load(),
		LoadByOwnView:   st.byOwnView.Load(),
		ShadowHedges:    st.shadowHedges.Load(),
		Failovers:       st.failovers.Load(),
		Unhedgeable:     st.unhedgeable.Load(),
		WastedWork:      time.Duration(st.wasted.Load()),
		Latency:         withAlone(&st.latency, &alone),
		Primary:         withAlone(&st.primary, &alone),
		PrimaryCensored: st.censored.Load(),
		HedgePath:       distribution(&st.hedge),
		Holdout:         distribution(&st.holdout),
		TimerLag:        distribution(&st.timerLag),
		Rescued:         st.rescued.Load(),
		SavedAtLeast:    time.Duration(st.saved.Load()),
		Delay:           st.est.Delay(now),
		Fan:             st.fan.stats(),
	}
	for why := range s.Refused.All() {
		s.Refused[why] = st.refused[why].Load()
	}
	s.NotNeeded = s.Fan.NotNeeded + st.fan.unneeded.Load()
	if st.shards != nil {
		s.Shards = make([]ShardStats, len(st.shards))
		for i := range st.shards {
			sh := &st.shards[i]
			s.Shards[i] = ShardStats{
				Shard:      i,
				Leaves:     sh.leaves.Load(),
				Hedges:     sh.hedges.Load(),
				HedgeWins:  sh.hedgeWins.Load(),
				Stragglers: sh.stragglers.Load(),
				Failures:   sh.failures.Load(),
			}
		}
	}
	return s
}

// Stats returns a snapshot of every operation class seen so far, sorted by
// name.
func (h *Hedger) Stats() []Stats {
	ops := h.classes()
	out := make([]Stats, 0, len(ops))
	now := h.now()
	for _, st := range ops {
		out = append(out, st.stats(now))
	}
	slices.SortFunc(out, func(a, b Stats) int {
		switch {
		case a.Op < b.Op:
			return -1
		case a.Op > b.Op:
			return 1
		}
		return 0
	})
	return out
}

// OpStats returns a snapshot of one operation class (zero counts if it was
// never used).
func (h *Hedger) OpStats(op string) Stats {
	if st, ok := (*h.ops.Load())[op]; ok {
		return st.stats(h.now())
	}
	// No state yet: a fixed delay is known; a live one has no estimate.
	d := Never
	if f, ok := h.delay.(Fixed); ok {
		d = time.Duration(f)
	}
	return Stats{Op: op, Delay: d}
}

// ReplicaStats is one replica's share of a [Hedger]'s traffic, over
// every operation class: where copies went, how they fared, and whether
// the replica is on probation (see "Replicas that fail" in the package
// doc). An operator reads it to see which replica is slow or failing.
type ReplicaStats struct {
	Replica int // index in [0, Config.Replicas)
	// Name is the replica's label: its [Config.ReplicaNames] entry, or
	// its index in decimal.
	Name     string
	InFlight int64 // copies running there now
	Copies   int64 // copies sent there: primaries, hedges and failovers
	// Errors counts copies that returned an error, other than copies
	// cancelled because their call was decided or its caller gave up.
	Errors    int64
	Hedges    int64 // hedge copies sent there
	HedgeWins int64 // calls won by a hedge copy there
	// Probation is set while the replica is out of the picks or on
	// probation, taking one probe copy at a time.
	Probation bool
	// Latency is its copies that succeeded, from send to success, since
	// the [Hedger] was made.
	Latency Distribution
	// Recent is the same over the last 30 to 60 seconds: what the
	// replica does now. A burst of slowness stays in Latency's quantiles
	// for good, and leaves Recent within a minute. It is empty for a
	// replica with no success in that time.
	Recent Distribution
}

// String summarises the replica's share on one line, under its Name.
func (r ReplicaStats) String() string {
	s := fmt.Sprintf("replica %s: %d in flight, %d copies, %d errors, %d hedges, %d hedge wins", r.Name, r.InFlight, r.Copies, r.Errors, r.Hedges, r.HedgeWins)
	if r.Probation {
		s += ", on probation"
	}
	return s + fmt.Sprintf("; latency %v; recent %v", r.Latency, r.Recent)
}

// ReplicaName returns replica i's label: its [Config.ReplicaNames] entry,
// or i in decimal. The metrics exporters label a replica with it.
func (h *Hedger) ReplicaName(i int) string {
	if i >= 0 && i < len(h.names) {
		return h.names[i]
	}
	return strconv.Itoa(i)
}

// replicaState is what [ReplicaStats] reads.
type replicaState struct {
	copies, errors, hedges, hedgeWins atomic.Int64
	latency                           quantile.Histogram
	recent                            recentHist
}

// succeeded records the latency of a copy that succeeded on the replica,
// returning at now.
func (r *replicaState) succeeded(now, latency time.Duration) {
	r.latency.Record(int64(latency))
	r.recent.record(now, int64(latency))
}

// ReplicaStats returns a snapshot of each replica, in replica order, or
// nil when the [Hedger] does not pick replicas ([Config.Replicas] is 0).
func (h *Hedger) ReplicaStats() []ReplicaStats {
	if h.reps == nil {
		return nil
	}
	out := make([]ReplicaStats, len(h.reps))
	now := h.now()
	for i := range h.reps {
		r := &h.reps[i]
		out[i] = ReplicaStats{
			Replica:   i,
			Name:      h.ReplicaName(i),
			InFlight:  h.replicas[i].Load(),
			Copies:    r.copies.Load(),
			Errors:    r.errors.Load(),
			Hedges:    r.hedges.Load(),
			HedgeWins: r.hedgeWins.Load(),
			Probation: h.prob.until[i].Load() != 0,
			Latency:   distribution(&r.latency),
			Recent:    r.recent.distribution(now),
		}
	}
	return out
}
