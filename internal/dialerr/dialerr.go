// Package dialerr tells the errors of a connection that was never made,
// which the transports mark with hedge.NotSent: a copy that failed so
// never reached a server, and the Hedger sends the request to another
// replica at once.
package dialerr

import (
	"errors"
	"net"

	"github.com/tailcut/hedge"
)

// Is reports whether err is the failure to reach a server at all: a dial
// that failed (refused, unreachable, timed out) or a name that did not
// resolve.
func Is(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}

// Mark returns err marked with hedge.NotSent if Is(err), and err as it is
// otherwise.
func Mark(err error) error {
	if Is(err) {
		return hedge.NotSent(err)
	}
	return err
}
