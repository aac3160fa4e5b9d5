package tied

import (
	"context"
	"errors"
	"github.com/tailcut/hedge"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A spare copy that finds every worker busy is refused at once, 409 with
// DroppedHeader "no-spare", without queueing or claiming; one that names
// a sibling outside Peers is refused too, for it could not claim.
func TestSpareRefusedWithoutFreeWorker(t *testing.T) {
	a := newApp()
	nodes := newService(t, 2, Config{Workers: 1}, func(int) http.Handler { return a.handler(0) })
	client := newClient(t)
	ctx := context.Background()
	blocked := send(ctx, client, nodes[0].url, "block", "", "")
	await(t, a.started, "the worker to be busy")

	r := recv(t, sendRole(ctx, client, nodes[0].url, "spare", NewID(), nodes[1].url, RoleSpare))
	if r.code != http.StatusConflict || r.dropped != DroppedNoSpare {
		t.Fatalf("spare at a busy server: %+v, want 409 no-spare", r)
	}
	r = recv(t, sendRole(ctx, client, nodes[1].url, "stranger", NewID(), "http://203.0.113.1:80", RoleSpare))
	if r.code != http.StatusConflict || r.dropped != DroppedNoSpare {
		t.Fatalf("spare naming an unknown sibling: %+v, want 409 no-spare", r)
	}
	close(a.release)
	recv(t, blocked)
	if a.has("spare") || a.has("stranger") {
		t.Error("a refused spare ran")
	}
	s0, s1 := nodes[0].s.Stats(), nodes[1].s.Stats()
	if s0.NoSpare != 1 || s0.Queued != 0 || s0.ClaimsWon+s0.ClaimsLost+s0.ClaimsFailed+s0.ClaimsSkipped != 0 || s0.Dropped != 0 {
		t.Errorf("busy server: %+v, want 1 spare refused, no claim", s0)
	}
	if s1.NoSpare != 1 || s1.UnknownSibling != 1 || s1.Started != 0 {
		t.Errorf("server of the stranger: %+v, want 1 spare refused for its sibling", s1)
	}
}

// A spare copy at a free worker claims its tie at the primary's server;
// a primary still queued there is dropped, and the spare runs: the call
// runs once, where a worker was free.
func TestSpareTakesQueuedPrimary(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	hook, queued := waitFor("queued")
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) }, hook)
	client := newClient(t)
	ctx := context.Background()
	blocked := send(ctx, client, nodes[0].url, "block", "", "")
	await(t, apps[0].started, "the worker to be busy")

	id := NewID()
	primary := sendRole(ctx, client, nodes[0].url, "call", id, nodes[1].url, RolePrimary)
	await(t, queued, "the primary queued")
	r := recv(t, sendRole(ctx, client, nodes[1].url, "call", id, nodes[0].url, RoleSpare))
	if r.code != 200 || r.body != "call@1" {
		t.Fatalf("spare: %+v, want 200 from server 1", r)
	}
	if p := recv(t, primary); p.code != http.StatusConflict || p.dropped != DroppedSibling {
		t.Fatalf("primary: %+v, want 409 dropped for its sibling", p)
	}
	close(apps[0].release)
	recv(t, blocked)
	if apps[0].has("call") {
		t.Error("the dropped primary ran")
	}
	s0, s1 := nodes[0].s.Stats(), nodes[1].s.Stats()
	if s0.Dropped != 1 || s0.TiedStarted != 0 || s0.ClaimsReceived != 1 {
		t.Errorf("primary's server: %+v, want its copy dropped by 1 claim", s0)
	}
	if s1.TiedStarted != 1 || s1.ClaimsWon != 1 || s1.NoSpare != 0 {
		t.Errorf("spare's server: %+v, want 1 claim won and 1 tied start", s1)
	}
}

// A primary that started answers its spare's claim lost: the spare is
// dropped and gives its worker back, and the primary's answer is the
// call's.
func TestSpareLosesToStartedPrimary(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) })
	client := newClient(t)
	ctx := context.Background()
	id := NewID()
	primary := sendRole(ctx, client, nodes[0].url, "block-call", id, nodes[1].url, RolePrimary)
	await(t, apps[0].started, "the primary to start")
	spare := sendRole(ctx, client, nodes[1].url, "block-call", id, nodes[0].url, RoleSpare)
	var r reply
	d := limit()
	select {
	case r = <-spare:
	case <-apps[1].started:
		t.Fatal("the spare started: its claim was granted although the primary had started")
	case <-time.After(d):
		t.Fatalf("waiting for the spare's reply: %s", ranOut(d))
	}
	if r.code != http.StatusConflict || r.dropped != DroppedSibling {
		t.Fatalf("spare: %+v, want 409 dropped for its sibling", r)
	}
	close(apps[0].release)
	if p := recv(t, primary); p.code != 200 || p.body != "block-call@0" {
		t.Fatalf("primary: %+v, want 200 from server 0", p)
	}
	if apps[1].has("block-call") {
		t.Error("the spare ran")
	}
	s0, s1 := nodes[0].s.Stats(), nodes[1].s.Stats()
	if s0.TiedStarted != 1 || s0.ClaimsRefused != 1 || s0.ClaimsWon+s0.ClaimsLost+s0.ClaimsFailed+s0.ClaimsSkipped != 0 {
		t.Errorf("primary's server: %+v, want 1 tied start without a claim, 1 claim refused", s0)
	}
	if s1.ClaimsLost != 1 || s1.Dropped != 1 || s1.Running != 0 {
		t.Errorf("spare's server: %+v, want 1 claim lost, its worker free", s1)
	}
}

// Primaries never claim: not when given a worker, and not ahead while
// queued (ClaimAhead), so that no primary waits for a round trip.
func TestPrimaryNeverClaims(t *testing.T) {
	a := newApp()
	var claiming atomic.Int64
	hook := func(e string) {
		if e == "claiming" {
			claiming.Add(1)
		}
	}
	queuedHook, queued := waitFor("queued")
	nodes := newService(t, 2, Config{Workers: 1, ClaimAhead: 2}, func(int) http.Handler { return a.handler(0) }, combine(hook, queuedHook))
	client := newClient(t)
	ctx := context.Background()
	blocked := send(ctx, client, nodes[0].url, "block", "", "")
	await(t, a.started, "the worker to be busy")
	p1 := sendRole(ctx, client, nodes[0].url, "p1", NewID(), nodes[1].url, RolePrimary)
	await(t, queued, "a primary queued")
	if nodes[0].s.Stats().Queued != 1 {
		t.Fatal("queued event without a queued request")
	}
	close(a.release)
	recv(t, blocked)
	if r := recv(t, p1); r.code != 200 {
		t.Fatalf("primary: %+v", r)
	}
	p2 := recv(t, sendRole(ctx, client, nodes[0].url, "p2", NewID(), nodes[1].url, RolePrimary))
	if p2.code != 200 {
		t.Fatalf("primary at a free worker: %+v", p2)
	}
	s := nodes[0].s.Stats()
	if n := claiming.Load(); n != 0 || s.ClaimsWon+s.ClaimsLost+s.ClaimsFailed+s.ClaimsSkipped != 0 {
		t.Errorf("%d claims sent, %+v; want none", n, s)
	}
	if s.TiedStarted != 2 {
		t.Errorf("%d tied starts, want 2", s.TiedStarted)
	}
}

// A spare's claim that reaches the primary's server before the primary
// leaves a tombstone: the primary is dropped on arrival.
func TestSpareBeforePrimary(t *testing.T) {
	apps := []*app{newApp(), newApp()}
	nodes := newService(t, 2, Config{Workers: 1}, func(i int) http.Handler { return apps[i].handler(i) })
	client := newClient(t)
	ctx := context.Background()
	id := NewID()
	if r := recv(t, sendRole(ctx, client, nodes[1].url, "call", id, nodes[0].url, RoleSpare)); r.code != 200 {
		t.Fatalf("spare: %+v", r)
	}
	if r := recv(t, sendRole(ctx, client, nodes[0].url, "call", id, nodes[1].url, RolePrimary)); r.code != http.StatusConflict || r.dropped != DroppedSibling {
		t.Fatalf("primary after its spare ran: %+v, want 409 dropped", r)
	}
	if apps[0].has("call") {
		t.Error("the primary ran after its spare")
	}
	if s := nodes[0].s.Stats(); s.ClaimsEarly != 1 || s.Dropped != 1 {
		t.Errorf("%+v, want 1 early claim and the primary dropped", s)
	}
}

func TestParseTieRole(t *testing.T) {
	id := NewID()
	for _, c := range []struct {
		id, sib, role string
		want          Role
		ok            bool
	}{
		{"", "", "", RoleEither, true},
		{id, "http://b:1", "", RoleEither, true},
		{id, "http://b:1", "primary", RolePrimary, true},
		{id, "http://b:1", "spare", RoleSpare, true},
		{id, "http://b:1", "Spare", 0, false},
		{"", "", "spare", 0, false},
	} {
		got, err := ParseTieRole(c.id, c.sib, c.role)
		if c.ok != (err == nil) || c.ok && got.Role != c.want {
			t.Errorf("ParseTieRole(%q, %q, %q) = %+v, %v", c.id, c.sib, c.role, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadTie) {
			t.Errorf("%v does not match ErrBadTie", err)
		}
	}
	if !errors.Is(ErrNoSpare, ErrDropped) {
		t.Error("ErrNoSpare does not match ErrDropped")
	}
	if RoleSpare.String() != "spare" || RoleEither.String() != "" || FormSymmetric.String() != "symmetric" {
		t.Error("wire names")
	}
}

// In the spare form the copies go as primary and spare; a spare refused is
// no failure. When the primary never reached its server, copy 1 goes as a
// primary, or goes again as one after its spare was refused.
func TestRunSpareForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := NewClient(ClientConfig{Replicas: 3, Gap: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		primaryDone := make(chan struct{})
		v, release, err := Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Index == 0 {
				if cp.Role != RolePrimary {
					t.Errorf("copy 0 role %v", cp.Role)
				}
				<-primaryDone
				return "primary", nil
			}
			if cp.Role != RoleSpare {
				t.Errorf("copy 1 role %v", cp.Role)
			}
			defer close(primaryDone)
			return "", ErrNoSpare
		}, nil)
		release()
		if err != nil || v != "primary" {
			t.Fatalf("Run = %q, %v; want the primary's answer", v, err)
		}
		if st := c.Stats(); st.NoSpare != 1 || st.Dropped != 0 || st.Failures != 0 || st.Seconds != 1 {
			t.Errorf("%+v, want 1 spare refused, no failure", st)
		}

		// The primary's replica is down after the spare left and was
		// refused: copy 1 goes again, as a primary.
		refused := errors.New("connect: connection refused")
		spareBack := make(chan struct{})
		var roles []Role
		v, release, err = Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Index == 0 {
				<-spareBack
				return "", NotSent(refused)
			}
			roles = append(roles, cp.Role)
			if cp.Role == RoleSpare {
				close(spareBack)
				return "", ErrNoSpare
			}
			return "again", nil
		}, nil)
		release()
		if err != nil || v != "again" {
			t.Fatalf("Run = %q, %v; want copy 1's answer as a primary", v, err)
		}
		if len(roles) != 2 || roles[0] != RoleSpare || roles[1] != RolePrimary {
			t.Errorf("copy 1 went as %v, want spare, then primary", roles)
		}

		// Down before the gap: copy 1 goes at once, as a primary.
		roles = nil
		v, release, err = Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Index == 0 {
				return "", NotSent(refused)
			}
			roles = append(roles, cp.Role)
			return "twin", nil
		}, nil)
		release()
		if err != nil || v != "twin" || len(roles) != 1 || roles[0] != RolePrimary {
			t.Fatalf("Run = %q, %v, roles %v; want the twin's answer, sent as a primary", v, err, roles)
		}

		// The symmetric form sends no roles.
		sym, err := NewClient(ClientConfig{Replicas: 2, Form: FormSymmetric})
		if err != nil {
			t.Fatal(err)
		}
		_, release, _ = Run(context.Background(), sym, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Role != RoleEither {
				t.Errorf("symmetric copy %d role %v", cp.Index, cp.Role)
			}
			return "x", nil
		}, nil)
		release()
		if _, err := NewClient(ClientConfig{Replicas: 2, Form: 7}); err == nil || !strings.Contains(err.Error(), "Form") {
			t.Errorf("Form 7: %v", err)
		}
	})
}

// Fresh load reports keep a spare home when it cannot help: its replica
// has no free worker, or the primary's had one. Stale reports, or none,
// send it.
func TestSpareSkippedByReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, call := spareProbe(t)
		if !call() {
			t.Fatal("no reports: the spare was not sent")
		}
		busy := hedge.Load{Running: 2, Queued: 1, Workers: 2}
		free := hedge.Load{Running: 1, Workers: 2}
		for _, tc := range []struct {
			name       string
			r0, r1     hedge.Load
			wantSpares bool
		}{
			{"both busy", busy, busy, false}, // the spare would be refused
			{"both free", free, free, false}, // the primary started
			{"primary's busy, spare's free", busy, free, true},
		} {
			c.ReportLoad(0, tc.r0)
			c.ReportLoad(1, tc.r1)
			before := c.Stats().SparesSkipped
			// The picker is random: both orders, so that each replica
			// has the primary.
			sent := 0
			for range 20 {
				c.ReportLoad(0, tc.r0)
				c.ReportLoad(1, tc.r1)
				if call() {
					sent++
				}
			}
			skipped := c.Stats().SparesSkipped - before
			switch {
			case tc.wantSpares && (sent == 0 || sent == 20):
				// busy/free differ by replica: sent when the busy one has the primary
				t.Errorf("%s: %d of 20 spares sent, want those whose primary is on the busy replica", tc.name, sent)
			case !tc.wantSpares && (sent != 0 || skipped != 20):
				t.Errorf("%s: %d spares sent, %d skipped; want none sent", tc.name, sent, skipped)
			}
		}
		// Stale reports send it again: the mean latency is 5 ms.
		c.ReportLoad(0, busy)
		c.ReportLoad(1, busy)
		time.Sleep(time.Second)
		if !call() {
			t.Error("stale reports kept the spare home")
		}
		c.ReportLoad(5, busy)                   // out of range: ignored
		c.ReportLoad(0, hedge.Load{Running: 3}) // no workers: ignored
	})
}

// spareProbe returns a client of two replicas that sends a spare a
// millisecond after its primary, and call, which runs one call whose
// primary answers after 5 ms (on the bubble's clock: call it inside
// synctest.Test) and reports whether its spare was sent.
func spareProbe(t *testing.T) (*Client, func() bool) {
	t.Helper()
	c, err := NewClient(ClientConfig{Replicas: 2, Gap: time.Millisecond, Picker: hedge.Picker{Random: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() bool {
		spare := false
		_, release, err := Run(context.Background(), c, func(ctx context.Context, cp Copy) (string, error) {
			if cp.Role == RoleSpare {
				spare = true
				return "", ErrNoSpare
			}
			time.Sleep(5 * time.Millisecond)
			return "ok", nil
		}, nil)
		release()
		if err != nil {
			t.Fatal(err)
		}
		return spare
	}
}
