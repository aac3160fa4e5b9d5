package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tailcut/hedge/internal/testproc"
)

// ReplicaSet is a primary cluster and hot standbys that follow it by
// streaming replication, each a Cluster of its own (directory, port,
// postmaster), all on loopback.
//
// The primary runs with wal_level=replica, max_wal_senders=16 and
// synchronous_commit=on (local flush only: with fsync off it costs
// nothing, and it hands WAL to the senders at commit rather than at the
// next WAL writer round); no standby is synchronous. Each standby is a
// pg_basebackup -R of the primary (standby.signal and primary_conninfo
// written by pg_basebackup), started with hot_standby=on, so that it
// serves reads while it replays.
type ReplicaSet struct {
	// Primary accepts writes.
	Primary *Cluster
	// Standbys are read-only hot standbys of Primary.
	Standbys []*Cluster
}

// All returns the primary followed by the standbys.
func (r *ReplicaSet) All() []*Cluster {
	return append([]*Cluster{r.Primary}, r.Standbys...)
}

// StartReplicated starts a ReplicaSet with the given number of standbys
// and the default Options, and registers its Stop with tb.Cleanup.
// Without PostgreSQL it skips or fails as Need does; if the clusters do
// not start, it fails the test.
func StartReplicated(tb testproc.TB, standbys int) *ReplicaSet {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	r, err := StartReplicaSet(Options{}, standbys)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(func() {
		if err := r.Stop(); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return r
}

// StartReplicaSet starts a primary, then standbys hot standbys of it, one
// after the other, and returns once every standby accepts connections and
// streams from the primary. opt applies to every cluster (its Args after
// the replication settings). On error nothing is left running. The caller
// must Stop the set.
func StartReplicaSet(opt Options, standbys int) (*ReplicaSet, error) {
	if standbys < 0 {
		return nil, fmt.Errorf("pgtest: %d standbys: give zero or more", standbys)
	}
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	popt := opt
	popt.Args = append([]string{"wal_level=replica", "max_wal_senders=16", "max_replication_slots=16", "synchronous_commit=on"}, opt.Args...)
	p, err := StartCluster(popt)
	if err != nil {
		return nil, err
	}
	r := &ReplicaSet{Primary: p}
	sopt := opt
	// A standby needs settings at least as large as the primary's.
	sopt.Args = append([]string{"hot_standby=on", "max_wal_senders=16", "max_replication_slots=16", "wal_receiver_status_interval=1s"}, opt.Args...)
	for range standbys {
		s, err := startStandby(sopt, p)
		if err != nil {
			return nil, errors.Join(err, r.Stop())
		}
		r.Standbys = append(r.Standbys, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opt.StartTimeout)
	defer cancel()
	if err := r.waitStreaming(ctx); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

// startStandby takes a base backup of p, with the recovery settings
// (-R), into a new directory and starts a hot standby on it.
func startStandby(opt Options, p *Cluster) (*Cluster, error) {
	return startWith(opt, func(dir, data string, cred *runAs) error {
		bb := exec.Command(filepath.Join(opt.BinDir, "pg_basebackup"),
			"-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", p.User,
			"-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
		bb.Dir = dir
		bb.SysProcAttr = sysProcAttr(cred)
		if out, err := bb.CombinedOutput(); err != nil {
			return fmt.Errorf("pgtest: pg_basebackup of the primary on port %d: %w; its output:\n%s", p.Port, err, out)
		}
		return nil
	})
}

// waitStreaming waits until the primary has a streaming WAL sender for
// every standby.
func (r *ReplicaSet) waitStreaming(ctx context.Context) error {
	want := len(r.Standbys)
	if want == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, r.Primary.DSN(""))
	if err != nil {
		return fmt.Errorf("pgtest: connecting to the primary: %w", err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n)
		if err != nil {
			return fmt.Errorf("pgtest: waiting for %d standbys to stream: %w", want, err)
		}
		if n >= want {
			return nil
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("pgtest: %d of %d standbys streaming: %w", n, want, err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stop stops the standbys, then the primary (each as Cluster.Stop does),
// and returns every error. It is idempotent.
func (r *ReplicaSet) Stop() error {
	var errs []error
	for _, s := range r.Standbys {
		errs = append(errs, s.Stop())
	}
	errs = append(errs, r.Primary.Stop())
	return errors.Join(errs...)
}

// WaitCaughtUp waits until every standby has replayed the primary's WAL
// up to the primary's insert position when it is called: everything
// committed before the call is then visible on every standby whose replay
// is not paused. It returns ctx's error if that takes too long.
func (r *ReplicaSet) WaitCaughtUp(ctx context.Context) error {
	var target string
	if err := queryOne(ctx, r.Primary, "SELECT pg_current_wal_insert_lsn()::text", &target); err != nil {
		return err
	}
	for _, s := range r.Standbys {
		if err := s.waitReplayed(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitReplayed(ctx context.Context, target string) error {
	conn, err := pgx.Connect(ctx, c.DSN(""))
	if err != nil {
		return fmt.Errorf("pgtest: connecting to the standby on port %d: %w", c.Port, err)
	}
	defer conn.Close(context.Background())
	for {
		var ok bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", target).Scan(&ok)
		if err != nil {
			return fmt.Errorf("pgtest: standby on port %d, replay position: %w", c.Port, err)
		}
		if ok {
			return nil
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return fmt.Errorf("pgtest: standby on port %d has not replayed up to %s: %w", c.Port, target, err)
		}
	}
}

// queryOne runs a one-row, one-column query on a new connection to c.
func queryOne(ctx context.Context, c *Cluster, sql string, dest any) error {
	conn, err := pgx.Connect(ctx, c.DSN(""))
	if err != nil {
		return fmt.Errorf("pgtest: connecting to port %d: %w", c.Port, err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql).Scan(dest); err != nil {
		return fmt.Errorf("pgtest: port %d: %s: %w", c.Port, sql, err)
	}
	return nil
}

// PauseReplay asks the standby to stop replaying WAL
// (pg_wal_replay_pause): it keeps receiving WAL and serving reads, which
// see its data as of the pause, until ResumeReplay. A pause takes effect
// at the next WAL record the standby would replay; PauseReplay does not
// wait for one. It fails on a cluster that is not in recovery.
func (c *Cluster) PauseReplay(ctx context.Context) error {
	var s string
	return queryOne(ctx, c, "SELECT pg_wal_replay_pause()::text", &s)
}

// ResumeReplay undoes PauseReplay (pg_wal_replay_resume).
func (c *Cluster) ResumeReplay(ctx context.Context) error {
	var s string
	return queryOne(ctx, c, "SELECT pg_wal_replay_resume()::text", &s)
}

// ReplayPauseState returns pg_get_wal_replay_pause_state() on a standby:
// "not paused", "pause requested" or "paused".
func (c *Cluster) ReplayPauseState(ctx context.Context) (string, error) {
	var s string
	err := queryOne(ctx, c, "SELECT pg_get_wal_replay_pause_state()", &s)
	return s, err
}

// WaitCaughtUpTo waits until the standby c has replayed primary's WAL up
// to primary's insert position when it is called.
func (c *Cluster) WaitCaughtUpTo(ctx context.Context, primary *Cluster) error {
	var target string
	if err := queryOne(ctx, primary, "SELECT pg_current_wal_insert_lsn()::text", &target); err != nil {
		return err
	}
	return c.waitReplayed(ctx, target)
}
