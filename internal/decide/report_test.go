package decide

import (
	"testing"
	"time"
)

// TestReportAhead: the requests a new one would wait behind are those the
// report counted and the copies sent since, less the workers; none while
// a worker is free, and a report without workers reads as one.
func TestReportAhead(t *testing.T) {
	for _, c := range []struct {
		r          Report
		sent, want int
	}{
		{Report{Present: 0, Workers: 1}, 0, 0},
		{Report{Present: 1, Workers: 1}, 0, 1},
		{Report{Present: 0, Workers: 1}, 2, 2},
		{Report{Present: 3, Workers: 4}, 0, 0},
		{Report{Present: 3, Workers: 4}, 1, 1},
		{Report{Present: 10, Workers: 4}, 2, 9},
		{Report{Present: 2}, 0, 2},
	} {
		if got := c.r.Ahead(c.sent); got != c.want {
			t.Errorf("%+v with %d sent since: Ahead = %d, want %d", c.r, c.sent, got, c.want)
		}
	}
}

// TestReportFresh: a report counts for ReportDelays delays of the last
// request begun, none before a request had a finite delay, and no report
// is never fresh; a stale one gives way to the client's own view.
func TestReportFresh(t *testing.T) {
	const d = 10 * time.Millisecond
	p := New(Config{MaxAttempts: 2, Replicas: 3, PayoffWinRate: 1, Rollout: 1})
	rep := Report{At: 100 * time.Millisecond, Present: 4, Workers: 2}
	if p.Fresh(rep.At, rep.At) {
		t.Fatal("a report is fresh before any request had a delay")
	}
	var pl Plan
	p.Begin(&pl, 0, fixed(d), Never, false, nil)
	for _, c := range []struct {
		now  time.Duration
		want bool
	}{{rep.At, true}, {rep.At + ReportDelays*d, true}, {rep.At + ReportDelays*d + 1, false}} {
		if got := p.Fresh(rep.At, c.now); got != c.want {
			t.Errorf("Fresh at %v = %v, want %v", c.now-rep.At, got, c.want)
		}
	}
	if p.Fresh(0, 0) {
		t.Error("no report (At 0) is fresh")
	}
	if l, by := p.ReportedLoad(rep, 1, 0, rep.At+d/2); l != 4 || !by {
		t.Errorf("fresh: ReportedLoad = %d, %v; want 4 (4 present and 1 sent, less 2 workers, plus one), by report", l, by)
	}
	if l, by := p.ReportedLoad(rep, 1, 7, rep.At+5*d); l != 7 || by {
		t.Errorf("stale: ReportedLoad = %d, %v; want the own view's 7", l, by)
	}
	// A request with a longer delay makes reports count longer.
	p.Begin(&pl, 0, fixed(4*d), Never, false, nil)
	if !p.Fresh(rep.At, rep.At+3*d) {
		t.Error("the horizon did not follow the delay of the last request begun")
	}
}

// TestReported: what the reports add to the client's own evidence. Behind
// by the client's own view stays Behind; otherwise the primary is Queued
// while fewer requests than were ahead of it have been answered, and
// Running after; a server that does not count answers, or restarted,
// leaves the first report to go by.
func TestReported(t *testing.T) {
	for _, c := range []struct {
		own          Evidence
		ahead        int
		doneAt, done int64
		want         Evidence
	}{
		{EvidenceBehind, 0, 10, 20, EvidenceBehind},
		{EvidenceHead, 0, 10, 10, EvidenceRunning},
		{EvidenceHead, 3, 10, 12, EvidenceQueued},
		{EvidenceHead, 3, 10, 13, EvidenceRunning},
		{EvidenceHead, 3, 0, 0, EvidenceQueued},
		{EvidenceHead, 0, 0, 0, EvidenceRunning},
		{EvidenceHead, 3, 10, 5, EvidenceQueued},
	} {
		if got := Reported(c.own, c.ahead, c.doneAt, c.done); got != c.want {
			t.Errorf("Reported(%v, %d ahead, %d, %d) = %v, want %v", c.own, c.ahead, c.doneAt, c.done, got, c.want)
		}
	}
}

// TestReportedEvidenceWaits: the head wait holds every copy but one of a
// primary behind this client's own earlier request: one the reports say
// waits behind other clients' work (Queued), one they say runs (Running,
// which may be big), and one at the head of the client's own requests.
func TestReportedEvidenceWaits(t *testing.T) {
	const delay = 10 * time.Millisecond
	for _, c := range []struct {
		ev       Evidence
		wantHeld bool
	}{{EvidenceRunning, true}, {EvidenceQueued, true}, {EvidenceHead, true}, {EvidenceBehind, false}} {
		p := New(Config{MaxAttempts: 2, Replicas: 3, PayoffWinRate: 0.2, Rollout: 1, MaxLoad: 0})
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		rt := &headRT{behind: c.ev == EvidenceBehind}
		p.Schedule(&pl, 0, rt)
		if err := p.Check(&pl, delay, false); err != Allowed {
			t.Fatal(err)
		}
		_, why := p.Admit(&pl, 0, c.ev)
		if held := why == RefusedHead; held != c.wantHeld {
			t.Errorf("%v at the delay: %v, want held %v", c.ev, why, c.wantHeld)
		}
		if !c.wantHeld && pl.Evidence != c.ev {
			t.Errorf("the hedge's class is %v, want %v", pl.Evidence, c.ev)
		}
	}
}
