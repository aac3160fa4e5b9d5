package tied

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config fields left at zero.
const (
	DefaultMaxQueue           = 1024
	DefaultMaxSkew            = 10 * time.Second
	DefaultMaxCancelsInFlight = 64
	DefaultCancelTimeout      = time.Second
	DefaultMaxTies            = 1 << 16
	// MinSecret is the shortest Config.Secret accepted, in bytes.
	MinSecret = 32
	// latencyRing is how many recent cancellation latencies are kept.
	latencyRing = 4096
)

// Errors of Admit. Match them with errors.Is.
var (
	// ErrQueueFull: the server runs Workers requests and its queue holds
	// MaxQueue more. HTTP answers 503, gRPC ResourceExhausted.
	ErrQueueFull = errors.New("tied: the server's queue is full")
	// ErrDropped: the copy was dropped without running, because its
	// sibling started first on the other server. HTTP answers 409 with
	// DroppedHeader, gRPC Aborted with a DroppedKey trailer. A client
	// treats it as "the other copy has it", not as a failure.
	ErrDropped = errors.New("tied: dropped because the sibling copy started first")
	// ErrInvalidConfig is wrapped by NewServer's and NewClient's errors for
	// a mistaken configuration.
	ErrInvalidConfig = errors.New("tied: invalid configuration")
)

// Sender delivers a signed cancel message (see Cancel.Sign) to the peer at
// addr, one of Config.Peers. It must honour ctx. HTTPSender is the one
// Server.Handler's peers understand; package tiedgrpc has one for gRPC
// servers.
type Sender interface {
	SendCancel(ctx context.Context, addr, msg string) error
}

// Config configures a Server. Workers is required; Secret and Peers are
// required for tied requests to be tied (without them every request is
// queued and run as an untied one).
type Config struct {
	// Workers is the most requests that run at once. Further requests
	// wait in a FIFO queue.
	Workers int
	// MaxQueue bounds the queue: a request that finds it full is refused
	// (ErrQueueFull). Zero means DefaultMaxQueue; negative means no
	// queue (a request that finds every worker busy is refused).
	MaxQueue int

	// Secret is the key, shared by every server of the service and by
	// nobody else, that signs and authenticates cancel messages: at
	// least MinSecret bytes of random data. Clients never need it.
	Secret []byte
	// Peers lists the addresses of the other servers of the service, as
	// clients name them in SiblingHeader and as Sender reaches them:
	// base URLs ("http://10.0.0.2:8080") for HTTPSender, host:port for
	// gRPC. A tied request whose sibling is not among them runs untied
	// (Stats.UnknownSibling): a client cannot make the server send
	// messages anywhere else.
	Peers []string
	// Sender delivers cancel messages to peers. Nil means an HTTPSender
	// with DefaultCancelPath.
	Sender Sender
	// MaxSkew is how old (or how far in the future) a cancel message's
	// timestamp may be. Zero means DefaultMaxSkew.
	MaxSkew time.Duration
	// MaxCancelsInFlight bounds the cancel messages being sent at once;
	// one more is not sent, and counted in Stats.CancelsShed. Zero means
	// DefaultMaxCancelsInFlight.
	MaxCancelsInFlight int
	// CancelTimeout bounds the sending of one cancel message. Zero means
	// DefaultCancelTimeout.
	CancelTimeout time.Duration
	// MaxTies bounds how many ties the server remembers (queued, started,
	// or cancelled before their copy arrived). Ties are forgotten
	// 2*MaxSkew after they started or were cancelled, or earlier, oldest
	// first, when there are more. Zero means DefaultMaxTies.
	MaxTies int

	// CancelPath is where Handler serves cancel messages, and where the
	// default Sender posts them on peers. Empty means DefaultCancelPath.
	CancelPath string

	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Server is the admission queue that a server's tied middleware (HTTP:
// Handler; gRPC: package tiedgrpc) runs requests through: at most Workers
// at once, the rest in a bounded FIFO queue, and tied copies dropped from
// the queue when their sibling starts elsewhere. Make one with NewServer;
// it is safe for concurrent use. Close it when the server stops.
type Server struct {
	workers, maxQueue int
	secret            []byte
	peers             map[string]bool
	sender            Sender
	maxSkew           time.Duration
	cancelTimeout     time.Duration
	maxTies           int
	ttl               time.Duration
	now               func() time.Time
	cancelPath        string

	sendSem   chan struct{}
	sendCtx   context.Context
	sendStop  context.CancelFunc
	sendWG    sync.WaitGroup
	closeOnce sync.Once

	mu      sync.Mutex
	closed  bool
	running int
	queue   list.List // of *waiter, oldest first
	ties    map[string]*tie
	aging   []*tie // ties in order of expiry (started, dropped, cancelled early)
	agingAt int    // index of the oldest live entry of aging
	lat     [latencyRing]time.Duration
	latN    int64

	c counters

	// hook, if set (by tests, before use), is told of events: "queued",
	// "abandoned", "dropped", "early", "too-late".
	hook func(event string)
}

type counters struct {
	started, tiedStarted, refused, abandoned, dropped, unknownSibling, badTie atomic.Int64
	sent, sendFailed, shed, received, tooLate, early, repeated, rejected      atomic.Int64
	latSum, latMax                                                            atomic.Int64
}

// tie states.
const (
	tieQueued  = iota // its copy waits in the queue (w set)
	tieStarted        // its copy started here
	tieDropped        // its copy was dropped here
	tieEarly          // a cancel came before the copy: drop it on arrival
)

type tie struct {
	id      string
	state   int
	w       *waiter
	expires time.Time
}

type waiter struct {
	ready   chan struct{} // closed when started or dropped
	dropped bool          // set before ready is closed
	elem    *list.Element // nil once out of the queue
	t       *tie          // nil for untied requests
	tie     Tie
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
	peers := map[string]bool{}
	for i, p := range cfg.Peers {
		a, err := NormalizeAddr(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("Peers[%d]: %v", i, err))
			continue
		}
		peers[a] = true
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxSkew", int64(cfg.MaxSkew)}, {"MaxCancelsInFlight", int64(cfg.MaxCancelsInFlight)}, {"CancelTimeout", int64(cfg.CancelTimeout)}, {"MaxTies", int64(cfg.MaxTies)}} {
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
		workers:       cfg.Workers,
		maxQueue:      cfg.MaxQueue,
		secret:        slices.Clone(cfg.Secret),
		peers:         peers,
		sender:        cfg.Sender,
		maxSkew:       cfg.MaxSkew,
		cancelTimeout: cfg.CancelTimeout,
		maxTies:       cfg.MaxTies,
		now:           cfg.Now,
		ties:          map[string]*tie{},
		cancelPath:    DefaultCancelPath,
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
	if s.cancelTimeout == 0 {
		s.cancelTimeout = DefaultCancelTimeout
	}
	if s.maxTies == 0 {
		s.maxTies = DefaultMaxTies
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
	n := cfg.MaxCancelsInFlight
	if n == 0 {
		n = DefaultMaxCancelsInFlight
	}
	s.sendSem = make(chan struct{}, n)
	s.sendCtx, s.sendStop = context.WithCancel(context.Background())
	return s, nil
}

// Close stops sending cancel messages, waits for those in flight (each
// bounded by CancelTimeout), and closes the idle connections of the Sender if it has a
// CloseIdleConnections method. Requests keep being admitted and run (a
// started tied copy then just does not cancel its sibling). It returns
// nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.sendWG.Wait()
		s.sendStop()
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
// request whose sibling is among Config.Peers is queued too; when it
// leaves the queue to start, the server signs a cancel message and sends
// it to the sibling's server, which drops the sibling if it is still
// queued. If this server has received such a message for t already, or
// does while t waits, Admit returns ErrDropped without running it.
//
// It returns ErrQueueFull at once if the queue is full, and ctx's error
// if ctx ends while the request waits (it then leaves the queue).
func (s *Server) Admit(ctx context.Context, t Tie) (release func(), err error) {
	if t.Tied() && (len(s.secret) == 0 || !s.peers[t.Sibling]) {
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
		var send []Tie
		send = s.startLocked(send, tt, t, now)
		s.mu.Unlock()
		s.sendCancels(send, now)
		return s.release, nil
	}
	if s.queue.Len() >= s.maxQueue {
		s.mu.Unlock()
		s.c.refused.Add(1)
		return nil, ErrQueueFull
	}
	w := &waiter{ready: make(chan struct{}), t: tt, tie: t}
	w.elem = s.queue.PushBack(w)
	if tt != nil {
		tt.w = w
		s.ties[t.ID] = tt
	}
	s.mu.Unlock()
	s.event("queued")

	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if w.elem != nil { // still queued: leave
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
		s.mu.Unlock()
		<-w.ready // started or dropped meanwhile
		if !w.dropped {
			s.release() // started: give the worker to the next one
			return nil, ctx.Err()
		}
	}
	if w.dropped {
		return nil, ErrDropped
	}
	return s.release, nil
}

func (s *Server) event(e string) {
	if s.hook != nil {
		s.hook(e)
	}
}

// startLocked records the start of a request (tt and t: its tie, if tied)
// and appends to send the ties whose siblings to cancel. s.mu is held.
func (s *Server) startLocked(send []Tie, tt *tie, t Tie, now time.Time) []Tie {
	s.c.started.Add(1)
	if tt == nil {
		return send
	}
	s.c.tiedStarted.Add(1)
	tt.state, tt.w = tieStarted, nil
	s.ties[tt.id] = tt
	s.age(tt, now)
	return append(send, t)
}

// release frees a worker: the next queued request, if any, starts.
func (s *Server) release() {
	s.mu.Lock()
	now := s.now()
	s.running--
	var send []Tie
	if e := s.queue.Front(); e != nil && s.running < s.workers {
		w := s.queue.Remove(e).(*waiter)
		w.elem = nil
		s.running++
		send = s.startLocked(send, w.t, w.tie, now)
		close(w.ready)
	}
	s.mu.Unlock()
	s.sendCancels(send, now)
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
	if s.ties[tt.id] == tt && tt.state != tieQueued {
		delete(s.ties, tt.id)
	}
}

// sendCancels sends a signed cancel message for each tie to its sibling's
// server, each on its own goroutine, as far as MaxCancelsInFlight allows.
func (s *Server) sendCancels(ties []Tie, started time.Time) {
	for _, t := range ties {
		select {
		case s.sendSem <- struct{}{}:
		default:
			s.c.shed.Add(1)
			continue
		}
		s.mu.Lock()
		closed := s.closed
		if !closed {
			s.sendWG.Add(1)
		}
		s.mu.Unlock()
		if closed {
			<-s.sendSem
			s.c.shed.Add(1)
			continue
		}
		msg := Cancel{ID: t.ID, Started: started}.Sign(s.secret)
		go func(addr string) {
			defer s.sendWG.Done()
			defer func() { <-s.sendSem }()
			ctx, cancel := context.WithTimeout(s.sendCtx, s.cancelTimeout)
			defer cancel()
			if err := s.sender.SendCancel(ctx, addr, msg); err != nil {
				s.c.sendFailed.Add(1)
				return
			}
			s.c.sent.Add(1)
		}(t.Sibling)
	}
}

// Outcome is what a received cancel message did.
type Outcome int

const (
	// OutcomeDropped: the copy was queued and is dropped.
	OutcomeDropped Outcome = iota + 1
	// OutcomeTooLate: the copy had started; both copies run.
	OutcomeTooLate
	// OutcomeEarly: the copy has not arrived; it will be dropped on
	// arrival.
	OutcomeEarly
	// OutcomeRepeated: the tie was cancelled already.
	OutcomeRepeated
)

// String returns the outcome's wire name: "dropped", "too-late", "early"
// or "repeated".
func (o Outcome) String() string {
	switch o {
	case OutcomeDropped:
		return "dropped"
	case OutcomeTooLate:
		return "too-late"
	case OutcomeEarly:
		return "early"
	case OutcomeRepeated:
		return "repeated"
	}
	return "unknown"
}

// ReceiveCancel authenticates a cancel message from a peer (see
// VerifyCancel) and acts on it: a queued copy of its tie is dropped
// (Admit returns ErrDropped for it); a copy that has started runs on
// (Stats.CancelsTooLate); a tie not seen yet is remembered, and its copy
// dropped on arrival. A refused message is counted in
// Stats.CancelsRejected and changes nothing; its error wraps
// ErrBadMessage.
func (s *Server) ReceiveCancel(msg string) (Outcome, error) {
	now := s.now()
	c, err := VerifyCancel(msg, s.secret, now, s.maxSkew)
	if err == nil && len(s.secret) == 0 {
		err = fmt.Errorf("%w: this server has no Config.Secret", ErrBadMessage)
	}
	if err != nil {
		s.c.rejected.Add(1)
		return 0, err
	}
	s.c.received.Add(1)
	s.latency(now.Sub(c.Started))
	s.mu.Lock()
	s.expire(now)
	tt := s.ties[c.ID]
	var out Outcome
	switch {
	case tt == nil:
		tt = &tie{id: c.ID, state: tieEarly}
		s.ties[c.ID] = tt
		s.age(tt, now)
		out = OutcomeEarly
	case tt.state == tieQueued:
		w := tt.w
		s.queue.Remove(w.elem)
		w.elem = nil
		w.dropped = true
		close(w.ready)
		tt.state, tt.w = tieDropped, nil
		s.age(tt, now)
		out = OutcomeDropped
	case tt.state == tieStarted:
		out = OutcomeTooLate
	default:
		out = OutcomeRepeated
	}
	s.mu.Unlock()
	switch out {
	case OutcomeDropped:
		s.dropped()
	case OutcomeTooLate:
		s.c.tooLate.Add(1)
		s.event("too-late")
	case OutcomeEarly:
		s.c.early.Add(1)
		s.event("early")
	case OutcomeRepeated:
		s.c.repeated.Add(1)
	}
	return out, nil
}

// dropped counts a dropped copy.
func (s *Server) dropped() {
	s.c.dropped.Add(1)
	s.event("dropped")
}

// latency records the cancellation latency d of a received message.
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
	// Running and Queued are the requests running and waiting now.
	Running, Queued int
	// Started counts requests that started (tied or not); TiedStarted
	// the tied copies among them. Summed over the servers of a service,
	// TiedStarted minus the tied calls is the number of calls of which
	// both copies started: the duplicated executions.
	Started, TiedStarted int64
	// Refused counts requests refused because the queue was full.
	Refused int64
	// Abandoned counts requests that left the queue because their
	// context ended (the client went away, or took the sibling's answer).
	Abandoned int64
	// Dropped counts tied copies dropped without running because their
	// sibling started first: removed from the queue, or refused on
	// arrival after an early cancel.
	Dropped int64
	// UnknownSibling counts tied requests whose sibling was not among
	// Config.Peers (or which came while the server had no Secret): they
	// ran untied.
	UnknownSibling int64
	// BadTie counts requests with malformed tie headers: they ran
	// untied.
	BadTie int64

	// CancelsSent counts cancel messages delivered to a peer;
	// CancelsFailed those whose sending failed; CancelsShed those not
	// sent because MaxCancelsInFlight were in flight (or the Server was
	// closed).
	CancelsSent, CancelsFailed, CancelsShed int64
	// CancelsReceived counts authentic cancel messages received; of
	// them, CancelsTooLate found their copy started (both copies ran),
	// CancelsEarly came before their copy (which was then dropped on
	// arrival), CancelsRepeated named a tie already cancelled. The rest
	// dropped a queued copy.
	CancelsReceived, CancelsTooLate, CancelsEarly, CancelsRepeated int64
	// CancelsRejected counts cancel messages refused: malformed, forged
	// (bad signature) or stale.
	CancelsRejected int64

	// CancelLatencySum and CancelLatencyMax are the sum and maximum, over
	// the CancelsReceived, of the cancellation latency: the time from the
	// start of a copy (the timestamp of its cancel message, on its
	// server's clock) to the message acting here (this server's clock),
	// dropping the sibling if it was queued. It is the real counterpart of
	// the simulator's cancellation delay. (A message that comes before
	// its copy drops that copy on arrival, later.)
	CancelLatencySum, CancelLatencyMax time.Duration
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
		CancelsSent: c.sent.Load(), CancelsFailed: c.sendFailed.Load(), CancelsShed: c.shed.Load(),
		CancelsReceived: c.received.Load(), CancelsTooLate: c.tooLate.Load(), CancelsEarly: c.early.Load(),
		CancelsRepeated: c.repeated.Load(), CancelsRejected: c.rejected.Load(),
		CancelLatencySum: time.Duration(c.latSum.Load()), CancelLatencyMax: time.Duration(c.latMax.Load()),
	}
}

// CancelLatencies returns the cancellation latencies of the most recent
// cancel messages received (up to 4,096), oldest first: see
// Stats.CancelLatencySum.
func (s *Server) CancelLatencies() []time.Duration {
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
