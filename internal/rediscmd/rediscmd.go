// Package rediscmd holds what the Redis transports (hedgeredis over
// go-redis, hedgerueidis over rueidis) share about commands: the
// allow-list of reads that may be hedged, and its allocation-free lookup.
// It imports no Redis client.
// It also tells a cluster's redirections apart (Redirect).
package rediscmd

import (
	"errors"
	"slices"
	"strings"

	"github.com/tailcut/hedge"
)

// reads is the allow-list of commands that are hedged across replicas,
// upper-case. Each is flagged "readonly" by Redis 7's COMMAND INFO,
// with read-only ("RO") key specs, and none blocks, keeps state on the
// server between calls, or writes on any argument. hedgeredis's package doc says
// why each left-out group is left out; its TestAllowListIsReadOnly checks the
// flags against a real server.
var reads = []string{
	// keys
	"EXISTS", "TYPE", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME",
	// strings and bitmaps
	"GET", "MGET", "STRLEN", "GETRANGE", "GETBIT", "BITCOUNT", "BITPOS",
	// hashes
	"HGET", "HMGET", "HGETALL", "HEXISTS", "HLEN", "HKEYS", "HVALS", "HSTRLEN",
	// lists
	"LRANGE", "LLEN", "LINDEX", "LPOS",
	// sets
	"SMEMBERS", "SISMEMBER", "SMISMEMBER", "SCARD",
	// sorted sets
	"ZRANGE", "ZRANGEBYSCORE", "ZRANGEBYLEX", "ZREVRANGE", "ZREVRANGEBYSCORE",
	"ZSCORE", "ZMSCORE", "ZCARD", "ZCOUNT", "ZLEXCOUNT", "ZRANK", "ZREVRANK",
	// streams
	"XRANGE", "XREVRANGE", "XLEN",
	// geo
	"GEOPOS", "GEODIST", "GEOHASH", "GEOSEARCH",
}

// readSet maps each upper-case name in reads to itself, so that the
// operation class of a call is one of these static strings whatever the
// caller's spelling: the Hedger's classes stay bounded.
var readSet = func() map[string]string {
	m := make(map[string]string, len(reads))
	for _, name := range reads {
		m[name] = name
	}
	return m
}()

// maxNameLen is longer than every name in reads; a longer name is
// not a read.
const maxNameLen = 24

// Reads returns the commands that are hedged, upper-case, in a new slice.
// Every other command is a write: it goes to the primary, once.
func Reads() []string { return slices.Clone(reads) }

// ReadOp returns the canonical (upper-case, static) name of a read
// command named name in any case, or false. It does not allocate.
func ReadOp[S string | []byte](name S) (string, bool) {
	if len(name) == 0 || len(name) > maxNameLen {
		return "", false
	}
	var buf [maxNameLen]byte
	for i := 0; i < len(name); i++ {
		b := name[i]
		if 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		buf[i] = b
	}
	op, ok := readSet[string(buf[:len(name)])]
	return op, ok
}

// Redirect reports whether err is, or wraps only, replies that is calls
// MOVED or ASK redirections: a cluster node no longer serves the key's
// slot. A hedged call's error (hedge.AttemptsError) is a redirection when
// every copy's is. is reads one reply's error the way its client types
// it.
func Redirect(err error, is func(error) bool) bool {
	var ae *hedge.AttemptsError
	if errors.As(err, &ae) && len(ae.Errs) > 0 {
		for _, e := range ae.Errs {
			if !Redirect(e, is) {
				return false
			}
		}
		return true
	}
	return is(err)
}

// IsRedirectMessage reports whether a Redis error reply's text is a MOVED
// or ASK redirection.
func IsRedirectMessage(msg string) bool {
	return strings.HasPrefix(msg, "MOVED") || strings.HasPrefix(msg, "ASK")
}
