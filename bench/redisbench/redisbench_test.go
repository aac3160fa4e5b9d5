package redisbench

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A stall really stops the server: a read sent during it waits for its
// end; the servers count the reads; Close leaves no process behind.
func TestBackend(t *testing.T) {
	if _, err := os.Stat(redistest.DefaultBinary); err != nil {
		t.Skipf("redis-server is missing (%v): install it with `apt-get install -y redis-server`", err)
	}
	b, err := Start(Options{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	pids := b.Pids()
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		for _, p := range pids {
			if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Close: %v", p, err)
			}
		}
	}()
	c, err := b.NewClient(hedge.Config{Replicas: 2, MaxAttempts: 1, Picker: hedge.Picker{Random: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	before := b.Served()
	for i := range 20 {
		if err := c.Do(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	after := b.Served()
	if got := after[0] + after[1] - before[0] - before[1]; got != 20 {
		t.Errorf("servers counted %d reads, want 20", got)
	}
	if st := c.Stats(); st.Requests != 20 || st.Hedges != 0 {
		t.Errorf("stats %+v", st)
	}

	// Stall both servers: a read started during the stall waits.
	const d = 80 * time.Millisecond
	done := make(chan error, 2)
	for i := range 2 {
		go func() { done <- b.Stall(ctx, i, d) }()
	}
	time.Sleep(10 * time.Millisecond)
	t0 := time.Now()
	if err := c.Do(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(t0); waited < d/4 {
		t.Errorf("a read during a stall of %v took %v", d, waited)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
