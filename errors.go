package hedge

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }
func (p permanent) Is(target error) bool {
	return target == errPermanent
}

var errPermanent = errors.New("hedge: permanent error")

type pushback struct{ error }

func (p pushback) Unwrap() error { return p.error }

var errPushback = errors.New("hedge: pushback")

func (p pushback) Is(target error) bool { return target == errPushback }

// Pushback marks err as the server asking for less traffic (HTTP 429 or a
// Retry-After, gRPC's grpc-retry-pushback-ms): the call ends at once with
// it, whatever [Config.Retryable] says, the other copies are cancelled, and a
// throttle budget ([NewThrottle]) is debited as for any failure that says
// something about the servers' health. errors.Is and errors.As see through
// the mark to err.
func Pushback(err error) error {
	if err == nil {
		return nil
	}
	return pushback{err}
}

type pushbackAfter struct {
	error
	after time.Duration
}

func (p pushbackAfter) Unwrap() error { return p.error }

// PushbackAfter marks err as a server asking the client to hold off, as
// gRPC's grpc-retry-pushback-ms trailer does (gRFC A6). It applies to a
// copy whose error is retryable ([Config.Retryable]); a final error ends
// the call as usual. A negative after means "no further copy": copies
// already running go on, and the call fails only if they all fail. A
// zero or positive after means "the next copy, not before after": it goes
// then (if the budget and caps allow) instead of at once as after other
// failures, and copies after it follow the delay. Either way a throttle
// budget is debited once for the failure. errors.Is and errors.As see
// through the mark to err.
//
// [Pushback], by contrast, ends the call at once: it suits HTTP's 429, where
// the server refuses the work itself.
func PushbackAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return pushbackAfter{err, after}
}

// DefaultRetryable is the Retryable of a Config that sets none: every
// error is retryable except those marked [Permanent].
func DefaultRetryable(err error) bool { return !errors.Is(err, errPermanent) }

// Permanent marks err as not worth another copy: with the default
// Retryable, a copy failing with it ends the call at once. errors.Is and
// errors.As see through the mark to err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// PanicError is what Do panics with when a copy panicked: the copy's panic
// value and the stack of the goroutine that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

// Error describes the panic with its stack.
func (p *PanicError) Error() string {
	return fmt.Sprintf("hedge: attempt panicked: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value if it is an error.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// CopyError is the failure of one copy, in an [AttemptsError].
type CopyError struct {
	Index int // the copy's Attempt.Index
	Err   error
}

// Error names the copy and its error.
func (e *CopyError) Error() string { return fmt.Sprintf("copy %d: %v", e.Index, e.Err) }

// Unwrap returns the copy's error.
func (e *CopyError) Unwrap() error { return e.Err }

// AttemptsError is returned when more than one copy failed and none
// succeeded. Errs holds each copy's error as a *CopyError, in the order they
// failed (with ReapInBackground, the caller's context error may close the
// list).
type AttemptsError struct {
	Errs []error
}

// Error lists the copies' errors.
func (e *AttemptsError) Error() string {
	parts := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		parts[i] = err.Error()
	}
	return fmt.Sprintf("hedge: all %d copies failed: %s", len(e.Errs), strings.Join(parts, "; "))
}

// Unwrap returns the copies' errors, for errors.Is and errors.As.
func (e *AttemptsError) Unwrap() []error { return e.Errs }
