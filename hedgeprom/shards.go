package hedgeprom

import "github.com/tailcut/hedge/internal/hedgeset"

// DefaultMaxShards is how many shards of an operation class get series
// of their own without WithMaxShards.
const DefaultMaxShards = hedgeset.DefaultMaxShards

// WithMaxShards caps the per-shard series (hedge_shard_..._total, from
// hedge.Stats.Shards) at n shards per operation class: shards 0 to n-1
// each under their index, every later shard summed under shard="other".
// That bounds the series at (n+1) x 5 per op, whatever the number of
// shards. The default is DefaultMaxShards; 0 sums every shard under
// "other". A negative n is a mistake that New reports.
func WithMaxShards(n int) Option {
	return func(o *options) {
		o.maxShards = n
		o.maxShardsSet = true
	}
}
