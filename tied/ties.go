package tied

import (
	"math/rand/v2"
	"time"
)

// tie states.
const (
	tieQueued   = iota // its copy waits in the queue (w set)
	tieClaiming        // its claim is in flight (or about to be sent)
	tieWon             // its claim was granted (or failed): it starts when given a worker
	tieStarted         // its copy started here
	tieDropped         // its copy was dropped here (or left)
	tieEarly           // the peer's claim came before the copy: drop it on arrival
)

type tie struct {
	id      string
	state   int
	ticket  uint64  // once claiming
	w       *waiter // until resolved
	expires time.Time
}

// claimingLocked moves tt to the claiming state with a fresh ticket. s.mu
// is held.
func (s *Server) claimingLocked(tt *tie) {
	tt.state = tieClaiming
	tt.ticket = rand.Uint64()
}

// resolveLocked moves tt to its final state and schedules it to be
// forgotten. s.mu is held.
func (s *Server) resolveLocked(tt *tie, state int, now time.Time) {
	tt.state, tt.w = state, nil
	if s.ties[tt.id] == tt {
		s.age(tt, now)
	}
}

// age schedules tt to be forgotten. s.mu is held.
func (s *Server) age(tt *tie, now time.Time) {
	tt.expires = now.Add(s.ttl)
	s.aging = append(s.aging, tt)
	for len(s.aging)-s.agingAt > s.maxTies {
		s.forget(s.aging[s.agingAt])
		s.aging[s.agingAt] = nil
		s.agingAt++
	}
	if s.agingAt > 1024 && s.agingAt*2 > len(s.aging) {
		s.aging = append(s.aging[:0], s.aging[s.agingAt:]...)
		s.agingAt = 0
	}
}

// expire forgets the ties whose time is up. s.mu is held.
func (s *Server) expire(now time.Time) {
	for s.agingAt < len(s.aging) && !now.Before(s.aging[s.agingAt].expires) {
		s.forget(s.aging[s.agingAt])
		s.aging[s.agingAt] = nil
		s.agingAt++
	}
}

func (s *Server) forget(tt *tie) {
	if s.ties[tt.id] == tt && tt.state != tieQueued && tt.state != tieClaiming && tt.state != tieWon {
		delete(s.ties, tt.id)
	}
}
