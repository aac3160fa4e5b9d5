// Package dedupredis is a dedup.Store in Redis, through
// github.com/redis/go-redis/v9: for replicated services that share a
// Redis, with leases and TTLs kept by Redis itself.
//
// Each key is one Redis string under Options.Prefix: a state byte ('P'
// pending, 'D' done), the claim's 32-character token, the 32-byte
// fingerprint, and for a done record the encoded outcome. The claim is
// SET key value NX PX lease: atomic in Redis, and a holder that crashes
// or stalls loses the key when Redis expires it. Complete and Release are
// Lua scripts that compare the token and then write or delete, so they are
// fenced and atomic; the outcome is stored with SET ... PX ttl, and Renew
// extends a pending claim with PEXPIRE under the same comparison. A claim
// whose lease ended is gone even if no other copy took over, so its late
// Complete fails with dedup.ErrLostClaim.
//
// Commit queues the handler's own write in the MULTI/EXEC transaction
// that stores the outcome, under WATCH of the claim's key: if the claim
// was lost before EXEC, nothing is written.
//
// Durability is Redis's: without AOF (appendfsync always) a Redis crash
// can lose recent claims and outcomes, and a failover to a replica that
// lagged can too; a copy arriving after such a loss runs again.
package dedupredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge/dedup"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "dedup:"

// tokenLen is the length of dedup.NewToken's tokens; header is the state
// byte, the token and the fingerprint.
const (
	tokenLen = 32
	header   = 1 + tokenLen + 32
)

// Options configures New. The zero value uses the defaults.
type Options struct {
	// Prefix is put in front of every key. Empty means DefaultPrefix.
	Prefix string
}

// Store is a dedup.Store in Redis. It is safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns a Store over rdb. Closing rdb is the caller's business.
func New(rdb redis.UniversalClient, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	return &Store{rdb: rdb, prefix: o.Prefix}
}

var complete = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 2, 33) ~= ARGV[1] then return 0 end
if string.sub(v, 1, 1) == 'D' then return 1 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

var release = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 33) == 'P' .. ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`)

var renew = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 33) == 'P' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

func encode(state byte, token string, fp dedup.Fingerprint, out *dedup.Outcome) []byte {
	b := make([]byte, 0, header+64)
	b = append(b, state)
	b = append(b, token...)
	b = append(b, fp[:]...)
	if out != nil {
		o, _ := out.MarshalBinary()
		b = append(b, o...)
	}
	return b
}

func decode(key string, b []byte) (dedup.Record, error) {
	if len(b) < header || (b[0] != 'P' && b[0] != 'D') {
		return dedup.Record{}, fmt.Errorf("dedupredis: the value of %q is not a record (%d bytes)", key, len(b))
	}
	rec := dedup.Record{Key: key, Token: string(b[1 : 1+tokenLen]), Done: b[0] == 'D'}
	copy(rec.Fingerprint[:], b[1+tokenLen:header])
	if rec.Done {
		if err := rec.Outcome.UnmarshalBinary(b[header:]); err != nil {
			return dedup.Record{}, fmt.Errorf("dedupredis: key %q: %w", key, err)
		}
	}
	return rec, nil
}

func validToken(tok string) bool { return len(tok) == tokenLen }

// ttlArg is a duration in milliseconds for PX, at least 1.
func ttlArg(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// Claim implements dedup.Store.
func (s *Store) Claim(ctx context.Context, key string, fp dedup.Fingerprint, lease time.Duration) (dedup.Claim, error) {
	tok := dedup.NewToken()
	k := s.prefix + key
	for {
		ok, err := s.rdb.SetNX(ctx, k, encode('P', tok, fp, nil), time.Duration(ttlArg(lease))*time.Millisecond).Result()
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("dedupredis: claim: %w", err)
		}
		if ok {
			return dedup.Claim{Key: key, Fingerprint: fp, Won: true, Token: tok}, nil
		}
		b, err := s.rdb.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // expired or released since: claim again
		}
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("dedupredis: claim: %w", err)
		}
		rec, err := decode(key, b)
		if err != nil {
			return dedup.Claim{}, err
		}
		return dedup.Claim{Key: key, Fingerprint: fp, Existing: rec}, nil
	}
}

// Get implements dedup.Store.
func (s *Store) Get(ctx context.Context, key string) (dedup.Record, error) {
	b, err := s.rdb.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return dedup.Record{}, fmt.Errorf("%w (key %q)", dedup.ErrNotFound, key)
	}
	if err != nil {
		return dedup.Record{}, fmt.Errorf("dedupredis: get: %w", err)
	}
	return decode(key, b)
}

// Complete implements dedup.Store.
func (s *Store) Complete(ctx context.Context, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	if !validToken(c.Token) {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	n, err := complete.Run(ctx, s.rdb, []string{s.prefix + c.Key}, c.Token, encode('D', c.Token, c.Fingerprint, &out), ttlArg(ttl)).Int()
	if err != nil {
		return fmt.Errorf("dedupredis: complete: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	return nil
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, c dedup.Claim) error {
	if !validToken(c.Token) {
		return nil
	}
	if err := release.Run(ctx, s.rdb, []string{s.prefix + c.Key}, c.Token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("dedupredis: release: %w", err)
	}
	return nil
}

// Renew implements dedup.Store: a script that compares the token and
// sets the pending key's expiry to lease from now.
func (s *Store) Renew(ctx context.Context, c dedup.Claim, lease time.Duration) error {
	if !validToken(c.Token) {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	n, err := renew.Run(ctx, s.rdb, []string{s.prefix + c.Key}, c.Token, ttlArg(lease)).Int()
	if err != nil {
		return fmt.Errorf("dedupredis: renew: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	return nil
}

// Commit queues fn's commands, the operation's own write, in one
// MULTI/EXEC transaction with storing its outcome, under WATCH of the
// claim's key: if c (from dedup.ClaimFromContext) no longer holds the
// key, or loses it before EXEC, nothing is written and the error matches
// dedup.ErrLostClaim. fn returns the outcome to store; it cannot read the
// results of the commands it queues. If c already completed the key, fn
// does not run and the stored outcome is returned.
func (s *Store) Commit(ctx context.Context, c dedup.Claim, ttl time.Duration, fn func(ctx context.Context, pipe redis.Pipeliner) (dedup.Outcome, error)) (dedup.Outcome, error) {
	k := s.prefix + c.Key
	lost := fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	var result dedup.Outcome
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			return lost
		}
		if err != nil {
			return fmt.Errorf("dedupredis: commit: %w", err)
		}
		rec, err := decode(c.Key, b)
		if err != nil {
			return err
		}
		if rec.Token != c.Token {
			return lost
		}
		if rec.Done {
			result = rec.Outcome
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			out, err := fn(ctx, pipe)
			if err != nil {
				return err
			}
			result = out
			pipe.Set(ctx, k, encode('D', c.Token, c.Fingerprint, &out), time.Duration(ttlArg(ttl))*time.Millisecond)
			return nil
		})
		return err
	}, k)
	if errors.Is(err, redis.TxFailedErr) {
		return dedup.Outcome{}, lost
	}
	if err != nil {
		return dedup.Outcome{}, err
	}
	return result, nil
}
