//go:build linux

package pgtest_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tailcut/hedge/internal/pgtest"
)

func connect(t *testing.T, c *pgtest.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func count(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReplication writes on the primary and reads the rows back on two
// standbys; a standby whose replay is paused keeps its old view until it
// resumes; a stalled standby answers only once released; Stop ends every
// postmaster and removes every directory.
func TestReplication(t *testing.T) {
	pgtest.Need(t)
	r, err := pgtest.StartReplicaSet(pgtest.Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			r.Stop()
		}
	})
	ctx := t.Context()
	p := connect(t, r.Primary)
	if _, err := p.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	s0, s1 := connect(t, r.Standbys[0]), connect(t, r.Standbys[1])
	for i, s := range []*pgx.Conn{s0, s1} {
		if n := count(t, s); n != 10 {
			t.Errorf("standby %d sees %d rows, want 10", i, n)
		}
		var rec bool
		if err := s.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err != nil || !rec {
			t.Errorf("standby %d: pg_is_in_recovery = %v, %v", i, rec, err)
		}
	}
	if _, err := s0.Exec(ctx, "INSERT INTO t VALUES (0)"); err == nil {
		t.Error("a standby accepted a write")
	}

	// Pause standby 0; wait until it is paused for certain (the pause takes
	// effect at the next record, so write until it does).
	if err := r.Standbys[0].PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := r.Standbys[0].ReplayPauseState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == "paused" {
			break
		}
		if _, err := p.Exec(ctx, "SELECT txid_current()"); err != nil {
			t.Fatal(err)
		}
	}
	before := count(t, s0)
	if _, err := p.Exec(ctx, "INSERT INTO t SELECT generate_series(11, 20)"); err != nil {
		t.Fatal(err)
	}
	if err := r.Standbys[1].WaitCaughtUpTo(ctx, r.Primary); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s1); n != 20 {
		t.Errorf("running standby sees %d rows, want 20", n)
	}
	if n := count(t, s0); n != before {
		t.Errorf("paused standby went from %d to %d rows", before, n)
	}
	if err := r.Standbys[0].ResumeReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s0); n != 20 {
		t.Errorf("resumed standby sees %d rows, want 20", n)
	}

	// Stall standby 1: a query sent to it answers only after Release.
	st, err := r.Standbys[1].Stall()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		var n int
		s1.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n)
		done <- n
	}()
	select {
	case n := <-done:
		t.Errorf("a stalled standby answered (%d)", n)
	case <-time.After(50 * time.Millisecond):
	}
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	if n := <-done; n != 20 {
		t.Errorf("released standby answered %d, want 20", n)
	}

	// A stall still held when the set stops is released by Stop.
	if _, err := r.Standbys[0].Stall(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.All() {
		if !c.Exited() || !errors.Is(syscall.Kill(c.Pid, 0), syscall.ESRCH) {
			t.Errorf("pid %d still exists after Stop", c.Pid)
		}
		if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Stop: %v", c.Dir, err)
		}
	}
}

// TestCrashRestart crashes a standby (SIGQUIT, pg_ctl stop -m immediate)
// and restarts it with commits held back (recovery_min_apply_delay): it
// accepts connections again at its consistency point, below the position
// it had replayed before the crash, and serves the older data from there.
func TestCrashRestart(t *testing.T) {
	pgtest.Need(t)
	// No background writes of dirty buffers on the standby, so that its
	// consistency point stays where its restartpoint put it.
	r, err := pgtest.StartReplicaSet(pgtest.Options{Args: []string{"bgwriter_lru_maxpages=0"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	ctx := t.Context()
	s := r.Standbys[0]
	p := connect(t, r.Primary)
	if _, err := p.Exec(ctx, "CREATE TABLE t (id int); CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	// A restartpoint on the standby: crash recovery starts here.
	if _, err := connect(t, s).Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := p.Exec(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	var before string
	if err := connect(t, s).QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&before); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	if !s.Exited() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		t.Fatalf("postmaster %d still runs after Crash", pid)
	}
	if err := s.Restart("recovery_min_apply_delay=1h"); err != nil {
		t.Fatal(err)
	}
	if s.Pid == pid {
		t.Errorf("Pid %d unchanged by Restart", pid)
	}
	c := connect(t, s)
	var behind bool
	if err := c.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() < $1::text::pg_lsn", before).Scan(&behind); err != nil {
		t.Fatal(err)
	}
	if !behind {
		t.Errorf("the restarted standby is not behind %s, its position before the crash", before)
	}
	if got := count(t, c); got >= n {
		t.Errorf("the restarted standby sees %d rows, all %d written before the crash: its replay did not go back", got, n)
	}
}
