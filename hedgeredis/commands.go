package hedgeredis

import "slices"

// readCommands is the allow-list of commands that are hedged across
// replicas, upper-case. Each is flagged "readonly" by Redis 7's COMMAND INFO,
// with read-only ("RO") key specs, and none blocks, keeps state on the
// server between calls, or writes on any argument. The doc comment of the
// package says why each left-out group is left out; TestAllowListIsReadOnly
// checks the flags against a real server.
var readCommands = []string{
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

// readSet maps each upper-case name in readCommands to itself, so that the
// operation class of a call is one of these static strings whatever the
// caller's spelling: the Hedger's classes stay bounded.
var readSet = func() map[string]string {
	m := make(map[string]string, len(readCommands))
	for _, name := range readCommands {
		m[name] = name
	}
	return m
}()

// maxNameLen is longer than every name in readCommands; a longer name is
// not a read.
const maxNameLen = 24

// ReadCommands returns the commands that are hedged, upper-case, in a new
// slice. Every other command is a write: it goes to the primary, once.
func ReadCommands() []string { return slices.Clone(readCommands) }

// IsRead reports whether the command named name (any case) is on the
// allow-list of hedged reads.
func IsRead(name string) bool {
	_, ok := readOp(name)
	return ok
}

// readOp returns the canonical name of a read command, or false. It does
// not allocate.
func readOp[S string | []byte](name S) (string, bool) {
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

// classify returns the operation class of a command given as go-redis
// args (the name in args[0], a string or a []byte), and whether it is a
// read on the allow-list.
func classify(args []any) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	switch v := args[0].(type) {
	case string:
		return readOp(v)
	case []byte:
		return readOp(v)
	}
	return "", false
}
