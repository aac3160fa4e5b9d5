package decide

import "time"

// Runtime is what the decision's driver (Policy.Schedule, Policy.Fire and
// Policy.Try) needs from an engine that runs the copies of one request:
// the live engine (Do) on the wall clock, the simulator in package sim on
// virtual time. The driver holds the sequence, the engine what differs:
// where a copy goes, how it is sent, how a timer is armed.
type Runtime interface {
	// Place returns the replica the request's next copy would go to and
	// that replica's load as the spare-capacity rule reads it (requests
	// in flight there, or ahead of a new one by the replica's fresh
	// report: Policy.ReportedLoad), or -1, -1 when the engine does not
	// pick replicas; byReport tells whether a report gave the load. Try
	// calls it before Admit, and only when the Policy checks load
	// (Policy.ChecksLoad).
	Place(now time.Duration) (replica, load int, byReport bool)
	// Evidence returns what the engine sees of the primary's replica (see
	// Behind), or EvidenceNone.
	Evidence() Evidence
	// Launch sends the admitted copy at now to replica (-1: one the
	// engine picks now), or in Shadow mode (Grant.Shadow) counts it
	// without sending. It reports false when no replica can take the
	// copy: Try then undoes the Grant and counts RefusedReplicas.
	Launch(now time.Duration, replica int, g Grant) bool
	// Refused counts a refusal that Counted says to count; placed is the
	// replica Place returned for the copy that does not go, or -1.
	Refused(now time.Duration, why Refusal, placed int)
	// Arm sets the request's timer for its next copy at at.
	Arm(at time.Duration)
}

// Schedule sends the request's copies that are due at now, as far as the
// Policy allows, and arms the timer for the next one, if any. An engine
// calls it when the primary has gone and after each copy that went.
func (p *Policy) Schedule(pl *Plan, now time.Duration, rt Runtime) {
	for {
		at, why := p.Due(pl, now)
		if Counted(why) {
			rt.Refused(now, why, -1)
		}
		switch {
		case at == Never:
			return
		case at > now:
			rt.Arm(at)
			return
		}
		if why := p.Try(pl, now, false, rt); why != Allowed {
			p.rearm(pl, now, why, rt)
			return
		}
	}
}

// Fire is the request's timer firing at now: the copy due goes if the
// Policy allows it, and the next is scheduled; a refused copy that the
// Policy retries (Policy.Retries) is asked for again a delay later. It
// returns the refusal, or Allowed when the copy went.
func (p *Policy) Fire(pl *Plan, now time.Duration, rt Runtime) Refusal {
	if why := p.Try(pl, now, false, rt); why != Allowed {
		p.rearm(pl, now, why, rt)
		return why
	}
	p.Schedule(pl, now, rt)
	return Allowed
}

// rearm arms the timer again after a refusal that the Policy retries:
// the copy is asked for again a delay later (not at Due, which for a
// straggler of a fan-out may be now, and would ask again at once, for
// ever), or, refused by the head wait, once the primary has waited
// HeadDelays delays (Plan.HeadAt), unless the caller's deadline comes
// first.
func (p *Policy) rearm(pl *Plan, now time.Duration, why Refusal, rt Runtime) {
	if p.Retries(pl, why) {
		at := AddSat(now, pl.Delay)
		if h := pl.HeadAt(); why == RefusedHead && h > now {
			at = h
		}
		if at != Never && at <= pl.Deadline {
			rt.Arm(at)
		}
	}
}

// Try asks for one more copy of the request at now, and launches it or
// counts the refusal: Check, then (when the spare-capacity rule looks at
// the copy's replica) Place, then Admit with the engine's evidence, then
// Launch, undoing the admission if the engine cannot send the copy.
// afterFailure marks a copy that replaces one that failed with a
// retryable error (see Check). It returns the refusal, or Allowed when
// the copy went (in Shadow mode, was counted).
func (p *Policy) Try(pl *Plan, now time.Duration, afterFailure bool, rt Runtime) Refusal {
	why := p.Check(pl, now, afterFailure)
	if why != Allowed {
		if Counted(why) {
			rt.Refused(now, why, -1)
		}
		return why
	}
	replica, load := -1, -1
	if p.ChecksLoad() {
		replica, load, _ = rt.Place(now)
	}
	var g Grant
	why = p.admit(pl, load, rt.Evidence(), &g)
	if why == Allowed && !rt.Launch(now, replica, g) {
		g.Undo()
		why = RefusedReplicas
	}
	if why != Allowed {
		rt.Refused(now, why, replica)
	}
	return why
}
