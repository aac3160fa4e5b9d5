package tied

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config fields left at zero.
const (
	DefaultMaxQueue          = 1024
	DefaultMaxSkew           = 10 * time.Second
	DefaultMaxClaimsInFlight = 64
	DefaultClaimTimeout      = 100 * time.Millisecond
	DefaultClaimBackoff      = 100 * time.Millisecond
	DefaultClaimAhead        = 1
	DefaultMaxTies           = 1 << 16
	// MinSecret is the shortest Config.Secret accepted, in bytes.
	MinSecret = 32
	// latencyRing is how many recent claim round trips are kept.
	latencyRing = 4096
)

// Errors of Admit. Match them with errors.Is.
var (
	// ErrQueueFull: the server runs Workers requests and its queue holds
	// MaxQueue more. HTTP answers 503, gRPC ResourceExhausted.
	ErrQueueFull = errors.New("tied: the server's queue is full")
	// ErrDropped: the copy was dropped without running, because its
	// sibling won the right to start on the other server. HTTP answers
	// 409 with DroppedHeader, gRPC Aborted with a DroppedKey trailer. A
	// client treats it as "the other copy has it", not as a failure.
	ErrDropped = errors.New("tied: dropped because the sibling copy started first")
	// ErrInvalidConfig is wrapped by NewServer's and NewClient's errors for
	// a mistaken configuration.
	ErrInvalidConfig = errors.New("tied: invalid configuration")
)

// Sender delivers a signed claim (see Claim.Sign) to the peer at addr,
// one of Config.Peers, and returns the peer's answer: the name of a
// Verdict ("go" or "lost"). It must honour ctx. HTTPSender is the one
// Server.Handler's peers understand; package tiedgrpc has one for gRPC
// servers.
type Sender interface {
	SendClaim(ctx context.Context, addr, msg string) (answer string, err error)
}

// Config configures a Server. Workers is required; Secret and Peers are
// required for tied requests to be tied (without them every request is
// queued and run as an untied one).
type Config struct {
	// Workers is the most requests that run at once. Further requests
	// wait in a FIFO queue. A tied copy holds its worker while its claim
	// is in flight.
	Workers int
	// MaxQueue bounds the queue: a request that finds it full is refused
	// (ErrQueueFull). Zero means DefaultMaxQueue; negative means no
	// queue (a request that finds every worker busy is refused).
	MaxQueue int

	// Secret is the key, shared by every server of the service and by
	// nobody else, that signs and authenticates claims: at least
	// MinSecret bytes of random data. Clients never need it.
	Secret []byte
	// Peers lists the addresses of the other servers of the service, as
	// clients name them in SiblingHeader and as Sender reaches them:
	// base URLs ("http://10.0.0.2:8080") for HTTPSender, host:port for
	// gRPC. A tied request whose sibling is not among them runs untied
	// (Stats.UnknownSibling): a client cannot make the server send
	// messages anywhere else.
	Peers []string
	// Sender delivers claims to peers. Nil means an HTTPSender with
	// CancelPath.
	Sender Sender
	// MaxSkew is how old (or how far in the future) a claim's timestamp
	// may be. Zero means DefaultMaxSkew.
	MaxSkew time.Duration
	// MaxClaimsInFlight bounds the claims this server has in flight at
	// once (they are sent by copies holding a worker or next in the
	// queue, so Workers + ClaimAhead bounds them too); a copy that would
	// send one more starts without claiming, counted in
	// Stats.ClaimsSkipped. Zero means DefaultMaxClaimsInFlight.
	MaxClaimsInFlight int
	// ClaimTimeout bounds the wait for a claim's answer; a copy whose
	// claim is not answered in time starts anyway (Stats.ClaimsFailed).
	// Zero means DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// ClaimBackoff is the time between probes of a peer that failed to
	// answer three claims in a row. After a claim to a peer fails (it is
	// not answered within ClaimTimeout, or answered with an error), only
	// one claim at a time is sent to that peer, a probe, until one is
	// answered again; copies whose sibling is there start without
	// claiming meanwhile (Stats.ClaimsSkipped). So a dead or hung peer
	// makes one copy wait ClaimTimeout per ClaimBackoff plus
	// ClaimTimeout, not one per request. Zero means DefaultClaimBackoff;
	// negative means none: the next copy probes as soon as a probe
	// failed, still one at a time.
	ClaimBackoff time.Duration
	// ClaimAhead is how many of the next requests of the queue, when
	// they are tied copies, claim their tie while still queued, each
	// time a worker frees (and the request at the head is given it), so
	// that the claim's round trip overlaps their wait instead of idling
	// the worker they will be given. Zero means DefaultClaimAhead;
	// negative means none: a copy claims when it is given a worker,
	// holding it, and the worker idles for the round trip. Claiming ahead
	// commits a call to this server before a worker is free for it: if
	// the running requests then stall, the call waits for them, where a
	// copy claiming at start would have been dropped for its sibling.
	// Only a worker freeing triggers it, so a server already stalled
	// commits nothing more.
	ClaimAhead int
	// MaxTies bounds how many ties the server remembers (queued,
	// claiming, started, dropped, or claimed by the peer before their
	// copy arrived). Resolved ties are forgotten 2*MaxSkew after, or
	// earlier, oldest first, when there are more. Zero means
	// DefaultMaxTies.
	MaxTies int

	// CancelPath is where Handler serves claims from peers, and where
	// the default Sender posts them on peers. Empty means
	// DefaultCancelPath.
	CancelPath string

	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Server is the admission queue that a server's tied middleware (HTTP:
// Handler; gRPC: package tiedgrpc) runs requests through: at most Workers
// at once, the rest in a bounded FIFO queue, and a tied copy started only
// once the sibling's server granted its claim (see the package
// documentation). Make one with NewServer; it is safe for concurrent use.
// Close it when the server stops.
type Server struct {
	workers, maxQueue int
	secret            []byte
	peers             map[string]*peer
	sender            Sender
	maxSkew           time.Duration
	claimTimeout      time.Duration
	backoff           time.Duration
	claimAhead        int
	maxTies           int
	ttl               time.Duration
	now               func() time.Time
	cancelPath        string

	claimSem  chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	closed  bool
	running int
	queue   list.List // of *waiter, oldest first
	ties    map[string]*tie
	aging   []*tie // resolved ties in order of expiry
	agingAt int    // index of the oldest live entry of aging
	lat     [latencyRing]time.Duration
	latN    int64

	c counters

	// hook, if set (by tests, before use), is told of events: "queued",
	// "abandoned", "dropped", "early", "claiming" (before a claim is
	// sent), "waiting" (a claim ahead won), and for claims received
	// "refused" (answered lost), "crossed" (won against this server's
	// claim), "repeated".
	hook func(event string)
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

type counters struct {
	started, tiedStarted, refused, abandoned, dropped, unknownSibling, badTie atomic.Int64
	won, lost, failed, skipped                                                atomic.Int64
	received, granted, early, repeated, refusedClaims, rejected               atomic.Int64
	latSum, latMax                                                            atomic.Int64
}

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

// NewServer validates cfg and returns a Server. The error lists every
// mistake in cfg and matches ErrInvalidConfig.
func NewServer(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Workers <= 0 {
		errs = append(errs, fmt.Errorf("Workers is %d: set the most requests the server runs at once (at least 1)", cfg.Workers))
	}
	if len(cfg.Peers) > 0 && len(cfg.Secret) < MinSecret {
		errs = append(errs, fmt.Errorf("Secret has %d bytes: share at least %d random bytes among the servers, so that nobody else can cancel their work", len(cfg.Secret), MinSecret))
	}
	if len(cfg.Secret) > 0 && len(cfg.Secret) < MinSecret {
		errs = append(errs, fmt.Errorf("Secret has %d bytes, fewer than %d: use a longer random secret", len(cfg.Secret), MinSecret))
	}
	peers := map[string]*peer{}
	for i, p := range cfg.Peers {
		a, err := NormalizeAddr(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("Peers[%d]: %v", i, err))
			continue
		}
		peers[a] = &peer{}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxSkew", int64(cfg.MaxSkew)}, {"MaxClaimsInFlight", int64(cfg.MaxClaimsInFlight)}, {"ClaimTimeout", int64(cfg.ClaimTimeout)}, {"MaxTies", int64(cfg.MaxTies)}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative: leave it zero for the default", f.name))
		}
	}
	if cfg.CancelPath != "" && !strings.HasPrefix(cfg.CancelPath, "/") {
		errs = append(errs, fmt.Errorf("CancelPath %q does not start with a slash: write a path such as %s", cfg.CancelPath, DefaultCancelPath))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	s := &Server{
		workers:      cfg.Workers,
		maxQueue:     cfg.MaxQueue,
		secret:       slices.Clone(cfg.Secret),
		peers:        peers,
		sender:       cfg.Sender,
		maxSkew:      cfg.MaxSkew,
		claimTimeout: cfg.ClaimTimeout,
		backoff:      cfg.ClaimBackoff,
		claimAhead:   cfg.ClaimAhead,
		maxTies:      cfg.MaxTies,
		now:          cfg.Now,
		ties:         map[string]*tie{},
		cancelPath:   DefaultCancelPath,
	}
	switch {
	case s.maxQueue == 0:
		s.maxQueue = DefaultMaxQueue
	case s.maxQueue < 0:
		s.maxQueue = 0
	}
	if s.maxSkew == 0 {
		s.maxSkew = DefaultMaxSkew
	}
	if s.claimTimeout == 0 {
		s.claimTimeout = DefaultClaimTimeout
	}
	switch {
	case s.backoff == 0:
		s.backoff = DefaultClaimBackoff
	case s.backoff < 0:
		s.backoff = 0
	}
	if s.maxTies == 0 {
		s.maxTies = DefaultMaxTies
	}
	switch {
	case s.claimAhead == 0:
		s.claimAhead = DefaultClaimAhead
	case s.claimAhead < 0:
		s.claimAhead = 0
	}
	s.ttl = 2 * s.maxSkew
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.CancelPath != "" {
		s.cancelPath = cfg.CancelPath
	}
	if s.sender == nil {
		s.sender = NewHTTPSender(nil, s.cancelPath)
	}
	n := cfg.MaxClaimsInFlight
	if n == 0 {
		n = DefaultMaxClaimsInFlight
	}
	s.claimSem = make(chan struct{}, n)
	return s, nil
}

// Close stops sending claims (a tied copy then starts without claiming,
// counted in Stats.ClaimsSkipped) and closes the idle connections of the
// Sender if it has a CloseIdleConnections method. Requests keep being
// admitted and run, and claims from peers answered. Claims are sent on
// the goroutines of the requests they admit, so Close has none to wait
// for. It returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if c, ok := s.sender.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	})
	return nil
}

// Admit waits until the request may run, and returns the function to call
// when it has finished, which frees its worker for the next request in
// the queue. It must be called exactly once.
//
// An untied request (the zero Tie) is queued and run in FIFO order. A tied
// request whose sibling is among Config.Peers is queued too, and claims
// the tie at the sibling's server (see Claim), on the caller's goroutine,
// before it starts: when it is given a worker, holding it, or, with
// Config.ClaimAhead, when a worker frees and it is among the next
// ClaimAhead requests of the queue. If the claim is granted, the request runs when it has a
// worker; if it is lost (the sibling started, or won a crossing claim),
// Admit returns ErrDropped (freeing the worker if it held one); if it is
// not answered within Config.ClaimTimeout, the request runs anyway. If
// the sibling's server claimed the tie first (before t arrived, or while
// it waits), Admit returns ErrDropped without running it.
//
// It returns ErrQueueFull at once if the queue is full, and ctx's error
// if ctx ends while the request waits or claims (it then leaves the
// queue, or frees its worker).
func (s *Server) Admit(ctx context.Context, t Tie) (release func(), err error) {
	if t.Tied() && (len(s.secret) == 0 || s.peers[t.Sibling] == nil) {
		s.c.unknownSibling.Add(1)
		t = Tie{}
	}
	s.mu.Lock()
	now := s.now()
	s.expire(now)
	var tt *tie
	if t.Tied() {
		switch old := s.ties[t.ID]; {
		case old == nil:
			tt = &tie{id: t.ID, state: tieQueued}
		case old.state == tieEarly:
			old.state = tieDropped
			s.mu.Unlock()
			s.dropped()
			return nil, ErrDropped
		default:
			// Both copies here, or an identifier used twice: run it
			// untied rather than let one copy cancel the other.
			t = Tie{}
		}
	}
	if s.running < s.workers && s.queue.Len() == 0 {
		s.running++
		if tt == nil {
			s.c.started.Add(1)
			s.mu.Unlock()
			return s.release, nil
		}
		w := &waiter{granted: true, t: tt, tie: t}
		tt.w = w
		s.claimingLocked(tt)
		s.ties[tt.id] = tt
		s.mu.Unlock()
		return s.claim(ctx, w)
	}
	if s.queue.Len() >= s.maxQueue {
		s.mu.Unlock()
		s.c.refused.Add(1)
		return nil, ErrQueueFull
	}
	w := &waiter{ready: make(chan struct{}), t: tt, tie: t}
	w.elem = s.queue.PushBack(w)
	if tt != nil {
		w.claimNow = make(chan struct{})
		tt.w = w
		s.ties[t.ID] = tt
	}
	s.mu.Unlock()
	s.event("queued")

	select {
	case <-w.ready:
		if w.dropped {
			return nil, ErrDropped
		}
		if tt == nil {
			return s.release, nil
		}
		return s.claim(ctx, w) // granted a worker before claiming ahead
	case <-w.claimNow:
		return s.claim(ctx, w)
	case <-ctx.Done():
		s.mu.Lock()
		if w.elem != nil { // still queued, no claim sent: leave
			s.queue.Remove(w.elem)
			w.elem = nil
			if tt != nil && s.ties[tt.id] == tt {
				delete(s.ties, tt.id)
			}
			s.mu.Unlock()
			s.c.abandoned.Add(1)
			s.event("abandoned")
			return nil, ctx.Err()
		}
		if tt != nil && !w.granted && tt.state == tieDropped {
			// Taken out of the queue by the peer's crossing claim.
			s.resolveLocked(tt, tieDropped, s.now())
			s.mu.Unlock()
			s.dropped()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		<-w.ready // granted a worker or dropped meanwhile
		if !w.dropped {
			if tt != nil {
				s.mu.Lock()
				s.resolveLocked(tt, tieDropped, s.now())
				s.mu.Unlock()
			}
			s.release() // give the worker to the next one
		}
		return nil, ctx.Err()
	}
}

func (s *Server) event(e string) {
	if s.hook != nil {
		s.hook(e)
	}
}

// claimingLocked moves tt to the claiming state with a fresh ticket. s.mu
// is held.
func (s *Server) claimingLocked(tt *tie) {
	tt.state = tieClaiming
	tt.ticket = rand.Uint64()
}

// lookaheadLocked tells the tied copies among the next ClaimAhead
// requests of the queue that have not claimed yet to claim ahead. It is
// called when a worker frees, so that only a server that makes progress
// commits calls to itself. s.mu is held.
func (s *Server) lookaheadLocked() {
	i := 0
	for e := s.queue.Front(); e != nil && i < s.claimAhead; e = e.Next() {
		w := e.Value.(*waiter)
		if w.t != nil && w.t.state == tieQueued {
			s.claimingLocked(w.t)
			close(w.claimNow)
		}
		i++
	}
}

// resolveLocked moves tt to its final state and schedules it to be
// forgotten. s.mu is held.
func (s *Server) resolveLocked(tt *tie, state int, now time.Time) {
	tt.state, tt.w = state, nil
	if s.ties[tt.id] == tt {
		s.age(tt, now)
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

// release frees a worker: the next queued request, if any, is given it.
func (s *Server) release() {
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
		case w.t.state == tieQueued:
			s.claimingLocked(w.t) // it claims holding the worker
		}
		close(w.ready)
		s.lookaheadLocked()
	}
	s.mu.Unlock()
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
		Refused: c.refused.Load(), Abandoned: c.abandoned.Load(), Dropped: c.dropped.Load(),
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
