package rediscmd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tailcut/hedge"
)

func TestReadOp(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   string
		read bool
	}{
		{"get", "GET", true},
		{"GeT", "GET", true},
		{"ZRANGE", "ZRANGE", true},
		{"set", "", false},
		{"pfcount", "", false},
		{"scan", "", false},
		{"get-but-much-longer-than-any-command", "", false},
		{"", "", false},
	} {
		if op, read := ReadOp(tc.name); op != tc.op || read != tc.read {
			t.Errorf("ReadOp(%q) = %q, %v; want %q, %v", tc.name, op, read, tc.op, tc.read)
		}
		if op, read := ReadOp([]byte(tc.name)); op != tc.op || read != tc.read {
			t.Errorf("ReadOp([]byte(%q)) = %q, %v; want %q, %v", tc.name, op, read, tc.op, tc.read)
		}
	}
	for _, name := range reads {
		if len(name) >= maxNameLen {
			t.Errorf("%s is longer than maxNameLen", name)
		}
	}
	got := Reads()
	got[0] = "SET"
	if _, ok := ReadOp("SET"); ok {
		t.Errorf("Reads returned the allow-list itself")
	}
}

func TestReadOpDoesNotAllocate(t *testing.T) {
	name := []byte("hgetall")
	if n := testing.AllocsPerRun(100, func() { ReadOp(name) }); n != 0 {
		t.Errorf("ReadOp allocates %v times", n)
	}
}

func TestRedirect(t *testing.T) {
	moved, other := errors.New("MOVED 3999 127.0.0.1:6381"), errors.New("ERR unknown")
	// is reads a reply's error through its wrapping, as a client's type
	// check would.
	is := func(err error) bool {
		for ; err != nil; err = errors.Unwrap(err) {
			if IsRedirectMessage(err.Error()) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"MOVED", moved, true},
		{"ASK", errors.New("ASK 3999 127.0.0.1:6381"), true},
		{"another error", other, false},
		{"every copy redirected", &hedge.AttemptsError{Errs: []error{moved, fmt.Errorf("copy: %w", moved)}}, true},
		{"one copy not redirected", &hedge.AttemptsError{Errs: []error{moved, other}}, false},
		{"wrapped", fmt.Errorf("read: %w", &hedge.AttemptsError{Errs: []error{moved}}), true},
	} {
		if got := Redirect(c.err, is); got != c.want {
			t.Errorf("%s: Redirect = %v; want %v", c.name, got, c.want)
		}
	}
}
