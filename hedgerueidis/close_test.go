package hedgerueidis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

// inFlight returns the read copies running on every replica.
func inFlight(c *Client) int64 {
	var n int64
	for _, r := range c.Stats().Replicas {
		n += r.InFlight
	}
	return n
}

// TestCloseWaitsForCopies starts a read that both (stalled) servers hold,
// on clients the Client does not own, and closes the Client: Close does
// not return while the read's copy runs, calls made meanwhile fail with
// ErrClosed, and once the caller gives up on the read Close returns with
// nothing in flight.
func TestCloseWaitsForCopies(t *testing.T) {
	servers := redistest.Start(t, 2)
	clients := make([]rueidis.Client, len(servers))
	for i, s := range servers {
		rc, err := rueidis.NewClient(options(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		clients[i] = rc
	}
	c, err := New(clients, Config{Hedge: hedge.Config{Delay: hedge.Fixed(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	seed(t, c, "k", "v")
	for _, s := range servers {
		stall(t, s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readErr := make(chan error, 1)
	go func() { readErr <- c.Get(ctx, "k").Error() }()
	waitFor(t, "the read's copy to start", func() bool { return inFlight(c) == 1 })

	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	waitFor(t, "Close to begin", c.closed.Load)
	if err := c.Get(context.Background(), "k").Error(); !errors.Is(err, ErrClosed) {
		t.Fatalf("GET while closing: %v; want ErrClosed", err)
	}
	if err := c.Set(context.Background(), "k", "w", 0).Error(); !errors.Is(err, ErrClosed) {
		t.Fatalf("SET while closing: %v; want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a copy was still running")
	default:
	}

	cancel()
	if err := <-readErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the read whose caller gave up: %v; want context.Canceled", err)
	}
	<-closed
	if n := inFlight(c); n != 0 {
		t.Fatalf("%d copies in flight after Close", n)
	}
}

// TestCloseDuringReads closes a Client while goroutines read through it
// by every kind of read: each read returns its own value or ErrClosed, a
// read begun after Close returned always ErrClosed, and nothing is left
// in flight.
func TestCloseDuringReads(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, hedgeNow())
	keys, kv := values(8)
	seed(t, c, kv...)
	want := wantOf(kv)

	closed := make(chan struct{})
	isClosed := func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}
	ctx := context.Background()
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := g; ; n++ {
				after := isClosed()
				k := keys[n%len(keys)]
				var got string
				var err error
				switch n % 3 {
				case 0:
					got, err = c.Get(ctx, k).ToString()
				case 1:
					got, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
				case 2:
					var vs []string
					if vs, err = c.MGet(ctx, k).AsStrSlice(); err == nil && len(vs) == 1 {
						got = vs[0]
					}
				}
				switch {
				case errors.Is(err, ErrClosed):
					return
				case after:
					errs <- fmt.Errorf("read %d, begun after Close returned: %q, %v; want ErrClosed", n, got, err)
					return
				case err != nil || got != want[k]:
					errs <- fmt.Errorf("read %d of %s = %q, %v; want %q", n, k, got, err, want[k])
					return
				}
			}
		})
	}
	waitFor(t, "reads", func() bool { return c.Stats().Op("GET").Requests > 100 })
	c.Close()
	close(closed)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := inFlight(c); n != 0 {
		t.Fatalf("%d copies in flight after Close", n)
	}
}

// TestReapInBackground is TestStalledReplica's first half with
// ReapInBackground, where hedge.Do returns before its losers: a read's
// state is then not used again, and every read returns its own value.
func TestReapInBackground(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := hedgeNow()
	cfg.Hedge.ReapInBackground = true
	c := startClient(t, servers, cfg)
	keys, kv := values(10)
	seed(t, c, kv...)
	want := wantOf(kv)
	st := stall(t, servers[0])
	readUntilStalledCopies(t, c, keys, want, false, nil)
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the losers to return", func() bool { return inFlight(c) == 0 })
	if r0 := c.Stats().Replicas[0]; r0.Wins != 0 || r0.Cancelled != r0.Copies {
		t.Fatalf("stalled replica: %d copies, %d cancelled, %d wins; want every copy cancelled, no win", r0.Copies, r0.Cancelled, r0.Wins)
	}
}
