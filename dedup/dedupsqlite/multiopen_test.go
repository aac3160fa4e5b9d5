package dedupsqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge/dedup/dedupsqlite"
)

// openerEnv names the database file a child process of the test binary
// opens (see runOpener).
const openerEnv = "DEDUPSQLITE_TEST_OPEN"

// runOpener is the child process of TestOpenManyProcesses: it says it is
// ready, waits until its stdin is closed (the start signal, given to all
// children at once), opens the file and reports the outcome.
func runOpener(path string) {
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	s, err := dedupsqlite.Open(context.Background(), path, dedupsqlite.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s.Close()
	fmt.Println("opened")
	os.Exit(0)
}

// TestOpenManyProcesses: several processes open one new database file at
// the same moment, as the replicas of a service do when they start
// together; every Open succeeds.
func TestOpenManyProcesses(t *testing.T) {
	const procs, rounds = 6, 8
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "dedup.db")
		var cmds []*exec.Cmd
		var stdins []io.WriteCloser
		var outs []*bufio.Reader
		for range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), openerEnv+"="+path)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, stdins, outs = append(cmds, cmd), append(stdins, in), append(outs, bufio.NewReader(out))
		}
		for i, r := range outs {
			if line, err := r.ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("process %d: %q, %v", i, line, err)
			}
		}
		for _, in := range stdins {
			in.Close()
		}
		var failed []string
		for i, cmd := range cmds {
			rest, _ := io.ReadAll(outs[i])
			if err := cmd.Wait(); err != nil {
				failed = append(failed, strings.TrimSpace(string(rest)))
			}
		}
		if len(failed) > 0 {
			t.Errorf("round %d: %d of %d processes failed to open a new file: %s", round, len(failed), procs, strings.Join(failed, "; "))
		}
	}
}

// TestOpenWaitsForLock: another connection holds the write lock of a new
// file (as a process opening it at the same moment does while it creates
// the table) when Open switches the file to WAL mode. SQLite refuses the
// switch at once, without its busy timeout; Open waits, and succeeds once
// the lock is let go. The bubble's fake clock tells when Open is waiting:
// it is then durably blocked in a pause.
func TestOpenWaitsForLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "dedup.db")
		other, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		ctx := context.Background()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		opened := make(chan error, 1)
		go func() {
			s, err := dedupsqlite.Open(ctx, path, dedupsqlite.Options{})
			if err == nil {
				err = s.Close()
			}
			opened <- err
		}()
		synctest.Wait() // Open has met the lock and pauses, or has given up
		select {
		case err := <-opened:
			t.Fatalf("Open while another connection held the write lock returned at once: %v", err)
		default:
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if err := <-opened; err != nil {
			t.Fatalf("Open after the lock was let go: %v", err)
		}
	})
}
