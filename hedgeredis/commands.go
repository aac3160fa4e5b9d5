package hedgeredis

import "github.com/tailcut/hedge/internal/rediscmd"

// ReadCommands returns the commands that are hedged, upper-case, in a new
// slice. Each is flagged "readonly" by Redis 7's COMMAND INFO, with
// read-only ("RO") key specs, and none blocks, keeps state on the server
// between calls, or writes on any argument; the package doc says why each
// left-out group is left out, and TestAllowListIsReadOnly checks the flags
// against a real server. Every other command is a write: it goes to the
// primary, once.
func ReadCommands() []string { return rediscmd.Reads() }

// IsRead reports whether the command named name (any case) is on the
// allow-list of hedged reads.
func IsRead(name string) bool {
	_, ok := rediscmd.ReadOp(name)
	return ok
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
		return rediscmd.ReadOp(v)
	case []byte:
		return rediscmd.ReadOp(v)
	}
	return "", false
}
