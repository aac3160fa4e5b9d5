package hedgeredis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The typed reads below send the same command as the go-redis method of
// the same name, hedged across the replicas; the operation class is the
// upper-case command name, shared with Do. A missing key is an answer
// (redis.Nil), not a failure: it is not hedged again.

// Get is GET key, hedged.
func (c *Client) Get(ctx context.Context, key string) *redis.StringCmd {
	return read(ctx, c, "GET", redis.NewStringCmd, "get", key)
}

// MGet is MGET key..., hedged.
func (c *Client) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	return read(ctx, c, "MGET", redis.NewSliceCmd, keyArgs("mget", keys)...)
}

// StrLen is STRLEN key, hedged.
func (c *Client) StrLen(ctx context.Context, key string) *redis.IntCmd {
	return read(ctx, c, "STRLEN", redis.NewIntCmd, "strlen", key)
}

// GetRange is GETRANGE key start end, hedged.
func (c *Client) GetRange(ctx context.Context, key string, start, end int64) *redis.StringCmd {
	return read(ctx, c, "GETRANGE", redis.NewStringCmd, "getrange", key, start, end)
}

// Exists is EXISTS key..., hedged.
func (c *Client) Exists(ctx context.Context, keys ...string) *redis.IntCmd {
	return read(ctx, c, "EXISTS", redis.NewIntCmd, keyArgs("exists", keys)...)
}

// TTL is TTL key, hedged.
func (c *Client) TTL(ctx context.Context, key string) *redis.DurationCmd {
	return read(ctx, c, "TTL", newSecondsCmd, "ttl", key)
}

func newSecondsCmd(ctx context.Context, args ...any) *redis.DurationCmd {
	return redis.NewDurationCmd(ctx, time.Second, args...)
}

// Type is TYPE key, hedged.
func (c *Client) Type(ctx context.Context, key string) *redis.StatusCmd {
	return read(ctx, c, "TYPE", redis.NewStatusCmd, "type", key)
}

// HGet is HGET key field, hedged.
func (c *Client) HGet(ctx context.Context, key, field string) *redis.StringCmd {
	return read(ctx, c, "HGET", redis.NewStringCmd, "hget", key, field)
}

// HMGet is HMGET key field..., hedged.
func (c *Client) HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd {
	args := make([]any, 2+len(fields))
	args[0], args[1] = "hmget", key
	for i, f := range fields {
		args[2+i] = f
	}
	return read(ctx, c, "HMGET", redis.NewSliceCmd, args...)
}

// HGetAll is HGETALL key, hedged.
func (c *Client) HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd {
	return read(ctx, c, "HGETALL", redis.NewMapStringStringCmd, "hgetall", key)
}

// HExists is HEXISTS key field, hedged.
func (c *Client) HExists(ctx context.Context, key, field string) *redis.BoolCmd {
	return read(ctx, c, "HEXISTS", redis.NewBoolCmd, "hexists", key, field)
}

// HLen is HLEN key, hedged.
func (c *Client) HLen(ctx context.Context, key string) *redis.IntCmd {
	return read(ctx, c, "HLEN", redis.NewIntCmd, "hlen", key)
}

// LRange is LRANGE key start stop, hedged.
func (c *Client) LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd {
	return read(ctx, c, "LRANGE", redis.NewStringSliceCmd, "lrange", key, start, stop)
}

// LLen is LLEN key, hedged.
func (c *Client) LLen(ctx context.Context, key string) *redis.IntCmd {
	return read(ctx, c, "LLEN", redis.NewIntCmd, "llen", key)
}

// LIndex is LINDEX key index, hedged.
func (c *Client) LIndex(ctx context.Context, key string, index int64) *redis.StringCmd {
	return read(ctx, c, "LINDEX", redis.NewStringCmd, "lindex", key, index)
}

// SMembers is SMEMBERS key, hedged.
func (c *Client) SMembers(ctx context.Context, key string) *redis.StringSliceCmd {
	return read(ctx, c, "SMEMBERS", redis.NewStringSliceCmd, "smembers", key)
}

// SIsMember is SISMEMBER key member, hedged.
func (c *Client) SIsMember(ctx context.Context, key string, member any) *redis.BoolCmd {
	return read(ctx, c, "SISMEMBER", redis.NewBoolCmd, "sismember", key, member)
}

// SCard is SCARD key, hedged.
func (c *Client) SCard(ctx context.Context, key string) *redis.IntCmd {
	return read(ctx, c, "SCARD", redis.NewIntCmd, "scard", key)
}

// ZRange is ZRANGE key start stop (by rank, without scores), hedged.
func (c *Client) ZRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd {
	return read(ctx, c, "ZRANGE", redis.NewStringSliceCmd, "zrange", key, start, stop)
}

// ZScore is ZSCORE key member, hedged.
func (c *Client) ZScore(ctx context.Context, key, member string) *redis.FloatCmd {
	return read(ctx, c, "ZSCORE", redis.NewFloatCmd, "zscore", key, member)
}

// ZCard is ZCARD key, hedged.
func (c *Client) ZCard(ctx context.Context, key string) *redis.IntCmd {
	return read(ctx, c, "ZCARD", redis.NewIntCmd, "zcard", key)
}

// ZRank is ZRANK key member, hedged.
func (c *Client) ZRank(ctx context.Context, key, member string) *redis.IntCmd {
	return read(ctx, c, "ZRANK", redis.NewIntCmd, "zrank", key, member)
}

// keyArgs returns [name, keys...] as go-redis args.
func keyArgs(name string, keys []string) []any {
	args := make([]any, 1+len(keys))
	args[0] = name
	for i, k := range keys {
		args[1+i] = k
	}
	return args
}
