package hedgeset

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/tied"
)

// reasonHelp says what each counted refusal means, for ReasonsHelp.
var reasonHelp = map[hedge.Refusal]string{
	hedge.RefusedDeadline: "less time was left before the caller's deadline than the delay",
	hedge.RefusedReplicas: "every replica already held a copy of the call",
	hedge.RefusedInFlight: "Config.MaxHedgesInFlight hedges were in flight already",
	hedge.RefusedBudget:   "the token bucket was empty",
	hedge.RefusedBusy:     "the replica the copy would go to had more of this Hedger's requests in flight than Config.MaxReplicaLoad allows, by default any: it was not idle",
	hedge.RefusedPayoff:   "hedges sent on the same evidence have not been winning often enough, Config.PayoffWinRate",
	hedge.RefusedFanOut:   "the copy was of a fan-out's leaf, and the fan-out's own budget or cap on extra copies was spent, FanOut.Hedges or FanOut.InFlight",
	hedge.RefusedHead:     "the primary was at the head of this Hedger's requests on its replica and had not yet waited three delays; the copy is asked for again when it has",
}

// ReasonsHelp describes every refusal reason, named by Refusal.String,
// for the help text of the refusal counters.
var ReasonsHelp = reasonsHelp()

func reasonsHelp() string {
	var parts []string
	for why := range (hedge.Refusals{}).All() {
		parts = append(parts, why.String()+" ("+reasonHelp[why]+")")
	}
	return strings.Join(parts, ", ")
}

// PrimaryHelp describes the primary latency path, for the help text of
// the latency series.
const PrimaryHelp = "path=primary: the primary copy alone, from send to return; not the latency without hedging: it is censored (a primary cancelled because a hedge won is recorded at its running time then, so high quantiles are lower bounds; failed primaries are not recorded), and equals path=caller while no hedge wins; path=holdout is the latency without hedging to compare with"

// ReplicaLabel is replica r's index as a decimal string: the value of
// the "replica" label of a replica without Config.ReplicaNames
// (hedge.ReplicaStats.Name). Either way the values are bounded by the
// Hedger's replica count.
func ReplicaLabel(r int) string { return strconv.Itoa(r) }

// Kind says whether a Series is a counter or a gauge.
type Kind int

// Kinds of Series.
const (
	Counter Kind = iota // only grows: a Prometheus counter, an OpenTelemetry observable counter
	Gauge               // a value now
)

// Value is one value of a Series, with the value of its extra label
// (empty when the series has none).
type Value struct {
	Label string
	N     int64
}

// Series is one metric an exporter makes of a stats struct S. Its name
// is dotted, after a prefix of the set (ReplicaPrefix, TiedClientPrefix,
// TiedServerPrefix): OpenTelemetry names it "hedge." + prefix + "." +
// Name; Prometheus replaces the dots by underscores, after its namespace,
// and adds "_seconds" when Seconds is set and "_total" to counters.
type Series[S any] struct {
	Name    string
	Unit    string // OpenTelemetry unit: "{copy}", "s"
	Kind    Kind
	Seconds bool   // the values are nanoseconds, exported as seconds
	Label   string // the name of the one extra label, or ""
	Help    string
	// Values returns the series' values in s: one without a label value
	// when Label is empty, else one per label value.
	Values func(s S) []Value
}

func one[S any](f func(S) int64) func(S) []Value {
	return func(s S) []Value { return []Value{{N: f(s)}} }
}

// Prefixes of the series of replicas and of tied traffic.
const (
	ReplicaPrefix    = "replica"
	TiedClientPrefix = "tied.client"
	TiedServerPrefix = "tied.server"
)

// ReplicaLatency is the name, after ReplicaPrefix, of the per-replica
// latency distribution (hedge.ReplicaStats.Latency), which each exporter
// exports its own way (a summary, gauges of quantiles).
const ReplicaLatency = "latency"

// ReplicaLatencyHelp describes the per-replica latency.
const ReplicaLatencyHelp = "Latency of the copies sent to each replica that succeeded, from send to success (primaries, hedges and failovers alike), since the Hedger was made, within quantile.RelativeError (about 0.8%): the replica that is slow stands out. Absent for Hedgers that do not pick replicas (Config.Replicas 0)."

// ReplicaRecent is the name, after ReplicaPrefix, of the per-replica
// latency over the recent window (hedge.ReplicaStats.Recent), which every
// exporter exports as gauges of its quantiles.
const ReplicaRecent = "latency.recent"

// ReplicaRecentHelp describes the per-replica latency over the recent
// window.
const ReplicaRecentHelp = "Latency of the copies sent to each replica that succeeded, from send to success, over the last 30 to 60 seconds, within quantile.RelativeError (about 0.8%): what each replica does now, where the latency since the Hedger was made keeps a past burst for good. Absent for a replica with no success in that time, and for Hedgers that do not pick replicas."

// ReplicaSeries are the series of a Hedger's ReplicaStats, labelled by
// hedger and replica, besides ReplicaLatency.
var ReplicaSeries = []Series[hedge.ReplicaStats]{
	{Name: "in_flight", Unit: "{copy}", Kind: Gauge,
		Help:   "Copies of this Hedger running on the replica now.",
		Values: one(func(s hedge.ReplicaStats) int64 { return s.InFlight })},
	{Name: "copies", Unit: "{copy}",
		Help:   "Copies sent to the replica: primaries, hedges and failovers.",
		Values: one(func(s hedge.ReplicaStats) int64 { return s.Copies })},
	{Name: "errors", Unit: "{copy}",
		Help:   "Copies sent to the replica that returned an error, other than copies cancelled because their call was decided or its caller gave up. Divide by copies for the replica's error rate.",
		Values: one(func(s hedge.ReplicaStats) int64 { return s.Errors })},
	{Name: "hedges.sent", Unit: "{hedge}",
		Help:   "Hedge copies sent to the replica.",
		Values: one(func(s hedge.ReplicaStats) int64 { return s.Hedges })},
	{Name: "hedge.wins", Unit: "{request}",
		Help:   "Calls won by a hedge copy on the replica.",
		Values: one(func(s hedge.ReplicaStats) int64 { return s.HedgeWins })},
	{Name: "probation", Unit: "1", Kind: Gauge,
		Help: "1 while the replica is on probation (out of the picks after three failed copies in a row, or back through one probe copy at a time), else 0.",
		Values: one(func(s hedge.ReplicaStats) int64 {
			if s.Probation {
				return 1
			}
			return 0
		})},
}

// LoadViewsHelp describes the counter of hedge decisions by the view of
// a replica's load they read (Stats.LoadByReport, Stats.LoadByOwnView).
const LoadViewsHelp = "Hedge decisions that read the load of the replica the copy would go to, by the view they read: report, that replica's own fresh report (ORCA over gRPC, endpoint-load-metrics over HTTP, Hedger.ReportLoad); own_view, this Hedger's own requests in flight there, for want of a fresh report. Zero for a Hedger without Replicas. Replicas that report and a report share near zero mean the reports are stale by the time a hedge is decided."

// FailoversHelp describes the failover counter (Stats.Failovers).
const FailoversHelp = "Copies sent at once in place of one that never reached its server (hedge.ErrNotSent: a refused connection, a name that did not resolve), outside the budget and the caps. They are not hedges and are not in hedges sent."

// TiedClientSeries are the series of a tied.Client's Stats, labelled by
// client.
var TiedClientSeries = []Series[tied.ClientStats]{
	{Name: "calls", Unit: "{request}",
		Help:   "Tied calls: each sends its first copy at once and its second Gap later, unless the first answered by then.",
		Values: one(func(s tied.ClientStats) int64 { return s.Calls })},
	{Name: "second_copies", Unit: "{copy}",
		Help:   "Second copies sent: a call whose first copy answered within the gap sends none. Divide by calls for the extra load.",
		Values: one(func(s tied.ClientStats) int64 { return s.Seconds })},
	{Name: "copies.dropped", Unit: "{copy}",
		Help:   "Copies answered as dropped for their sibling (tied.ErrDropped): the other copy had started. No failure.",
		Values: one(func(s tied.ClientStats) int64 { return s.Dropped })},
	{Name: "copies.no_spare", Unit: "{copy}",
		Help:   "Spare copies (the spare form's second copies) refused because no worker was free at their server (tied.ErrNoSpare): the primary has the call. No failure.",
		Values: one(func(s tied.ClientStats) int64 { return s.NoSpare })},
	{Name: "copies.spares_skipped", Unit: "{copy}",
		Help:   "Spare copies not sent because fresh load reports said they could not help (their replica had no free worker, or the primary's had one). No failure.",
		Values: one(func(s tied.ClientStats) int64 { return s.SparesSkipped })},
	{Name: "second_wins", Unit: "{request}",
		Help:   "Calls won by the second copy.",
		Values: one(func(s tied.ClientStats) int64 { return s.SecondWins })},
	{Name: "failures", Unit: "{request}",
		Help:   "Tied calls that returned an error.",
		Values: one(func(s tied.ClientStats) int64 { return s.Failures })},
	{Name: "copies.not_sent", Unit: "{copy}",
		Help:   "Copies that failed before their request reached a server (tied.ErrNotSent, such as a refused connection): they end no call and keep no twin from being sent.",
		Values: one(func(s tied.ClientStats) int64 { return s.NotSent })},
}

// Outcomes of the claims a tied server sent, the values of the "outcome"
// label.
const (
	OutcomeWon    = "won"    // Stats.ClaimsWon: granted, the copy started
	OutcomeLost   = "lost"   // Stats.ClaimsLost: refused, the copy was dropped
	OutcomeFailed = "failed" // Stats.ClaimsFailed: not answered in time or in error, the copy started anyway
)

// TiedServerSeries are the series of a tied.Server's Stats, labelled by
// server.
var TiedServerSeries = []Series[tied.Stats]{
	{Name: "running", Unit: "{request}", Kind: Gauge,
		Help:   "Requests holding a worker now: running, or claiming their tie.",
		Values: one(func(s tied.Stats) int64 { return int64(s.Running) })},
	{Name: "queued", Unit: "{request}", Kind: Gauge,
		Help:   "Requests waiting in the queue now.",
		Values: one(func(s tied.Stats) int64 { return int64(s.Queued) })},
	{Name: "started", Unit: "{request}",
		Help:   "Requests that started, tied or not.",
		Values: one(func(s tied.Stats) int64 { return s.Started })},
	{Name: "tied_started", Unit: "{copy}",
		Help:   "Tied copies that started. Summed over the servers of a service, minus the tied calls, the calls of which both copies ran: the duplicated executions.",
		Values: one(func(s tied.Stats) int64 { return s.TiedStarted })},
	{Name: "refused", Unit: "{request}",
		Help:   "Requests refused because the queue was full.",
		Values: one(func(s tied.Stats) int64 { return s.Refused })},
	{Name: "abandoned", Unit: "{request}",
		Help:   "Requests that left the queue, or gave up their claim, because their context ended.",
		Values: one(func(s tied.Stats) int64 { return s.Abandoned })},
	{Name: "dropped", Unit: "{copy}",
		Help:   "Tied copies dropped without running because their sibling had the right to start.",
		Values: one(func(s tied.Stats) int64 { return s.Dropped })},
	{Name: "no_spare", Unit: "{copy}",
		Help:   "Spare copies refused because no worker was free when they came, or because they could not claim their tie.",
		Values: one(func(s tied.Stats) int64 { return s.NoSpare })},
	{Name: "unknown_sibling", Unit: "{request}",
		Help:   "Tied requests whose sibling was not among the server's peers (or that came while it had no secret): they ran untied.",
		Values: one(func(s tied.Stats) int64 { return s.UnknownSibling })},
	{Name: "bad_tie", Unit: "{request}",
		Help:   "Requests with malformed tie headers: they ran untied.",
		Values: one(func(s tied.Stats) int64 { return s.BadTie })},
	{Name: "claims.sent", Unit: "{claim}", Label: LabelOutcome,
		Help: "Claims this server sent, by outcome: won (granted, the copy started), lost (refused, the copy was dropped), failed (not answered in time or in error, the copy started anyway).",
		Values: func(s tied.Stats) []Value {
			return []Value{{OutcomeWon, s.ClaimsWon}, {OutcomeLost, s.ClaimsLost}, {OutcomeFailed, s.ClaimsFailed}}
		}},
	{Name: "claims.skipped", Unit: "{copy}",
		Help:   "Tied copies started without claiming: over Config.MaxClaimsInFlight, while their sibling's server was failing claims, or after Close.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsSkipped })},
	{Name: "claims.received", Unit: "{claim}",
		Help:   "Authentic claims received from peers. Of them, claims.early, claims.crossed, claims.repeated and claims.refused count some; the rest dropped a queued copy.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsReceived })},
	{Name: "claims.early", Unit: "{claim}",
		Help:   "Claims received before their copy arrived: the copy is dropped on arrival.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsEarly })},
	{Name: "claims.crossed", Unit: "{claim}",
		Help:   "Claims received that won against this server's own claim in flight.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsCrossed })},
	{Name: "claims.repeated", Unit: "{claim}",
		Help:   "Claims received that named a copy dropped already.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsRepeated })},
	{Name: "claims.refused", Unit: "{claim}",
		Help:   "Claims received that were answered lost: the copy here had started, or won the crossing.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsRefused })},
	{Name: "claims.rejected", Unit: "{claim}",
		Help:   "Claims refused as malformed, forged (bad signature) or stale.",
		Values: one(func(s tied.Stats) int64 { return s.ClaimsRejected })},
	{Name: "claim.latency", Unit: "s", Seconds: true,
		Help:   "Sum of the round trips of the claims answered (claims sent won or lost): what a tied copy waits, holding its worker, before it starts. Divide its rate by that of claims sent won or lost for the recent mean.",
		Values: one(func(s tied.Stats) int64 { return int64(s.ClaimLatencySum) })},
	{Name: "claim.latency.max", Unit: "s", Kind: Gauge, Seconds: true,
		Help:   "The longest round trip of a claim answered since the server was made.",
		Values: one(func(s tied.Stats) int64 { return int64(s.ClaimLatencyMax) })},
}

// Item is one tied client or server given to an exporter, with its name.
type Item[T any] struct {
	Name string
	V    *T
}

// ItemKind names, in the mistakes SortItems reports, the option that gives
// items of a kind and what it takes.
type ItemKind struct {
	Option string // "WithTiedClient"
	Noun   string // "tied client"
	Type   string // "*tied.Client"
	Maker  string // "tied.NewClient"
}

// Kinds of items.
var (
	TiedClientKind = ItemKind{"WithTiedClient", "tied client", "*tied.Client", "tied.NewClient"}
	TiedServerKind = ItemKind{"WithTiedServer", "tied server", "*tied.Server", "tied.NewServer"}
)

// SortItems returns items sorted by name, and every mistake in them,
// sorted by text: an empty or non-UTF-8 name, a nil item, a name given
// twice, the same item under two names (which would count it twice in any
// sum).
func SortItems[T any](k ItemKind, items []Item[T]) ([]Item[T], []error) {
	var errs []error
	names := map[string]int{}
	seen := map[*T]string{}
	var list []Item[T]
	for _, it := range items {
		switch {
		case it.Name == "":
			errs = append(errs, fmt.Errorf("%s(\"\", ...): the name is empty: give each %s a short fixed name such as \"items\"", k.Option, k.Noun))
		case !utf8.ValidString(it.Name):
			errs = append(errs, fmt.Errorf("%s(%q, ...): the name is not valid UTF-8", k.Option, it.Name))
		}
		names[it.Name]++
		if names[it.Name] == 2 {
			errs = append(errs, fmt.Errorf("%s(%q, ...) is given more than once: give each %s its own name", k.Option, it.Name, k.Noun))
		}
		if it.V == nil {
			errs = append(errs, fmt.Errorf("%s(%q, nil): pass the %s made with %s", k.Option, it.Name, k.Type, k.Maker))
			continue
		}
		if other, dup := seen[it.V]; dup && other != it.Name {
			errs = append(errs, fmt.Errorf("%s %q and %q are the same %s: name it once, or it is counted twice", k.Noun, min(it.Name, other), max(it.Name, other), k.Type))
		}
		seen[it.V] = it.Name
		list = append(list, it)
	}
	slices.SortFunc(errs, func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
	slices.SortStableFunc(list, func(a, b Item[T]) int { return cmp.Compare(a.Name, b.Name) })
	return list, errs
}

// Set is what an exporter is given to export, sorted by name.
type Set struct {
	Hedgers     []Named
	TiedClients []Item[tied.Client]
	TiedServers []Item[tied.Server]
}

// SortSet validates and sorts what an exporter is given: hedgers as Sort
// does, except that they may be empty when a tied client or server is
// given, and the tied clients and servers as SortItems does. It returns
// every mistake, ErrNoHedgers first when nothing at all is given.
func SortSet(hedgers map[string]*hedge.Hedger, clients []Item[tied.Client], servers []Item[tied.Server]) (Set, []error) {
	var errs []error
	if len(hedgers) == 0 && len(clients) == 0 && len(servers) == 0 {
		errs = append(errs, ErrNoHedgers)
	}
	var set Set
	var more []error
	set.Hedgers, more = SortAllowEmpty(hedgers)
	errs = append(errs, more...)
	set.TiedClients, more = SortItems(TiedClientKind, clients)
	errs = append(errs, more...)
	set.TiedServers, more = SortItems(TiedServerKind, servers)
	errs = append(errs, more...)
	return set, errs
}

// FanPrefix is the prefix of the series of an operation class's fan-outs
// (hedge.Stats.Fan), labelled by hedger and op.
const FanPrefix = "fanout"

// FanLatency is the name, after FanPrefix, of the fan-outs' latency
// distribution (hedge.FanStats.Latency), which each exporter exports its
// own way (a summary, gauges of quantiles).
const FanLatency = "latency"

// FanLatencyHelp describes the fan-outs' latency.
const FanLatencyHelp = "What callers of hedge.DoFan waited, from the call to its return, within quantile.RelativeError (about 0.8%)."

// ExtraLabels are the values of the "extra" label of the fan-outs counted
// by their extra copies, by index of hedge.FanStats.ExtraCopies.
var ExtraLabels = [8]string{"0", "1", "2", "3-4", "5-8", "9-16", "17-32", "33+"}

// FanSeries are the series of an operation class's FanStats, labelled by
// hedger and op, besides FanLatency.
var FanSeries = []Series[hedge.FanStats]{
	{Name: "requests", Unit: "{request}",
		Help:   "Calls of hedge.DoFan.",
		Values: one(func(s hedge.FanStats) int64 { return s.Requests })},
	{Name: "leaves", Unit: "{request}",
		Help:   "Leaves of the fan-outs; each is also a request of the operation class.",
		Values: one(func(s hedge.FanStats) int64 { return s.Leaves })},
	{Name: "partial", Unit: "{request}",
		Help:   "Fan-outs that returned without the leaves they needed (a leaf or canary failed, the good-enough time came first, or the caller gave up).",
		Values: one(func(s hedge.FanStats) int64 { return s.Partial })},
	{Name: "leaves.cut", Unit: "{request}", Label: "reason",
		Help: "Leaves cancelled by their fan-out, by reason: not_needed (FanOut.Need leaves had answered), late (FanOut.GoodEnough).",
		Values: func(s hedge.FanStats) []Value {
			return []Value{{"not_needed", s.NotNeeded}, {"late", s.Late}}
		}},
	{Name: "extra.copies", Unit: "{copy}",
		Help:   "Extra copies (hedges and retries) the fan-outs' leaves sent. Divide by leaves for the extra load.",
		Values: one(func(s hedge.FanStats) int64 { return s.Extra })},
	{Name: "by.extra", Unit: "{request}", Label: "extra",
		Help: "Fan-outs by how many extra copies their leaves sent: 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33+.",
		Values: func(s hedge.FanStats) []Value {
			out := make([]Value, len(ExtraLabels))
			for i, l := range ExtraLabels {
				out[i] = Value{l, s.ExtraCopies[i]}
			}
			return out
		}},
}
