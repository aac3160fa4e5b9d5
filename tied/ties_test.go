package tied

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A tied copy queued behind a busy worker is dropped, without running,
// when its sibling claims the tie on an idle server.
func TestQueuedSiblingDropped(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	queuedB, queued := waitFor("queued")
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, nil, queuedB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()

	busy := send(ctx, client, b.url, "block-b", "", "")
	await[string](t, apps[1].started, "B's worker to be busy")
	id := NewID()
	onB := send(ctx, client, b.url, "tied-b", id, a.url)
	await(t, queued, "the copy to queue at B")
	onA := send(ctx, client, a.url, "tied-a", id, b.url)

	if r := recv(t, onA); r.err != nil || r.code != 200 || r.body != "tied-a@0" {
		t.Fatalf("copy on A: %+v, want 200 tied-a@0", r)
	}
	r := recv(t, onB)
	if r.err != nil || r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("copy on B: %+v, want 409 with %s: sibling", r, DroppedHeader)
	}
	close(apps[1].release)
	if r := recv(t, busy); r.code != 200 {
		t.Fatalf("busy request: %+v", r)
	}
	if apps[1].has("tied-b") {
		t.Error("the dropped copy ran on B")
	}
	sa, sb := a.s.Stats(), b.s.Stats()
	if sa.ClaimsWon != 1 || sa.TiedStarted != 1 {
		t.Errorf("A: %+v, want 1 claim won, 1 tied start", sa)
	}
	if sb.Dropped != 1 || sb.ClaimsReceived != 1 || sb.TiedStarted != 0 || sb.Started != 1 {
		t.Errorf("B: %+v, want 1 dropped, 1 claim received, only the busy request started", sb)
	}
	if lat := a.s.ClaimLatencies(); len(lat) != 1 || lat[0] < 0 || sa.ClaimLatencySum != lat[0] {
		t.Errorf("A's claim latencies %v, sum %v: want one", lat, sa.ClaimLatencySum)
	}
}

// Both servers idle: both copies get a worker at once and claim the tie
// at the same time (their claims are held until both are in flight, then
// delivered together or one after the other). Exactly one copy runs; the
// other is answered "dropped".
func TestTiedPairRunsOnce(t *testing.T) {
	for _, order := range []string{"together", "a-first", "b-first"} {
		t.Run(order, func(t *testing.T) {
			apps := []*app{newApp(), newApp()}
			var hooks [2]func(string)
			var seen [2]chan string
			for i := range hooks {
				ch := make(chan string, 16)
				seen[i] = ch
				hooks[i] = func(e string) {
					switch e {
					case "claiming", "refused", "crossed", "repeated":
						ch <- e
					}
				}
			}
			nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, hooks[:]...)
			gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
			for i, nd := range nodes {
				nd.s.sender = &gateSender{inner: nd.s.sender, gate: gates[i]}
			}
			a, b := nodes[0], nodes[1]
			client := newClient(t)
			ctx := context.Background()
			id := NewID()
			onA := send(ctx, client, a.url, "tied-a", id, b.url)
			onB := send(ctx, client, b.url, "tied-b", id, a.url)
			// expect waits for server i's next event, which must be one
			// of want.
			expect := func(i int, want ...string) {
				t.Helper()
				d := limit()
				select {
				case e := <-seen[i]:
					for _, w := range want {
						if e == w {
							return
						}
					}
					t.Fatalf("server %d: event %q, want one of %q", i, e, want)
				case <-time.After(d):
					t.Fatalf("server %d, waiting for an event %q: %s", i, want, ranOut(d))
				}
			}
			expect(0, "claiming")
			expect(1, "claiming")
			// Both copies hold a worker and claim: without the claim
			// both would start now.
			switch order {
			case "together":
				close(gates[0])
				close(gates[1])
			case "a-first":
				close(gates[0])
				expect(1, "refused", "crossed") // B answered A's claim
				close(gates[1])
			case "b-first":
				close(gates[1])
				expect(0, "refused", "crossed")
				close(gates[0])
			}
			ra, rb := recv(t, onA), recv(t, onB)
			ok := func(r reply, name string) bool {
				return r.err == nil && r.code == 200 && strings.HasPrefix(r.body, name+"@")
			}
			dropped := func(r reply) bool { return r.err == nil && r.code == http.StatusConflict && r.dropped == "sibling" }
			if !(ok(ra, "tied-a") && dropped(rb)) && !(ok(rb, "tied-b") && dropped(ra)) {
				t.Fatalf("replies A %+v, B %+v: want one 200 and one 409 dropped", ra, rb)
			}
			ranA, ranB := apps[0].has("tied-a"), apps[1].has("tied-b")
			if ranA == ranB {
				t.Errorf("ran on A: %v, on B: %v: want exactly one", ranA, ranB)
			}
			sa, sb := a.s.Stats(), b.s.Stats()
			if n := sa.TiedStarted + sb.TiedStarted; n != 1 {
				t.Errorf("tied starts %d, want 1 (A %+v, B %+v)", n, sa, sb)
			}
			if n := sa.Dropped + sb.Dropped; n != 1 {
				t.Errorf("dropped %d, want 1", n)
			}
			if sa.ClaimsFailed+sb.ClaimsFailed+sa.ClaimsSkipped+sb.ClaimsSkipped != 0 {
				t.Errorf("claims failed or skipped: A %+v, B %+v", sa, sb)
			}
		})
	}
}

// A claim that comes before its copy leaves a tombstone, and the copy is
// dropped on arrival: the case of an idle first server, which the
// client's gap makes the common one.
func TestEarlyClaimDropsOnArrival(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	earlyB, early := waitFor("early")
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, nil, earlyB)
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()
	id := NewID()
	if r := recv(t, send(ctx, client, a.url, "tied-a", id, b.url)); r.code != 200 {
		t.Fatalf("first copy: %+v", r)
	}
	await(t, early, "the claim at B")
	r := recv(t, send(ctx, client, b.url, "tied-b", id, a.url))
	if r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("second copy: %+v, want 409 dropped", r)
	}
	if apps[1].has("tied-b") {
		t.Error("the second copy ran")
	}
	if s := b.s.Stats(); s.Dropped != 1 || s.ClaimsEarly != 1 || s.Started != 0 {
		t.Errorf("B: %+v", s)
	}
}

// With ClaimAhead, when a worker frees, the tied copies next in the queue
// claim their tie while they wait: the sibling's server keeps a tombstone
// and drops the sibling on arrival, and the queued copy runs when a
// worker is free for it. A copy that won its claim ahead and whose
// client then leaves gives up its place.
func TestClaimAhead(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	var waitingN atomic.Int64
	queued, twoWon := make(chan struct{}, 3), make(chan struct{})
	hookB := func(e string) {
		switch {
		case e == "queued":
			queued <- struct{}{}
		case e == "waiting" && waitingN.Add(1) == 2:
			close(twoWon)
		}
	}
	hookAbandoned, abandoned := waitFor("abandoned")
	nodes := newService(t, 2, Config{Workers: 1, ClaimAhead: 2}, func(i int) http.Handler { return apps[i].handler(i) }, nil, combine(hookB, hookAbandoned))
	a, b := nodes[0], nodes[1]
	client := newClient(t)
	ctx := context.Background()

	ctx1, cancel1 := context.WithCancel(ctx)
	busy1 := send(ctx1, client, b.url, "block-1", "", "")
	await[string](t, apps[1].started, "B's worker to be busy")
	// Queued in this order: block-2, tied-b, tied-gone.
	busy2 := send(ctx, client, b.url, "block-2", "", "")
	await(t, queued, "block-2 to queue")
	id := NewID()
	onB := send(ctx, client, b.url, "tied-b", id, a.url)
	await(t, queued, "tied-b to queue")
	gone, cancelGone := context.WithCancel(ctx)
	onGone := send(gone, client, b.url, "tied-gone", NewID(), a.url)
	await(t, queued, "tied-gone to queue")
	// Nothing has claimed while no worker freed.
	if st := a.s.Stats(); st.ClaimsReceived != 0 {
		t.Fatalf("A: %+v, want no claim before B makes progress", st)
	}
	cancel1() // block-1 ends: block-2 starts, the two tied copies claim ahead
	if r := recv(t, busy1); r.err == nil {
		t.Fatalf("cancelled request: %+v", r)
	}
	await[string](t, apps[1].started, "block-2 to start")
	await(t, twoWon, "the two claims ahead to be won")
	if r := recv(t, send(ctx, client, a.url, "tied-a", id, b.url)); r.code != http.StatusConflict || r.dropped != "sibling" {
		t.Fatalf("copy on A: %+v, want 409 dropped", r)
	}
	cancelGone()
	if r := recv(t, onGone); r.err == nil {
		t.Fatalf("abandoned copy: %+v, want an error", r)
	}
	await(t, abandoned, "B to see the client go")
	close(apps[1].release)
	recv(t, busy2)
	if r := recv(t, onB); r.code != 200 || r.body != "tied-b@1" {
		t.Fatalf("copy on B: %+v, want 200 after the busy requests", r)
	}
	if apps[0].has("tied-a") || apps[1].has("tied-gone") {
		t.Error("a dropped or abandoned copy ran")
	}
	sa, sb := a.s.Stats(), b.s.Stats()
	if sb.ClaimsWon != 2 || sb.TiedStarted != 1 || sb.Abandoned != 1 || sb.Queued != 0 || sb.Running != 0 {
		t.Errorf("B: %+v, want 2 claims won ahead, 1 tied start, 1 abandoned, nothing left", sb)
	}
	if sa.Dropped != 1 || sa.ClaimsEarly != 2 || sa.Started != 0 {
		t.Errorf("A: %+v, want its copy dropped on arrival", sa)
	}
}
