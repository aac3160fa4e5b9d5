package deduppg_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/deduppg"
	"github.com/tailcut/hedge/internal/pgtest"
	"github.com/tailcut/hedge/internal/storetest"
)

// shared is the one cluster of this test binary, started by the first
// test that needs it and stopped by TestMain.
var shared struct {
	once sync.Once
	c    *pgtest.Cluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func cluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	pgtest.Need(t)
	shared.once.Do(func() { shared.c, shared.err = pgtest.StartCluster(pgtest.Options{}) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

var tables atomic.Int64

// open returns a store on a table of its own.
func open(t *testing.T, o deduppg.Options) *deduppg.Store {
	t.Helper()
	c := cluster(t)
	if o.Table == "" {
		o.Table = fmt.Sprintf("dedup_%d", tables.Add(1))
	}
	s, err := deduppg.Open(t.Context(), c.DSN(""), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) dedup.Store { return open(t, deduppg.Options{}) })
}

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), cluster(t).DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestDoOnce: many concurrent Do calls for one key run the write once and
// all return its outcome.
func TestDoOnce(t *testing.T) {
	s := open(t, deduppg.Options{MaxConns: 16})
	conn := connect(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE balance_do (key text, amount int)"); err != nil {
		t.Fatal(err)
	}
	fp := dedup.FingerprintOf([]byte("credit 5"))
	var runs atomic.Int64
	const n = 16
	var wg sync.WaitGroup
	outs := make([]string, n)
	replays := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			out, rep, err := s.Do(t.Context(), "k", fp, func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
				runs.Add(1)
				if _, err := tx.Exec(ctx, "INSERT INTO balance_do VALUES ('k', 5)"); err != nil {
					return dedup.Outcome{}, err
				}
				return dedup.Outcome{Status: 201, Body: []byte("credited")}, nil
			})
			outs[i], replays[i], errs[i] = string(out.Body), rep, err
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil || outs[i] != "credited" {
			t.Fatalf("call %d: %q, %v", i, outs[i], errs[i])
		}
		if !replays[i] {
			fresh++
		}
	}
	var rows int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM balance_do").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || fresh != 1 || runs.Load() != 1 {
		t.Fatalf("%d rows, %d fresh outcomes, %d runs; want 1 each", rows, fresh, runs.Load())
	}
	// Another request under the same key is refused.
	_, _, err := s.Do(t.Context(), "k", dedup.FingerprintOf([]byte("credit 6")), nil)
	if !errors.Is(err, dedup.ErrFingerprintMismatch) {
		t.Fatalf("other fingerprint: %v", err)
	}
}

// TestDoRollsBack: a write that fails commits neither the write nor the
// claim; the next call runs.
func TestDoRollsBack(t *testing.T) {
	s := open(t, deduppg.Options{})
	conn := connect(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE balance_rb (key text)"); err != nil {
		t.Fatal(err)
	}
	fp := dedup.FingerprintOf()
	boom := errors.New("boom")
	_, _, err := s.Do(t.Context(), "k", fp, func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
		tx.Exec(ctx, "INSERT INTO balance_rb VALUES ('k')")
		return dedup.Outcome{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	out, rep, err := s.Do(t.Context(), "k", fp, func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
		_, err := tx.Exec(ctx, "INSERT INTO balance_rb VALUES ('k')")
		return dedup.Outcome{Status: 200}, err
	})
	if err != nil || rep || out.Status != 200 {
		t.Fatal(out, rep, err)
	}
	var rows int
	conn.QueryRow(t.Context(), "SELECT count(*) FROM balance_rb").Scan(&rows)
	if rows != 1 {
		t.Fatalf("%d rows, want 1", rows)
	}
}

// TestCommitFenced: the middleware's lease-based claim, with the write
// committed by Commit; a holder whose lease ended and was taken over
// cannot commit.
func TestCommitFenced(t *testing.T) {
	s := open(t, deduppg.Options{})
	conn := connect(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE orders_cf (key text, line text)"); err != nil {
		t.Fatal(err)
	}
	fp := dedup.FingerprintOf()
	write := func(line string) func(context.Context, pgx.Tx) (dedup.Outcome, error) {
		return func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
			_, err := tx.Exec(ctx, "INSERT INTO orders_cf VALUES ('k', $1)", line)
			return dedup.Outcome{Status: 201, Body: []byte(line)}, err
		}
	}
	c, err := s.Claim(t.Context(), "k", fp, 20*time.Millisecond)
	if err != nil || !c.Won {
		t.Fatal(c, err)
	}
	c2 := storetest.ClaimWhenFree(t, s, "k", fp, time.Hour)

	if _, err := s.Commit(t.Context(), c, time.Hour, write("late")); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("late holder: %v", err)
	}
	if out, err := s.Commit(t.Context(), c2, time.Hour, write("b")); err != nil || string(out.Body) != "b" {
		t.Fatal(out, err)
	}
	if out, err := s.Commit(t.Context(), c2, time.Hour, write("again")); err != nil || string(out.Body) != "b" {
		t.Fatal(out, err)
	}
	var rows int
	conn.QueryRow(t.Context(), "SELECT count(*) FROM orders_cf").Scan(&rows)
	if rows != 1 {
		t.Fatalf("%d rows, want 1", rows)
	}
	// Do sees a live lease-based claim as in progress.
	if _, err := s.Claim(t.Context(), "held", fp, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Do(t.Context(), "held", fp, write("x")); !errors.Is(err, dedup.ErrInProgress) {
		t.Fatalf("Do on a held key: %v", err)
	}
}

func TestStoreDown(t *testing.T) {
	// A store whose server is gone fails; the middleware turns that into
	// 503 (package dedup's tests).
	c, err := pgtest.StartCluster(pgtest.Options{})
	if err != nil {
		pgtest.Need(t)
		t.Fatal(err)
	}
	s, err := deduppg.Open(t.Context(), c.DSN(""), deduppg.Options{})
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	defer s.Close()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), "k", dedup.FingerprintOf(), time.Second); err == nil {
		t.Fatal("Claim on a stopped server succeeded")
	}
}

func TestBadTable(t *testing.T) {
	if _, err := deduppg.New(t.Context(), nil, deduppg.Options{Table: "a;b"}); err == nil {
		t.Fatal("a bad table name was accepted")
	}
}

// TestStaleConnections: the server ends every session of the store's pool
// while they are idle, as a restart of PostgreSQL does; the next calls,
// one per connection that was pooled, still succeed on new connections.
func TestStaleConnections(t *testing.T) {
	c := cluster(t)
	const conns = 4
	name := fmt.Sprintf("dedup_stale_%d", tables.Add(1))
	s, err := deduppg.Open(t.Context(), c.DSN("")+" application_name="+name, deduppg.Options{Table: name, MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fp := dedup.FingerprintOf()
	// Hold every connection of the pool at once, so that the pool keeps
	// conns idle connections afterwards.
	var entered, wg sync.WaitGroup
	release := make(chan struct{})
	entered.Add(conns)
	for i := range conns {
		cl, err := s.Claim(t.Context(), fmt.Sprint("held-", i), fp, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_, err := s.Commit(t.Context(), cl, time.Hour, func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
				entered.Done()
				<-release
				return dedup.Outcome{Status: 200}, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	entered.Wait()
	close(release)
	wg.Wait()

	admin := connect(t)
	count := func() (n int) {
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != conns {
		t.Fatalf("%d pooled sessions, want %d", n, conns)
	}
	if _, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", name); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sessions did not end within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range conns + 1 {
		if _, err := s.Claim(t.Context(), fmt.Sprint("after-", i), fp, time.Hour); err != nil {
			t.Fatalf("claim %d after the sessions ended: %v", i, err)
		}
	}
}
