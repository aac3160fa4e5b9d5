package tied

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Sender delivers a signed claim (see Claim.Sign) to the peer at addr,
// one of Config.Peers, and returns the peer's answer: the name of a
// Verdict ("go" or "lost"). It must honour ctx. HTTPSender is the one
// Server.Handler's peers understand; package tiedgrpc has one for gRPC
// servers.
type Sender interface {
	SendClaim(ctx context.Context, addr, msg string) (answer string, err error)
}

// peer is what a Server knows of one of its Peers.
type peer struct {
	failures  atomic.Int64 // consecutive failed claims
	skipUntil atomic.Int64 // Unix nanoseconds: no probe before
	probing   atomic.Bool  // after a failure: the one claim in flight
}

// backoffAfter is how many consecutive failed claims to a peer start its
// ClaimBackoff between probes: one slow answer under a burst of load
// does not, and the next copy probes at once.
const backoffAfter = 3

// claim runs on the goroutine of a tied copy whose tie is claiming,
// queued or holding a worker: it claims the tie at the sibling's server,
// then starts the copy when it has a worker, or drops it.
func (s *Server) claim(ctx context.Context, w *waiter) (func(), error) {
	tt, t := w.t, w.tie
	s.event("claiming")
	p := s.peers[t.Sibling]
	acquired, probe := false, false
	mayClaim := true
	if p.failures.Load() > 0 {
		// The peer failed to answer its last claim: one claim at a time
		// probes it, after ClaimBackoff once it failed backoffAfter
		// times in a row.
		mayClaim = (s.backoff == 0 || s.now().UnixNano() >= p.skipUntil.Load()) && p.probing.CompareAndSwap(false, true)
		probe = mayClaim
	}
	if mayClaim {
		select {
		case s.claimSem <- struct{}{}:
			acquired = true
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				<-s.claimSem
				acquired = false
			}
		default:
		}
	}
	var verdict Verdict
	var err error
	sent := acquired
	if sent {
		verdict, err = s.sendClaim(ctx, tt, t)
		<-s.claimSem
		switch {
		case err == nil:
			p.failures.Store(0)
		case ctx.Err() == nil: // unanswered, not given up
			if p.failures.Add(1) >= backoffAfter && s.backoff > 0 {
				p.skipUntil.Store(s.now().Add(s.backoff).UnixNano())
			}
		}
	}
	if probe {
		p.probing.Store(false)
	}

	s.mu.Lock()
	now := s.now()
	var dropErr error
	switch {
	case tt.state == tieDropped:
		// The peer's crossing claim won while ours was in flight: we
		// answered it "go", so this copy must not run.
		dropErr = ErrDropped
	case sent && err != nil && ctx.Err() != nil:
		// The client left (or took the sibling's answer).
		dropErr = ctx.Err()
	case sent && err == nil && verdict == VerdictLost:
		s.c.lost.Add(1)
		dropErr = ErrDropped
	}
	if dropErr != nil {
		granted := s.leaveLocked(w, now)
		s.mu.Unlock()
		if dropErr == ErrDropped {
			s.dropped()
		} else {
			s.c.abandoned.Add(1)
			s.event("abandoned")
		}
		if granted {
			s.release()
		}
		return nil, dropErr
	}
	switch {
	case !sent:
		s.c.skipped.Add(1)
	case err != nil:
		s.c.failed.Add(1)
	default:
		s.c.won.Add(1)
	}
	if !w.granted {
		// Claimed ahead: wait for a worker.
		tt.state = tieWon
		s.mu.Unlock()
		s.event("waiting")
		select {
		case <-w.ready:
		case <-ctx.Done():
			s.mu.Lock()
			if w.elem != nil {
				s.leaveLocked(w, s.now())
				s.mu.Unlock()
				s.c.abandoned.Add(1)
				s.event("abandoned")
				return nil, ctx.Err()
			}
			s.mu.Unlock()
			<-w.ready // granted meanwhile: give the worker back
			s.mu.Lock()
			s.leaveLocked(w, s.now())
			s.mu.Unlock()
			s.c.abandoned.Add(1)
			s.event("abandoned")
			s.release()
			return nil, ctx.Err()
		}
		s.mu.Lock()
		now = s.now()
	}
	s.resolveLocked(tt, tieStarted, now)
	s.mu.Unlock()
	s.c.started.Add(1)
	s.c.tiedStarted.Add(1)
	return s.release, nil
}

// sendClaim sends tt's claim to t's sibling and waits for the verdict,
// at most ClaimTimeout.
func (s *Server) sendClaim(ctx context.Context, tt *tie, t Tie) (Verdict, error) {
	s.mu.Lock()
	ticket := tt.ticket
	s.mu.Unlock()
	start := s.now()
	msg := Claim{ID: t.ID, Ticket: ticket, Sent: start}.Sign(s.secret)
	cctx, cancel := context.WithTimeout(ctx, s.claimTimeout)
	defer cancel()
	answer, err := s.sender.SendClaim(cctx, t.Sibling, msg)
	if err != nil {
		return 0, err
	}
	v, err := ParseVerdict(answer)
	if err != nil {
		return 0, fmt.Errorf("tied: claim to %s: %w", t.Sibling, err)
	}
	s.latency(s.now().Sub(start))
	return v, nil
}

// Verdict is a server's answer to a peer's claim.
type Verdict int

const (
	// VerdictGo grants the claim: the receiver's copy of the tie was
	// dropped from its queue, or will be dropped on arrival, or was
	// dropped already; the claimant starts its copy.
	VerdictGo Verdict = iota + 1
	// VerdictLost refuses the claim: the receiver's copy started, or
	// is claiming with a lower ticket; the claimant drops its copy.
	VerdictLost
)

// String returns the verdict's wire name: "go" or "lost".
func (v Verdict) String() string {
	switch v {
	case VerdictGo:
		return "go"
	case VerdictLost:
		return "lost"
	}
	return "unknown"
}

// ErrBadVerdict is wrapped by ParseVerdict's error: a peer answered a
// claim with something other than a verdict.
var ErrBadVerdict = errors.New("tied: not a claim verdict")

// ParseVerdict parses a Verdict's wire name.
func ParseVerdict(s string) (Verdict, error) {
	switch strings.TrimSpace(s) {
	case "go":
		return VerdictGo, nil
	case "lost":
		return VerdictLost, nil
	}
	if len(s) > 16 {
		s = s[:16]
	}
	return 0, fmt.Errorf("%w: %q", ErrBadVerdict, s)
}

// ReceiveClaim authenticates a claim from a peer (see VerifyClaim) and
// answers it, atomically with respect to this server's own copy of the
// tie:
//
//   - a queued copy is dropped (Admit returns ErrDropped for it): go;
//   - a tie not seen yet is remembered, and its copy dropped on arrival
//     (a tombstone, forgotten 2*MaxSkew later or when MaxTies are
//     remembered): go;
//   - a copy dropped already (a repeated claim): go;
//   - a copy that started: lost;
//   - a copy whose own claim is in flight (the claims crossed): the
//     lower ticket wins, so the two servers agree. If the peer's is
//     lower, this copy will be dropped when its claim returns: go;
//     otherwise lost.
//
// A refused message is counted in Stats.ClaimsRejected and changes
// nothing; its error wraps ErrBadMessage.
func (s *Server) ReceiveClaim(msg string) (Verdict, error) {
	now := s.now()
	c, err := VerifyClaim(msg, s.secret, now, s.maxSkew)
	if err == nil && len(s.secret) == 0 {
		err = fmt.Errorf("%w: this server has no Config.Secret", ErrBadMessage)
	}
	if err != nil {
		s.c.rejected.Add(1)
		return 0, err
	}
	s.c.received.Add(1)
	s.mu.Lock()
	s.expire(now)
	tt := s.ties[c.ID]
	verdict, event := VerdictGo, ""
	switch {
	case tt == nil:
		tt = &tie{id: c.ID, state: tieEarly}
		s.ties[c.ID] = tt
		s.age(tt, now)
		s.c.early.Add(1)
		event = "early"
	case tt.state == tieQueued:
		s.leaveLocked(tt.w, now)
		event = "dropped"
	case tt.state == tieClaiming && c.Ticket < tt.ticket:
		// The peer's claim wins the crossing: ours, in flight (or
		// about to be sent), will find the tie dropped when it returns.
		// Out of the queue, so that no worker is given to it.
		if w := tt.w; w != nil && w.elem != nil {
			s.queue.Remove(w.elem)
			w.elem = nil
		}
		tt.state = tieDropped
		s.c.granted.Add(1)
		event = "crossed"
	case tt.state == tieClaiming, tt.state == tieWon, tt.state == tieStarted:
		verdict = VerdictLost
		s.c.refusedClaims.Add(1)
		event = "refused"
	default:
		s.c.repeated.Add(1)
		event = "repeated"
	}
	s.mu.Unlock()
	switch event {
	case "dropped":
		s.dropped()
	case "":
	default:
		s.event(event)
	}
	return verdict, nil
}
