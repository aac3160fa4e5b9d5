package sim

import (
	"math"

	"github.com/tailcut/hedge/internal/decide"
)

// view is what one client sees of one queue: its own copies there and
// their answers, as a Hedger sees its own requests in flight on a replica
// and nothing of other clients'.
type view struct {
	busy int32  // this client's copies waiting or in service on the queue
	left uint32 // of them, those the queue completed, modulo 2^32 (decide.Behind)
	// ghostUntil: a copy of this client was cancelled on the queue because
	// another copy of its request won, and the queue has completed none of
	// this client's copies since (see fifo.ghostUntil).
	ghostUntil float64
	// group and pure are fifo's, for this client's copies only.
	group int32
	pure  bool
	// With Config.LoadReports, the queue's last report to this client
	// (its copies after the answer left, and its answers, at repAt; repAt
	// 0 for none) and the copies the client placed there since.
	repAt   float64
	repBusy int32
	repLeft uint32
	sent    int32
}

// report returns the client's last report of a queue as the decision
// reads it.
func (e *engine) report(v *view) decide.Report {
	if v.repAt == 0 {
		return decide.Report{}
	}
	return decide.Report{At: max(toDuration(v.repAt), 1), Present: int(v.repBusy), Workers: e.workers, Done: int64(v.repLeft)}
}

// clientsN returns how many clients the run has: at least one.
func (e *engine) clientsN() int { return max(1, e.c.Clients) }

// initClients sets up the clients of a run on nq queues: with more than
// one, their views of every queue and the cumulative shares a request's
// client is drawn from.
func (e *engine) initClients(c Config, nq int) {
	n := max(1, c.Clients)
	e.multi = n > 1 || c.forceViews || c.LoadReports
	e.nq = nq
	e.vbase = 0
	e.shares = e.shares[:0]
	e.views = e.views[:0]
	if !e.multi {
		return
	}
	e.views = resize(e.views, n*nq)
	clear(e.views)
	e.rC = seedRNG(c.Seed, 0xC)
	e.shares = resize(e.shares, n)
	sum := 0.0
	for i := range n {
		sum += clientWeight(i, c.ClientSkew)
		e.shares[i] = sum
	}
	for i := range e.shares {
		e.shares[i] /= sum
	}
	e.shares[n-1] = 1
}

// clientWeight is client i's unnormalised share: 1/(i+1)^skew.
func clientWeight(i int, skew float64) float64 {
	if skew == 0 {
		return 1
	}
	return math.Pow(float64(i+1), -skew)
}

// ClientShares returns the share of requests that each of c's clients
// sends (one share of 1 for one client): client i's is proportional to
// 1/(i+1)^ClientSkew.
func ClientShares(c Config) []float64 {
	n := max(1, c.Clients)
	s := make([]float64, n)
	sum := 0.0
	for i := range s {
		s[i] = clientWeight(i, c.ClientSkew)
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
	return s
}

// drawClient draws the client of an arriving request by the clients'
// shares, from the run's client stream: one uniform draw and a binary
// search of the cumulative shares.
func (e *engine) drawClient() uint16 {
	u := e.rC.Float64()
	lo, hi := 0, len(e.shares)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e.shares[m] > u {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return uint16(lo)
}

// polOf returns client's Policy (for a hedging strategy).
func (e *engine) polOf(client uint16) *decide.Policy {
	if e.multi {
		return e.pols[client]
	}
	return e.pol
}

// estOf returns client's delay estimator (for a hedging strategy).
func (e *engine) estOf(client uint16) decide.Estimator {
	if e.multi {
		return e.ests[client]
	}
	return e.est
}

// viewOf returns client's view of queue q.
func (e *engine) viewOf(client uint16, q int32) *view {
	return &e.views[int(client)*e.nq+int(q)]
}
