package wire

import (
	"net/http"
	"strconv"
)

// AttemptHeader is the HTTP request header that marks a hedge copy:
// "Hedge-Attempt: N", N the copy's hedge.Attempt.Index (1 for the first
// hedge). hedgehttp documents when a copy carries it.
const AttemptHeader = "Hedge-Attempt"

// AttemptKey is the gRPC metadata key of AttemptHeader.
const AttemptKey = "hedge-attempt"

// PreviousAttemptsKey is the gRPC metadata key that counts the copies
// sent before this one, as in gRPC's A6.
const PreviousAttemptsKey = "grpc-previous-rpc-attempts"

// PushbackKey is the gRPC trailer key with which a server asks the client
// to hold off, as in gRPC's A6.
const PushbackKey = "grpc-retry-pushback-ms"

// AttemptIndex returns the hedge attempt index a server sees in a
// request's AttemptHeader: 0 for a primary copy (no header, or a header
// that is not a number of 0 or more), N for the N-th hedge.
func AttemptIndex(r *http.Request) int {
	n, err := strconv.Atoi(r.Header.Get(AttemptHeader))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// IsHedgeCopy reports whether the values of a call's AttemptKey metadata
// mark a hedge copy: a first value that is a number of 1 or more.
func IsHedgeCopy(values []string) bool {
	if len(values) == 0 {
		return false
	}
	n, err := strconv.Atoi(values[0])
	return err == nil && n >= 1
}
