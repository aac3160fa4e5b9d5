package tied

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// The queue is bounded: with the worker busy and MaxQueue waiting, the
// next request is refused with 503 and RefusedHeader; with no queue the
// second request is.
func TestQueueBound(t *testing.T) {
	for _, c := range []struct {
		maxQueue, waiting int
	}{{1, 1}, {3, 3}, {-1, 0}} {
		t.Run(strconv.Itoa(c.maxQueue), func(t *testing.T) {
			ap := newApp()
			var mu sync.Mutex
			queuedN := 0
			allQueued := make(chan struct{})
			hook := func(e string) {
				if e != "queued" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if queuedN++; queuedN == c.waiting {
					close(allQueued)
				}
			}
			nodes := newService(t, 1, Config{Workers: 1, MaxQueue: c.maxQueue}, func(int) http.Handler { return ap.handler(0) }, hook)
			n := nodes[0]
			client := newClient(t)
			ctx := context.Background()
			var waits []<-chan reply
			waits = append(waits, send(ctx, client, n.url, "block-0", "", ""))
			await[string](t, ap.started, "the worker to be busy")
			for i := range c.waiting {
				waits = append(waits, send(ctx, client, n.url, "q"+strconv.Itoa(i), "", ""))
			}
			if c.waiting > 0 {
				await(t, allQueued, "the queue to fill")
			}
			req, _ := http.NewRequest(http.MethodGet, n.url+"/x", nil)
			resp, err := client.Do(req)
			if err != nil {
				timedOut(err)
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(RefusedHeader) != "queue-full" {
				t.Errorf("over the bound: %s %q, want 503 queue-full", resp.Status, resp.Header.Get(RefusedHeader))
			}
			close(ap.release)
			for _, w := range waits {
				if r := recv(t, w); r.code != 200 {
					t.Errorf("admitted request: %+v", r)
				}
			}
			if s := n.s.Stats(); s.Refused != 1 || s.Started != int64(1+c.waiting) {
				t.Errorf("%+v", s)
			}
		})
	}
}

// A queued request whose client goes away leaves the queue.
func TestAbandonedLeavesQueue(t *testing.T) {
	ap := newApp()
	hookQ, queued := waitFor("queued")
	hookA, abandoned := waitFor("abandoned")
	nodes := newService(t, 1, Config{Workers: 1}, func(int) http.Handler { return ap.handler(0) }, combine(hookQ, hookA))
	n := nodes[0]
	client := newClient(t)
	busy := send(context.Background(), client, n.url, "block-0", "", "")
	await[string](t, ap.started, "the worker to be busy")
	ctx, cancel := context.WithCancel(context.Background())
	w := send(ctx, client, n.url, "gone", "", "")
	await(t, queued, "the request to queue")
	cancel()
	if r := recv(t, w); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("abandoned request: %+v", r)
	}
	await(t, abandoned, "the server to see the client go")
	close(ap.release)
	recv(t, busy)
	if s := n.s.Stats(); s.Abandoned != 1 || s.Started != 1 {
		t.Errorf("%+v", s)
	}
	if ap.has("gone") {
		t.Error("the abandoned request ran")
	}
}
