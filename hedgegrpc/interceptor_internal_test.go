package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge"
)

// failure finds the copies' errors and gRPC statuses with errors.As, so a
// wrapped hedge.AttemptsError or CopyError still yields the last copy's
// status and outputs, and an error that wraps a gRPC status is not turned
// into a context status because it also wraps a context error.
func TestFailureSeesThroughWrapping(t *testing.T) {
	st := status.Error(codes.Unavailable, "copy 1")
	var c call
	c.copies[0].err = errors.New("copy 0")
	c.copies[1].err = st
	c.copies[0].done.Store(true)
	c.copies[1].done.Store(true)

	attempts := &hedge.AttemptsError{Errs: []error{
		&hedge.CopyError{Index: 0, Err: c.copies[0].err},
		&hedge.CopyError{Index: 1, Err: st},
	}}
	for _, err := range []error{attempts, fmt.Errorf("wrapped: %w", attempts)} {
		from, got := c.failure(err)
		if got != st || from != &c.copies[1] {
			t.Errorf("failure(%v) = %v from copy %p, want %v from copy 1 (%p)", err, got, from, st, &c.copies[1])
		}
	}

	both := fmt.Errorf("%w (%w)", st, context.Canceled)
	if _, got := c.failure(both); status.Code(got) != codes.Unavailable {
		t.Errorf("failure(%v) = %v, want its own Unavailable status kept", both, got)
	}
}

// TestPushbackDelay reads grpc-retry-pushback-ms values as gRFC A6 does.
func TestPushbackDelay(t *testing.T) {
	for _, tc := range []struct {
		v    []string
		want time.Duration
	}{
		{[]string{"0"}, 0},
		{[]string{"250"}, 250 * time.Millisecond},
		{[]string{" 7 "}, 7 * time.Millisecond},
		{[]string{"-1"}, -1},
		{[]string{"-0"}, 0},
		{[]string{"soon"}, -1},
		{[]string{"1.5"}, -1},
		{[]string{""}, -1},
		{[]string{"1", "2"}, -1},
		{nil, -1},
		{[]string{"9223372036854775807"}, hedge.Never},
		{[]string{"99999999999999999999"}, hedge.Never},
		{[]string{"-99999999999999999999"}, -1},
	} {
		if got := pushbackDelay(tc.v); got != tc.want {
			t.Errorf("pushbackDelay(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestOneModeSwitchForEveryMethod: the per-method Hedgers of a service
// config share one mode switch, so the kill switch is one store.
func TestOneModeSwitchForEveryMethod(t *testing.T) {
	sc, err := ParseServiceConfig(`{"methodConfig": [
		{"name": [{"service": "a.A"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.010s"}},
		{"name": [{"service": "b.B"}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.020s"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := NewFromServiceConfig(sc, hedge.Config{Mode: hedge.Shadow})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ic.Hedger("/a.A/Get"), ic.Hedger("/b.B/Put")
	if a == nil || b == nil || a == b {
		t.Fatalf("Hedgers %p and %p: want one per method config", a, b)
	}
	if a.Mode() != hedge.Shadow || b.Mode() != hedge.Shadow {
		t.Fatalf("modes %v and %v, want the base Config's Shadow", a.Mode(), b.Mode())
	}
	if err := ic.SetMode(hedge.Off); err != nil {
		t.Fatal(err)
	}
	if a.Mode() != hedge.Off || b.Mode() != hedge.Off {
		t.Fatalf("after SetMode(Off): %v and %v", a.Mode(), b.Mode())
	}
	if err := a.SetMode(hedge.On); err != nil || b.Mode() != hedge.On || ic.Mode() != hedge.On {
		t.Fatalf("a.SetMode(On) left b in %v and the interceptor in %v (%v)", b.Mode(), ic.Mode(), err)
	}
	if a.Budget() == nil || a.Budget() != b.Budget() {
		t.Fatal("the methods do not share one default budget")
	}
}
