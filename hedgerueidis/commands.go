package hedgerueidis

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge/internal/rediscmd"
)

// ReadCommands returns the commands that are hedged, upper-case, in a new
// slice: hedgeredis's list (package internal/rediscmd holds it for both).
// Every other command is a write: it goes to the primary, once.
func ReadCommands() []string { return rediscmd.Reads() }

// IsRead reports whether the command named name (any case) is on the
// allow-list of hedged reads.
func IsRead(name string) bool {
	_, ok := rediscmd.ReadOp(name)
	return ok
}

func (c *Client) readArgs(ctx context.Context, op string, keys []string, args ...string) rueidis.RedisResult {
	r := c.newRead()
	r.kind, r.name, r.keys, r.args = argsRead, op, keys, args
	return c.read(ctx, op, r)
}

// The typed reads below send the command of the same name, hedged; each
// copy builds its own command. The result is rueidis's: read it with
// ToString, AsStrSlice, AsStrMap and so on. A missing key is an answer
// (rueidis.IsRedisNil), not a failure: it is not hedged again.

// Get is GET key, hedged.
func (c *Client) Get(ctx context.Context, key string) rueidis.RedisResult {
	r := c.newRead()
	r.kind, r.key = getRead, key
	return c.read(ctx, "GET", r)
}

// MGet is MGET key..., hedged.
func (c *Client) MGet(ctx context.Context, keys ...string) rueidis.RedisResult {
	return c.readArgs(ctx, "MGET", keys)
}

// StrLen is STRLEN key, hedged.
func (c *Client) StrLen(ctx context.Context, key string) rueidis.RedisResult {
	return c.readArgs(ctx, "STRLEN", []string{key})
}

// Exists is EXISTS key..., hedged.
func (c *Client) Exists(ctx context.Context, keys ...string) rueidis.RedisResult {
	return c.readArgs(ctx, "EXISTS", keys)
}

// HGet is HGET key field, hedged.
func (c *Client) HGet(ctx context.Context, key, field string) rueidis.RedisResult {
	return c.readArgs(ctx, "HGET", []string{key}, field)
}

// HMGet is HMGET key field..., hedged.
func (c *Client) HMGet(ctx context.Context, key string, fields ...string) rueidis.RedisResult {
	return c.readArgs(ctx, "HMGET", []string{key}, fields...)
}

// HGetAll is HGETALL key, hedged.
func (c *Client) HGetAll(ctx context.Context, key string) rueidis.RedisResult {
	return c.readArgs(ctx, "HGETALL", []string{key})
}

// LRange is LRANGE key start stop, hedged.
func (c *Client) LRange(ctx context.Context, key string, start, stop int64) rueidis.RedisResult {
	return c.readArgs(ctx, "LRANGE", []string{key}, strconv.FormatInt(start, 10), strconv.FormatInt(stop, 10))
}

// SMembers is SMEMBERS key, hedged.
func (c *Client) SMembers(ctx context.Context, key string) rueidis.RedisResult {
	return c.readArgs(ctx, "SMEMBERS", []string{key})
}

// ZScore is ZSCORE key member, hedged.
func (c *Client) ZScore(ctx context.Context, key, member string) rueidis.RedisResult {
	return c.readArgs(ctx, "ZSCORE", []string{key}, member)
}

// ZRange is ZRANGE key start stop (by rank, without scores), hedged.
func (c *Client) ZRange(ctx context.Context, key string, start, stop int64) rueidis.RedisResult {
	return c.readArgs(ctx, "ZRANGE", []string{key}, strconv.FormatInt(start, 10), strconv.FormatInt(stop, 10))
}

// The typed writes below go to the primary, once, on the caller's
// goroutine, like a write sent with Do: never hedged, never seen by the
// Hedger, whatever the context carries (an idempotency key included), and
// counted in the primary's ReplicaStats.Writes.

// Set is SET key value, with PX when expiration is positive: on the
// primary, once.
func (c *Client) Set(ctx context.Context, key, value string, expiration time.Duration) rueidis.RedisResult {
	b := c.B().Set().Key(key).Value(value)
	if expiration > 0 {
		return c.write(ctx, b.PxMilliseconds(max(expiration.Milliseconds(), 1)).Build())
	}
	return c.write(ctx, b.Build())
}

// SetNX is SET key value NX (with PX when expiration is positive): the
// reply is OK if the key was set, nil if it existed. On the primary, once.
func (c *Client) SetNX(ctx context.Context, key, value string, expiration time.Duration) rueidis.RedisResult {
	b := c.B().Set().Key(key).Value(value).Nx()
	if expiration > 0 {
		return c.write(ctx, b.PxMilliseconds(max(expiration.Milliseconds(), 1)).Build())
	}
	return c.write(ctx, b.Build())
}

// Del is DEL key...: the number of keys removed. On the primary, once.
func (c *Client) Del(ctx context.Context, keys ...string) rueidis.RedisResult {
	return c.write(ctx, c.B().Del().Key(keys...).Build())
}
