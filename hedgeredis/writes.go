package hedgeredis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The typed writes below send the same command as the go-redis method of
// the same name, through the primary's *redis.Client, once, on the
// caller's goroutine, exactly like a write sent with Do: never hedged,
// never sent to another replica, never seen by the Hedger, and counted in
// the primary's ReplicaStats.Writes. That holds whatever the context
// carries, an idempotency key (hedge.WithIdempotencyKey) included: a hedge
// of a write would have nowhere to go (see "Writes" in the package doc).

// Set is SET key value, with EX or PX when expiration is positive and
// KEEPTTL when it is redis.KeepTTL, like redis.Client.Set: on the primary,
// once.
func (c *Client) Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd {
	return write(c,
		func(rc *redis.Client) *redis.StatusCmd { return rc.Set(ctx, key, value, expiration) },
		func() *redis.StatusCmd { return redis.NewStatusCmd(ctx, "set", key, value) })
}

// SetNX is SET key value NX (with an expiration as in Set), like
// redis.Client.SetNX: true if the key was set, false if it already
// existed. On the primary, once.
func (c *Client) SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd {
	return write(c,
		func(rc *redis.Client) *redis.BoolCmd { return rc.SetNX(ctx, key, value, expiration) },
		func() *redis.BoolCmd { return redis.NewBoolCmd(ctx, "set", key, value, "nx") })
}

// Del is DEL key..., like redis.Client.Del: the number of keys removed.
// On the primary, once.
func (c *Client) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return write(c,
		func(rc *redis.Client) *redis.IntCmd { return rc.Del(ctx, keys...) },
		func() *redis.IntCmd { return redis.NewIntCmd(ctx, keyArgs("del", keys)...) })
}

// write sends one command to the primary, once, on the caller's
// goroutine, and counts it in the primary's ReplicaStats.Writes: send
// issues it on the primary's client. After Close it sends nothing and
// returns the command made by closed, failed with ErrClosed.
func write[C redis.Cmder](c *Client, send func(*redis.Client) C, closed func() C) C {
	if !c.gate.Enter() {
		cmd := closed()
		cmd.SetErr(ErrClosed)
		return cmd
	}
	defer c.gate.Leave()
	c.reps[c.primary].Writes.Add(1)
	return send(c.clients[c.primary])
}
