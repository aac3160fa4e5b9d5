package tied

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/wire"
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
	ErrDropped = wire.ErrTiedDropped
	// ErrNoSpare: a spare copy (RoleSpare) found no free worker, and was
	// refused at once rather than queued behind other requests. It
	// matches ErrDropped too (errors.Is), for a client treats it alike:
	// the other copy, the primary, has the call. HTTP answers 409 with
	// DroppedHeader "no-spare", gRPC Aborted with a DroppedKey trailer
	// "no-spare".
	ErrNoSpare = wire.ErrTiedNoSpare
	// ErrInvalidConfig is wrapped by NewServer's and NewClient's errors for
	// a mistaken configuration.
	ErrInvalidConfig = wire.ErrTiedInvalidConfig
)

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
	// ClaimPath.
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

	// ClaimPath is where Handler serves claims from peers, and where
	// the default Sender posts them on peers. Empty means
	// DefaultClaimPath. When it is DefaultClaimPath or
	// DefaultCancelPath, Handler serves claims at both, so that servers
	// that post to either reach it.
	ClaimPath string
	// CancelPath is the earlier name of ClaimPath: setting it sets
	// ClaimPath. Setting both, to different paths, is an error.
	//
	// Deprecated: use ClaimPath.
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
	claimPath         string

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

// NewServer validates cfg and returns a Server. The error lists every
// mistake in cfg and matches ErrInvalidConfig.
func NewServer(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Workers <= 0 {
		errs = append(errs, fmt.Errorf("Config.Workers is %d: set the most requests the server runs at once (at least 1)", cfg.Workers))
	}
	if len(cfg.Peers) > 0 && len(cfg.Secret) < MinSecret {
		errs = append(errs, fmt.Errorf("Config.Secret has %d bytes: share at least %d random bytes among the servers, so that nobody else can cancel their work", len(cfg.Secret), MinSecret))
	}
	if len(cfg.Secret) > 0 && len(cfg.Secret) < MinSecret {
		errs = append(errs, fmt.Errorf("Config.Secret has %d bytes, fewer than %d: use a longer random secret", len(cfg.Secret), MinSecret))
	}
	peers := map[string]*peer{}
	for i, p := range cfg.Peers {
		a, err := NormalizeAddr(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("Config.Peers[%d]: %v", i, err))
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
	claimPath, pathField := cfg.ClaimPath, "ClaimPath"
	if claimPath == "" {
		claimPath, pathField = cfg.CancelPath, "CancelPath"
	}
	if cfg.ClaimPath != "" && cfg.CancelPath != "" && cfg.ClaimPath != cfg.CancelPath {
		errs = append(errs, fmt.Errorf("ClaimPath %q and CancelPath %q differ: CancelPath is the deprecated name of ClaimPath; set ClaimPath only", cfg.ClaimPath, cfg.CancelPath))
	}
	if claimPath != "" && !strings.HasPrefix(claimPath, "/") {
		errs = append(errs, fmt.Errorf("%s %q does not start with a slash: write a path such as %s", pathField, claimPath, DefaultClaimPath))
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
		claimPath:    DefaultClaimPath,
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
	if claimPath != "" {
		s.claimPath = claimPath
	}
	if s.sender == nil {
		s.sender = NewHTTPSender(nil, s.claimPath)
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
	spare := t.Tied() && t.Role == RoleSpare
	if t.Tied() && (len(s.secret) == 0 || s.peers[t.Sibling] == nil) {
		s.c.unknownSibling.Add(1)
		if spare {
			// It cannot claim its tie here; run untied, it could
			// run twice.
			s.c.noSpare.Add(1)
			return nil, ErrNoSpare
		}
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
		case spare:
			s.mu.Unlock()
			s.c.noSpare.Add(1)
			return nil, ErrNoSpare
		default:
			// Both copies here, or an identifier used twice: run it
			// untied rather than let one copy cancel the other.
			t, tt = Tie{}, nil
		}
	}
	free := s.running < s.workers && s.queue.Len() == 0
	if spare && !free {
		s.mu.Unlock()
		s.c.noSpare.Add(1)
		return nil, ErrNoSpare
	}
	if free {
		s.running++
		if tt == nil {
			s.c.started.Add(1)
			s.mu.Unlock()
			return s.release, nil
		}
		if t.Role == RolePrimary {
			s.ties[tt.id] = tt
			s.startPrimaryLocked(tt, now)
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
		if t.Role != RolePrimary { // a primary never claims
			w.claimNow = make(chan struct{})
		}
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
		if tt == nil || t.Role == RolePrimary { // started by release
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

// startPrimaryLocked starts the primary copy of tt, given a worker: its
// tie is resolved as started, so that its spare's claim, if it comes, is
// answered lost. s.mu is held.
func (s *Server) startPrimaryLocked(tt *tie, now time.Time) {
	s.resolveLocked(tt, tieStarted, now)
	s.c.started.Add(1)
	s.c.tiedStarted.Add(1)
}

func (s *Server) event(e string) {
	if s.hook != nil {
		s.hook(e)
	}
}
