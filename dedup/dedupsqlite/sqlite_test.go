package dedupsqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/dedupsqlite"
	"github.com/tailcut/hedge/internal/storetest"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(openerEnv); path != "" {
		runOpener(path)
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *dedupsqlite.Store {
	t.Helper()
	s, err := dedupsqlite.Open(t.Context(), path, dedupsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) dedup.Store {
		return open(t, filepath.Join(t.TempDir(), "dedup.db"))
	})
}

func TestWAL(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "dedup.db"))
	var mode string
	if err := s.DB().QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
}

// TestSurvivesReopen: a record written before the store is closed is there
// after the file is opened again, as after a restart of the service.
func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dedup.db")
	s, err := dedupsqlite.Open(t.Context(), path, dedupsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fp := dedup.FingerprintOf([]byte("POST /orders"))
	done, _ := s.Claim(t.Context(), "done", fp, time.Hour)
	out := dedup.Outcome{Status: 201, Body: []byte("order 1")}
	if err := s.Complete(t.Context(), done, out, time.Hour); err != nil {
		t.Fatal(err)
	}
	pending, _ := s.Claim(t.Context(), "pending", fp, time.Hour)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	rec, err := s2.Get(t.Context(), "done")
	if err != nil || string(rec.Outcome.Body) != "order 1" || rec.Outcome.Status != 201 {
		t.Fatalf("after reopening: %+v, %v", rec, err)
	}
	c, err := s2.Claim(t.Context(), "pending", fp, time.Hour)
	if err != nil || c.Won || c.Existing.Token != pending.Token {
		t.Fatalf("a claim made before the restart does not hold after it: %+v, %v", c, err)
	}
	// The holder from before the restart may still complete it.
	if err := s2.Complete(t.Context(), pending, out, time.Hour); err != nil {
		t.Fatal(err)
	}
}

func TestCommit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "dedup.db"))
	ctx := t.Context()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE orders (key TEXT, line TEXT)"); err != nil {
		t.Fatal(err)
	}
	fp := dedup.FingerprintOf([]byte("x"))
	write := func(line string) func(context.Context, *sql.Tx) (dedup.Outcome, error) {
		return func(ctx context.Context, tx *sql.Tx) (dedup.Outcome, error) {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES ('k', ?)", line); err != nil {
				return dedup.Outcome{}, err
			}
			return dedup.Outcome{Status: 201, Body: []byte(line)}, nil
		}
	}
	count := func() (n int) {
		if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A write that fails commits nothing, and the claim still holds.
	c, _ := s.Claim(ctx, "k", fp, 50*time.Millisecond)
	boom := errors.New("boom")
	if _, err := s.Commit(ctx, c, time.Hour, func(ctx context.Context, tx *sql.Tx) (dedup.Outcome, error) {
		write("a")(ctx, tx)
		return dedup.Outcome{}, boom
	}); !errors.Is(err, boom) || count() != 0 {
		t.Fatalf("failed write: %v, %d rows", err, count())
	}
	// The lease ends and another copy takes over: the old holder's write
	// is refused, the new one's commits.
	c2 := storetest.ClaimWhenFree(t, s, "k", fp, time.Hour)

	if _, err := s.Commit(ctx, c, time.Hour, write("late")); !errors.Is(err, dedup.ErrLostClaim) {
		t.Fatalf("late holder: %v", err)
	}
	out, err := s.Commit(ctx, c2, time.Hour, write("b"))
	if err != nil || string(out.Body) != "b" {
		t.Fatal(out, err)
	}
	// Committing again returns the stored outcome without writing.
	out, err = s.Commit(ctx, c2, time.Hour, write("again"))
	if err != nil || string(out.Body) != "b" || count() != 1 {
		t.Fatalf("second commit: %+v, %v, %d rows", out, err, count())
	}
	if err := s.Complete(ctx, c2, dedup.Outcome{Status: 500}, time.Hour); err != nil {
		t.Fatalf("the middleware's Complete after Commit: %v", err)
	}
	if rec, _ := s.Get(ctx, "k"); string(rec.Outcome.Body) != "b" {
		t.Fatalf("stored outcome %q", rec.Outcome.Body)
	}
}

func TestPurge(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "dedup.db"))
	ctx := t.Context()
	fp := dedup.FingerprintOf()
	for i := range 5 {
		if _, err := s.Claim(ctx, fmt.Sprint(i), fp, time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	s.Claim(ctx, "live", fp, time.Hour)
	time.Sleep(time.Millisecond) // longer than the microsecond leases
	n, err := s.Purge(ctx)
	if err != nil || n != 5 {
		t.Fatalf("Purge = %d, %v; want 5", n, err)
	}
	if _, err := s.Get(ctx, "live"); err != nil {
		t.Fatal(err)
	}
}

func TestBadTable(t *testing.T) {
	_, err := dedupsqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), dedupsqlite.Options{Table: "x; DROP"})
	if err == nil {
		t.Fatal("a bad table name was accepted")
	}
}
