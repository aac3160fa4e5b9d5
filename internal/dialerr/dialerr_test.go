package dialerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/tailcut/hedge"
)

// TestMark dials a loopback port nobody listens on, and checks that the
// error, wrapped as a client would wrap it, is marked; and that errors from
// a connection that was made are not.
func TestMark(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	_, derr := (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	if derr == nil {
		t.Skip("a closed loopback port accepted a connection")
	}
	wrapped := fmt.Errorf("client: %w", derr)
	if got := Mark(wrapped); !errors.Is(got, hedge.ErrNotSent) || !errors.Is(got, derr) {
		t.Errorf("Mark(%v) = %v: want it to match hedge.ErrNotSent and the dial error", wrapped, got)
	}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, e := range []error{read, errors.New("EOF"), context.Canceled} {
		if got := Mark(e); errors.Is(got, hedge.ErrNotSent) {
			t.Errorf("Mark(%v) marked an error of a connection that was made", e)
		}
	}
	dns := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "replica.invalid", IsNotFound: true}}
	if !Is(fmt.Errorf("client: %w", dns)) || !Is(dns.Err) {
		t.Errorf("a name that did not resolve (%v) is not taken for a dial error", dns)
	}
}
