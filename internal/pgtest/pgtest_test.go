//go:build unix

package pgtest_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartQueryStop(t *testing.T) {
	pgtest.Need(t)
	c, err := pgtest.StartCluster(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), c.DSN(""))
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	var v int
	err = conn.QueryRow(t.Context(), "SELECT 40 + 2").Scan(&v)
	conn.Close(t.Context())
	if err != nil || v != 42 {
		t.Fatalf("SELECT = %d, %v", v, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if !c.Exited() || !errors.Is(syscall.Kill(c.Pid, 0), syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Stop", c.Pid)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s still exists after Stop: %v", c.Dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinaries(t *testing.T) {
	_, err := pgtest.StartCluster(pgtest.Options{BinDir: t.TempDir()})
	if err == nil {
		t.Fatal("a cluster started without binaries")
	}
}
