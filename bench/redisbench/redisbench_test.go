package redisbench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The servers count the reads; a stall is a DEBUG SLEEP of the length
// asked for, on the server asked for, and Stall returns once it is over;
// Close leaves no process behind.
//
// Nothing here races a clock. Whether a read sent while Stall runs reaches
// the server before or after the DEBUG SLEEP depends on the scheduling, so
// the test does not time reads: it checks what the server itself recorded
// (INFO commandstats: DEBUG ran once a stall, for the stall's length, and
// Redis runs one command at a time, so it answered nobody meanwhile), and
// bounds that hold however slow the machine is (Stall cannot return before
// the sleep it waits for has lasted its length).
func TestBackend(t *testing.T) {
	redistest.Need(t)
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

	// Stall server 1 alone, twice, then check what each server ran. The
	// lengths are checked to the millisecond: Redis turns the seconds of
	// DEBUG SLEEP into microseconds through a float, and times commands on
	// the wall clock.
	const d, slack = 30 * time.Millisecond, time.Millisecond
	for range 2 {
		start := time.Now()
		if err := b.Stall(ctx, 1, d); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d-slack {
			t.Errorf("Stall of %v returned after %v, before the sleep was over", d, took)
		}
	}
	for i, want := range []int64{0, 2} {
		calls, usec := debugStats(t, b.Addrs()[i])
		if calls != want {
			t.Errorf("server %d ran DEBUG %d times, want %d", i, calls, want)
		}
		if usec < want*(d-slack).Microseconds() {
			t.Errorf("server %d spent %d µs in %d DEBUG SLEEP of %v", i, usec, calls, d)
		}
	}
	// The stalled server serves again.
	for i := range 10 {
		if err := c.Do(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	// A cancelled context stalls nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Stall(cctx, 0, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Stall with a cancelled context: %v, want context.Canceled", err)
	}
}

// debugStats returns the calls and total microseconds of DEBUG on the
// server at addr, from INFO commandstats.
func debugStats(t *testing.T, addr string) (calls, usec int64) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_debug:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}
