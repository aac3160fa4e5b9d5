package cfgerr

import (
	"errors"
	"testing"
)

func TestError(t *testing.T) {
	sentinel := errors.New("x: invalid configuration")
	h1, h2 := errors.New("hedge: Config.MaxAttempts = -1: use 0 or more"), errors.New("hedge: no delay")
	hedgeErr := errors.Join(h1, errors.Join(h2))
	mine := errors.New("x: pools is empty")
	err := &Error{Errs: append([]error{mine}, FromHedge("x", hedgeErr)...), Hedge: hedgeErr, Sentinel: sentinel}

	want := "x: pools is empty\nx: Config.Hedge.MaxAttempts = -1: use 0 or more\nx: Config.Hedge: no delay"
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for _, target := range []error{sentinel, mine, h1, h2, hedgeErr} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(err, %q) = false", target)
		}
	}
	if errors.Is(err, errors.New("x: invalid configuration")) {
		t.Error("matches another error with the sentinel's text")
	}
	if n := len(err.Unwrap()); n != 4 {
		t.Errorf("Unwrap returns %d errors, want 4", n)
	}
	if n := len((&Error{Errs: []error{mine}}).Unwrap()); n != 1 {
		t.Errorf("Unwrap without Hedge returns %d errors, want 1", n)
	}
}
