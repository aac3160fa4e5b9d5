package pgtest

import (
	"fmt"
	"os"
	"sync"

	"github.com/tailcut/hedge/internal/testproc"
)

// Shared is a ReplicaSet that a package's tests share, started by the
// first test that asks for it (Get) and stopped by the package's
// TestMain (Run): starting one takes seconds. The zero Shared is ready
// to use.
type Shared struct {
	once sync.Once
	set  *ReplicaSet
	err  error
}

// Get returns the shared set of a primary and the given number of
// standbys, starting it with the default Options on the first call and
// then running init on it, if init is not nil (to create tables, say).
// Later calls return the same set, whatever their arguments. Without
// PostgreSQL it skips or fails tb as Need does; if the set did not start,
// or init failed, it fails tb.
func (s *Shared) Get(tb testproc.TB, standbys int, init func(*ReplicaSet) error) *ReplicaSet {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	s.once.Do(func() {
		s.set, s.err = StartReplicaSet(Options{}, standbys)
		if s.err == nil && init != nil {
			s.err = init(s.set)
		}
	})
	if s.err != nil {
		tb.Fatalf("%v", s.err)
		return nil
	}
	return s.set
}

// Run runs a package's tests (m.Run, from TestMain), stops the set if a
// test started it, and then, if all went well and check is not nil,
// calls check (a goroutine leak check, say). It prints each error to
// standard error and returns the exit code for os.Exit.
func (s *Shared) Run(m interface{ Run() int }, check func() error) int {
	code := m.Run()
	if s.set != nil {
		if err := s.set.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 && check != nil {
		if err := check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}
