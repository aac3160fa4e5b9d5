package tied

import (
	"container/list"
	"time"

	"github.com/tailcut/hedge"
)

// A waiter is a request in the queue, or a tied copy that holds a worker
// while it claims.
type waiter struct {
	ready    chan struct{} // closed when granted a worker or dropped
	claimNow chan struct{} // tied: closed when it should claim ahead
	dropped  bool          // set before ready is closed
	granted  bool          // it holds a worker
	elem     *list.Element // nil once out of the queue
	t        *tie          // nil for untied requests
	tie      Tie
}

// Load returns the Server's load now, as it reports it with an answer
// (see hedge.Load): the requests holding a worker, those queued, its
// workers, and how many times a worker was released since it was made.
// Call it while the answered request still holds its worker, and take one
// from Running: the report is of the others.
func (s *Server) Load() hedge.Load {
	s.mu.Lock()
	ld := hedge.Load{Running: s.running, Queued: s.queue.Len(), Workers: s.workers}
	s.mu.Unlock()
	ld.Done = s.c.done.Load()
	return ld
}

// lookaheadLocked tells the tied copies among the next ClaimAhead
// requests of the queue that have not claimed yet to claim ahead. It is
// called when a worker frees, so that only a server that makes progress
// commits calls to itself. s.mu is held.
func (s *Server) lookaheadLocked() {
	i := 0
	for e := s.queue.Front(); e != nil && i < s.claimAhead; e = e.Next() {
		w := e.Value.(*waiter)
		if w.t != nil && w.t.state == tieQueued && w.tie.Role != RolePrimary {
			s.claimingLocked(w.t)
			close(w.claimNow)
		}
		i++
	}
}

// leaveLocked drops w's copy: out of the queue if it is there. It
// reports whether w holds a worker, to be released once s.mu is not
// held. s.mu is held.
func (s *Server) leaveLocked(w *waiter, now time.Time) (granted bool) {
	s.resolveLocked(w.t, tieDropped, now)
	if w.elem != nil {
		s.queue.Remove(w.elem)
		w.elem = nil
		w.dropped = true
		close(w.ready)
	}
	return w.granted
}

// release frees a worker: the next queued request, if any, is given it.
func (s *Server) release() {
	s.c.done.Add(1)
	s.mu.Lock()
	s.running--
	if e := s.queue.Front(); e != nil && s.running < s.workers {
		w := s.queue.Remove(e).(*waiter)
		w.elem = nil
		w.granted = true
		s.running++
		switch {
		case w.t == nil:
			s.c.started.Add(1)
		case w.tie.Role == RolePrimary:
			s.startPrimaryLocked(w.t, s.now())
		case w.t.state == tieQueued:
			s.claimingLocked(w.t) // it claims holding the worker
		}
		close(w.ready)
		s.lookaheadLocked()
	}
	s.mu.Unlock()
}
