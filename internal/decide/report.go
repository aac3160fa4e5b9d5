package decide

import (
	"math"
	"slices"
	"time"
)

// This file holds what the decision makes of its servers' own reports of
// their load. A client alone sees only its own requests in flight on each
// replica: their count is the replica's load only when the client sends
// most of the replica's traffic, and a primary at the head of them may be
// queued behind other clients' work (the head wait, HeadDelays, is the
// price of not knowing). A server that runs the toolkit's middleware says,
// on every answer, how many requests it is running and has queued, how
// many it runs at once, and how many it has answered since it started.
// While the last such report from a replica is fresh, the rules read it in
// place of the client's own view:
//
//   - the load of the replica a copy would go to, as the spare-capacity
//     rule reads it (Policy.ReportedLoad), is the requests that a new one
//     would wait behind there: those the report counted, plus the copies
//     this client sent there since, less the workers; zero when a worker
//     is free. A report never counts fewer requests there than the
//     client's own in flight: it tells what the client cannot see (other
//     clients' work, the workers), not less than what it sees;
//   - the picker does not read reports: a report is fresh for few
//     replicas at a time, and its count of every client's requests cannot
//     be weighed against another replica's count of this client's alone
//     (measured: weighing them routed primaries away from the replicas
//     heard from last, and raised medians by up to half). The candidates
//     come in the picker's order, by the client's own view, and a report
//     says only whether one has room: no report draws a copy to its
//     replica. When the replica the picker chose is busy by its report
//     while the client's own view says it has room, the copy goes to the
//     picker's next choice among the replicas holding no copy of the
//     request (Policy.Place), so that a replica that says it is busy,
//     truly or not, keeps copies off itself but not off the others;
//   - a primary placed on a replica whose report was fresh knows how many
//     requests were ahead of it (Reported): while fewer have been
//     answered, it waits behind other clients' work (EvidenceQueued);
//     after, it runs (EvidenceRunning). Each is a class of the payoff
//     rule of its own, and both wait the head wait: a copy of a queued
//     primary jumps other clients' queue, and one of a running primary at
//     one delay (a big request, most often) was measured to cost more
//     than it gained (docs/default.md, "Load reports").
//
// A report is as old as the last answer from its replica: one that a
// stalled replica sent before it stalled goes stale, and the client falls
// back to its own view, cancelled losers counted (Ghost). A report counts
// for ReportDelays delays of the last request begun.

// ReportDelays is how many hedge delays a server's report of its load
// counts for after it arrived. Older, it says little of a queue that turns
// over in a few delays, and the client's own view decides.
const ReportDelays = 1

// Report is the load a server reported with an answer, as a client holds
// it. Its zero value is no report.
type Report struct {
	// At is when the answer carrying it arrived, on the engine's clock;
	// 0 for no report.
	At time.Duration
	// Present is the requests the server was running or had queued.
	Present int
	// Workers is the requests it runs at once (at least 1).
	Workers int
	// Done is the requests it had answered since it started, or 0 when it
	// does not count them.
	Done int64
}

// Ahead returns how many requests a new one would wait behind on the
// replica: the report's, plus sent sent there since, less its workers; 0
// when a worker is free. The sum saturates: a huge count reads as a busy
// replica, never as a negative load.
func (r Report) Ahead(sent int) int {
	return max(0, AddCount(r.Present, sent)-max(r.Workers, 1)+1)
}

// AddCount returns a + b for counts that are not negative, saturating at
// math.MaxInt instead of wrapping round to a negative number. A negative
// argument counts as 0.
func AddCount(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// Fresh reports whether a report that arrived at at still counts at now:
// it is younger than ReportDelays delays of the last request begun (see
// Begin). No report (at 0) is never fresh, nor is one before any request
// had a finite delay.
func (p *Policy) Fresh(at, now time.Duration) bool {
	if at <= 0 {
		return false
	}
	h := time.Duration(p.horizon.Load())
	return h > 0 && now-at <= h
}

// ReportedLoad returns the load that the spare-capacity rule reads for a
// replica: from its report rep, with sent copies of this client sent
// there since it arrived, while it is fresh at now; otherwise own, the
// client's own view (its requests in flight there, cancelled losers
// counted). byReport tells which decided. A fresh report that counts
// fewer requests there than own is read as counting own: a replica that
// says it is idle while this client's own requests wait there gains no
// copy by saying so.
func (p *Policy) ReportedLoad(rep Report, sent, own int, now time.Duration) (load int, byReport bool) {
	if !p.Fresh(rep.At, now) {
		return own, false
	}
	if own > AddCount(rep.Present, sent) {
		rep.Present, sent = own, 0
	}
	return rep.Ahead(sent), true
}

// MaxCandidates is the most replicas Policy.Place reads for one copy:
// the picker's choice and, while each is busy, the picker's next ones. It
// bounds a decision's cost in a large fleet, and keeps what a pick leaves
// out (the copies held, at most 4, and the candidates passed over)
// within what Picker takes.
const MaxCandidates = 4

// Place chooses the replica a further copy of a request goes to at now,
// and reads its load as the spare-capacity rule will (Admit): it is the
// placement an engine's Runtime.Place returns, the same for every engine.
// pick(skip) is the engine's picker: the replica it chooses for the copy
// among those holding no copy of the request and not in skip, or -1 when
// none is left. read(replica) is what the client knows of that replica's
// load: its last report (the zero Report for none), the copies the client
// sent there since, and its own view (its requests in flight there,
// cancelled losers counted). The load is ReportedLoad's.
//
// The picker's choice takes the copy unless its fresh report says it is
// busy (above the rule's limit) where the client's own view says it has
// room. Then the report tells what the client could not see, and the
// copy goes to the picker's next choice, and so on up to MaxCandidates
// replicas: the first that is not busy takes it. So a replica that says
// it is busy, truly or not, keeps copies off itself but not off the
// replicas that can take them. Where the report and the client's own
// view both say busy, the copy is refused as it is without reports
// (moving those copies too measured worse medians: the grid of
// docs/default.md, "Load reports"). When no candidate has room, Place
// returns the picker's choice, which Admit refuses (RefusedBusy). It
// returns -1, -1 when the picker has no replica at all.
func (p *Policy) Place(now time.Duration, pick func(skip []int) int, read func(replica int) (rep Report, sent, own int)) (replica, load int, byReport bool) {
	var buf [MaxCandidates - 1]int
	skip := buf[:0]
	replica, load = -1, -1
	for {
		r := pick(skip)
		if r < 0 || slices.Contains(skip, r) {
			// None left, or an engine whose placement cannot leave a
			// replica out: the picker's choice stays the copy's.
			return replica, load, byReport
		}
		rep, sent, own := read(r)
		l, by := p.ReportedLoad(rep, sent, own, now)
		busy := p.maxLoad >= 0 && l > p.maxLoad
		switch {
		case len(skip) > 0 && !busy:
			return r, l, by
		case len(skip) > 0:
		case !busy || !by || own > p.maxLoad:
			return r, l, by
		default:
			replica, load, byReport = r, l, by
		}
		if len(skip) == cap(skip) {
			return replica, load, byReport
		}
		skip = append(skip, r)
	}
}

// Reported refines own, what the client's own view says of a primary
// (Behind), with its replica's reports, for a primary placed while that
// replica's report was fresh: ahead requests were in front of it by that
// report (Report.Ahead), whose count of answers was doneAt, and done is
// the replica's latest count. Behind stays Behind: an earlier request of
// this client is still ahead of the primary, which the client sees for
// itself. Otherwise, while fewer than ahead have been answered since, the
// primary waits behind other clients' work (EvidenceQueued); after, it
// runs (EvidenceRunning). A server that does not count its answers (done
// 0), or that restarted (done below doneAt), leaves only the first
// report to go by.
func Reported(own Evidence, ahead int, doneAt, done int64) Evidence {
	if own == EvidenceBehind {
		return own
	}
	answered := done - doneAt
	if done == 0 || answered < 0 {
		answered = 0
	}
	if answered < int64(ahead) {
		return EvidenceQueued
	}
	return EvidenceRunning
}

// setHorizon keeps how long a report counts: ReportDelays of the delay d
// of the request just begun, written only when it changes.
func (p *Policy) setHorizon(d time.Duration) {
	if d <= 0 || d == Never {
		return
	}
	h := int64(min(float64(d)*ReportDelays, float64(Never/2)))
	if p.horizon.Load() != h {
		p.horizon.Store(h)
	}
}
