package tied

import (
	"sync/atomic"
	"time"
)

type counters struct {
	started, tiedStarted, refused, abandoned, dropped, unknownSibling, badTie atomic.Int64
	won, lost, failed, skipped                                                atomic.Int64
	received, granted, early, repeated, refusedClaims, rejected               atomic.Int64
	latSum, latMax                                                            atomic.Int64
	done                                                                      atomic.Int64 // workers released: requests answered (Load)
	noSpare                                                                   atomic.Int64
}

// dropped counts a dropped copy.
func (s *Server) dropped() {
	s.c.dropped.Add(1)
	s.event("dropped")
}

// latency records the round trip d of an answered claim.
func (s *Server) latency(d time.Duration) {
	d = max(d, 0)
	s.c.latSum.Add(int64(d))
	for {
		m := s.c.latMax.Load()
		if int64(d) <= m || s.c.latMax.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	s.mu.Lock()
	s.lat[s.latN%latencyRing] = d
	s.latN++
	s.mu.Unlock()
}

// Stats are a Server's counters. Counters only grow; Running and Queued
// are the current values.
type Stats struct {
	// Running and Queued are the requests holding a worker (running, or
	// claiming) and waiting now.
	Running, Queued int
	// Started counts requests that started (tied or not); TiedStarted
	// the tied copies among them. Summed over the servers of a service,
	// TiedStarted minus the tied calls is the number of calls of which
	// both copies started: the duplicated executions. Only copies that
	// started without their claim answered (ClaimsFailed,
	// ClaimsSkipped) can be duplicated.
	Started, TiedStarted int64
	// Refused counts requests refused because the queue was full.
	Refused int64
	// Abandoned counts requests that left the queue, or gave up their
	// claim, because their context ended (the client went away, or took
	// the sibling's answer).
	Abandoned int64
	// Dropped counts tied copies dropped without running because their
	// sibling had the right to start: removed from the queue by the
	// peer's claim, refused on arrival after it, or lost their own claim
	// (ClaimsLost).
	Dropped int64
	// NoSpare counts spare copies (RoleSpare) refused because no worker
	// was free when they came (ErrNoSpare), or because they could not
	// claim their tie (their sibling unknown, or their tie seen here
	// already). They are not in Dropped.
	NoSpare int64
	// UnknownSibling counts tied requests whose sibling was not among
	// Config.Peers (or which came while the server had no Secret): they
	// ran untied.
	UnknownSibling int64
	// BadTie counts requests with malformed tie headers: they ran
	// untied.
	BadTie int64

	// Claims this server sent, by outcome: ClaimsWon were granted (the
	// copy started), ClaimsLost refused (the copy was dropped),
	// ClaimsFailed not answered in time or in error (the copy started
	// anyway). ClaimsSkipped counts copies started without claiming:
	// over MaxClaimsInFlight, within ClaimBackoff of a failure, or after
	// Close.
	ClaimsWon, ClaimsLost, ClaimsFailed, ClaimsSkipped int64

	// ClaimsReceived counts authentic claims from peers; of them,
	// ClaimsEarly came before their copy (which is dropped on
	// arrival), ClaimsCrossed won against this server's own claim in
	// flight, ClaimsRepeated named a copy dropped already, and
	// ClaimsRefused were answered lost (the copy here started, or won
	// the crossing). The rest dropped a queued copy.
	ClaimsReceived, ClaimsEarly, ClaimsCrossed, ClaimsRepeated, ClaimsRefused int64
	// ClaimsRejected counts claims refused: malformed, forged (bad
	// signature) or stale.
	ClaimsRejected int64

	// ClaimLatencySum and ClaimLatencyMax are the sum and maximum, over
	// the claims answered (ClaimsWon + ClaimsLost), of the claim's round
	// trip: what a tied copy waits, holding its worker, before it
	// starts. It is also the longest a copy can stay queued on the
	// sibling's server after this one decided to start: the real
	// counterpart of the simulator's cancellation delay, except that
	// no copy starts within it.
	ClaimLatencySum, ClaimLatencyMax time.Duration
}

// Stats returns a snapshot of the Server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	running, queued := s.running, s.queue.Len()
	s.mu.Unlock()
	c := &s.c
	return Stats{
		Running: running, Queued: queued,
		Started: c.started.Load(), TiedStarted: c.tiedStarted.Load(),
		Refused: c.refused.Load(), Abandoned: c.abandoned.Load(), Dropped: c.dropped.Load(), NoSpare: c.noSpare.Load(),
		UnknownSibling: c.unknownSibling.Load(), BadTie: c.badTie.Load(),
		ClaimsWon: c.won.Load(), ClaimsLost: c.lost.Load(), ClaimsFailed: c.failed.Load(), ClaimsSkipped: c.skipped.Load(),
		ClaimsReceived: c.received.Load(), ClaimsEarly: c.early.Load(), ClaimsCrossed: c.granted.Load(),
		ClaimsRepeated: c.repeated.Load(), ClaimsRefused: c.refusedClaims.Load(), ClaimsRejected: c.rejected.Load(),
		ClaimLatencySum: time.Duration(c.latSum.Load()), ClaimLatencyMax: time.Duration(c.latMax.Load()),
	}
}

// ClaimLatencies returns the round trips of the most recent claims
// answered (up to 4,096), oldest first: see Stats.ClaimLatencySum.
func (s *Server) ClaimLatencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(s.latN, latencyRing)
	out := make([]time.Duration, 0, n)
	for i := s.latN - n; i < s.latN; i++ {
		out = append(out, s.lat[i%latencyRing])
	}
	return out
}

// CountBadTie counts a request whose tie headers did not parse, which the
// middleware then runs untied (Stats.BadTie). Middleware for other
// transports calls it.
func (s *Server) CountBadTie() { s.c.badTie.Add(1) }
