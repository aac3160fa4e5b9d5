// Package cfgerr holds the configuration errors shared by the adapter
// packages (hedgepgx, hedgesql, hedgeredis, hedgerueidis): one error
// listing every mistake found, matched by the package's ErrInvalidConfig,
// and hedge.New's mistakes named from the adapter's Config.
package cfgerr

import (
	"errors"
	"slices"
	"strings"
)

// Error is the error of an adapter's constructor: every mistake found,
// one per line.
type Error struct {
	// Errs are the mistakes, in the order they were found.
	Errs []error
	// Hedge is hedge.New's own error, if any, for errors.Is; its
	// mistakes are also among Errs, as FromHedge names them.
	Hedge error
	// Sentinel is the package's ErrInvalidConfig, matched by Is.
	Sentinel error
}

// Error joins the mistakes' messages, one per line.
func (e *Error) Error() string { return errors.Join(e.Errs...).Error() }

// Unwrap returns the mistakes and hedge.New's error, so that errors.Is
// and errors.As see each.
func (e *Error) Unwrap() []error {
	if e.Hedge == nil {
		return e.Errs
	}
	return append(slices.Clone(e.Errs), e.Hedge)
}

// Is reports whether target is the package's ErrInvalidConfig.
func (e *Error) Is(target error) bool { return target == e.Sentinel }

// FromHedge returns each mistake of hedge.New's error err named from the
// adapter's Config, the message starting with prefix ("hedgepgx"):
// "hedgepgx: Config.Hedge.MaxAttempts ...", or "hedgepgx: Config.Hedge:
// ..." for a mistake that names no field. Each wraps its mistake.
func FromHedge(prefix string, err error) []error {
	var out []error
	for _, e := range Leaves(err, nil) {
		out = append(out, &hedgeError{prefix: prefix, err: e})
	}
	return out
}

// hedgeError is a mistake hedge.New found, with its field path told from
// the adapter's Config ("Config.Hedge.MaxAttempts"). It wraps hedge.New's
// error.
type hedgeError struct {
	prefix string
	err    error
}

func (e *hedgeError) Error() string {
	msg := strings.TrimPrefix(e.err.Error(), "hedge: ")
	if rest, ok := strings.CutPrefix(msg, "Config."); ok {
		return e.prefix + ": Config.Hedge." + rest
	}
	return e.prefix + ": Config.Hedge: " + msg
}

func (e *hedgeError) Unwrap() error { return e.err }

// Leaves appends to dst the errors joined in err (errors.Join, at any
// depth: a Delay's Validate joins its own), or err itself.
func Leaves(err error, dst []error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return append(dst, err)
	}
	for _, e := range j.Unwrap() {
		dst = Leaves(e, dst)
	}
	return dst
}
