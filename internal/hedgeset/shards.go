package hedgeset

import (
	"strconv"

	"github.com/tailcut/hedge"
)

// LabelShard is the label of the per-shard series: a shard's index in
// Config.Shards as a decimal string, or ShardOther.
const LabelShard = "shard"

// ShardOther is the shard label of the shards beyond an exporter's cap,
// summed into one series.
const ShardOther = "other"

// DefaultMaxShards is how many shards of an operation class get series
// of their own unless an exporter's option says otherwise; the others
// are summed under ShardOther.
const DefaultMaxShards = 128

// ShardPrefix is the prefix of the series of an operation class's shards
// (hedge.Stats.Shards), labelled by hedger, op and shard.
const ShardPrefix = "shard"

// ShardSeries are the series of a hedge.ShardStats.
var ShardSeries = []Series[hedge.ShardStats]{
	{Name: "leaves", Unit: "{request}",
		Help:   "Requests sent to the shard: hedge.DoFan's leaves and hedge.DoShard's calls.",
		Values: one(func(s hedge.ShardStats) int64 { return s.Leaves })},
	{Name: "hedges.sent", Unit: "{hedge}",
		Help:   "Hedge copies sent to the shard's servers. Divide by leaves for the shard's hedge rate.",
		Values: one(func(s hedge.ShardStats) int64 { return s.Hedges })},
	{Name: "hedge.wins", Unit: "{request}",
		Help:   "The shard's requests won by a hedge copy: how often its copies saved a leaf.",
		Values: one(func(s hedge.ShardStats) int64 { return s.HedgeWins })},
	{Name: "stragglers", Unit: "{request}",
		Help:   "Fan-outs whose last answer, the one that completed FanOut.Need, was the shard's. A shard with far more than its share holds the requests up.",
		Values: one(func(s hedge.ShardStats) int64 { return s.Stragglers })},
	{Name: "failures", Unit: "{request}",
		Help:   "The shard's requests that failed on their own, not those cancelled because their fan-out ended (not needed, late).",
		Values: one(func(s hedge.ShardStats) int64 { return s.Failures })},
}

// ShardRow is one shard's series values with its label.
type ShardRow struct {
	Label string
	S     hedge.ShardStats
}

// ShardRows returns the shards of one operation class as rows of
// series: the first maxShards each under its index, the rest summed
// under ShardOther, so that there are at most maxShards+1 label values
// whatever the number of shards. maxShards 0 sums every shard under
// ShardOther.
func ShardRows(shards []hedge.ShardStats, maxShards int) []ShardRow {
	if len(shards) == 0 {
		return nil
	}
	n := min(len(shards), max(maxShards, 0))
	out := make([]ShardRow, 0, n+1)
	for _, s := range shards[:n] {
		out = append(out, ShardRow{strconv.Itoa(s.Shard), s})
	}
	if len(shards) > n {
		var o hedge.ShardStats
		o.Shard = -1
		for _, s := range shards[n:] {
			o.Leaves += s.Leaves
			o.Hedges += s.Hedges
			o.HedgeWins += s.HedgeWins
			o.Stragglers += s.Stragglers
			o.Failures += s.Failures
		}
		out = append(out, ShardRow{ShardOther, o})
	}
	return out
}

// NotNeededHelp describes the counter of leaves not needed
// (hedge.Stats.NotNeeded).
const NotNeededHelp = "Leaves of hedge.DoFan not sent, or cancelled, because FanOut.Need leaves had answered. They are not failures, and failures leaves them out; fanout leaves cut with reason not_needed counts the cancelled ones alone."
