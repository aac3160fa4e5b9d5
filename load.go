package hedge

import (
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// Load is a server's own account of its load, sent with an answer. The
// toolkit's server middleware reports it (package loadreport over HTTP,
// ORCA over gRPC), and a transport passes it to [Hedger.ReportLoad].
//
// A client alone sees only its own requests in flight on each replica.
// While a replica's last report is fresh (less than a hedge delay old),
// the spare-capacity rule reads the replica's load from it instead. A
// copy goes to the replica the [Picker] chose only if the report, with
// the copies sent there since, leaves a worker free. When the report
// says busy while the client's own view says idle, the copy goes to the
// picker's next choice (up to four replicas are read). A report never
// draws a copy to its replica, and never counts fewer requests than this
// Hedger has in flight there.
//
// A fresh report also classes the primary for the payoff rule (waiting
// behind other clients' work, or running): see [Config.PayoffWinRate].
// An older report gives way to the client's own view.
// [Stats.LoadByReport] and [Stats.LoadByOwnView] count which view each
// hedge decision read. docs/default.md, "Load reports", measures what
// the reports gain and cost.
type Load struct {
	// Running is the requests the server was running when it answered,
	// not counting the one answered. Running and Queued are added with
	// saturation: counts too large to add read as a replica as busy as
	// can be, never as an idle one.
	Running int
	// Queued is the requests waiting there for a worker.
	Queued int
	// Workers is the requests it runs at once; 0 when unknown, read as 1.
	Workers int
	// Done is the requests it had answered since it started (a counter
	// that only grows), or 0 when it does not count them. It lets the
	// client tell a primary that waited in the queue from one that
	// reached a worker.
	Done int64
}

// valid reports whether l can be a server's report: no count negative,
// and something reported.
func (l Load) valid() bool {
	return l.Running >= 0 && l.Queued >= 0 && l.Workers >= 0 && l.Done >= 0
}

// ReportLoad records the load that replica (in [0, Config.Replicas))
// reported with an answer that arrived now. Transports call it for every
// answer that carries a report (hedgehttp and hedgegrpc do); a report for
// a replica out of range, with a negative count, or to a [Hedger] without
// Replicas is ignored. It is safe for concurrent use and does not
// allocate more than one small value per report.
func (h *Hedger) ReportLoad(replica int, l Load) {
	if replica < 0 || replica >= len(h.reports) || !l.valid() {
		return
	}
	now := max(h.now(), 1) // 0 is no report
	h.reports[replica].Store(&decide.Report{At: now, Present: decide.AddCount(l.Running, l.Queued), Workers: max(l.Workers, 1), Done: l.Done})
	h.sent[replica].Store(0)
}

// replicaReports is what a [Hedger] keeps of its replicas' reports: the
// last from each, and the copies sent there since it arrived.
type replicaReports struct {
	reports []atomic.Pointer[decide.Report]
	sent    []atomic.Int64
}

// replicaView is what this [Hedger] knows of replica i's load, as
// decide.Policy.Place reads it: its last report (the zero Report for
// none), the copies sent there since, and its own view (ownLoad).
func (h *Hedger) replicaView(i int) (rep decide.Report, sent, own int) {
	if r := h.reports[i].Load(); r != nil {
		rep = *r
	}
	return rep, int(h.sent[i].Load()), h.ownLoad(i)
}

// place is Place's choice of the replica for the call's next copy, and
// that replica's load as the spare-capacity rule reads it: the Picker's
// choice, or its next ones while each is busy by its fresh report (see
// decide.Policy.Place). A probe of a replica on probation that a
// candidate passed over took is given back; c.placedProbe is the probe
// of the replica returned. c.mu is held.
func (c *call[T]) place(now time.Duration) (replica, load int, byReport bool) {
	last := -1
	pick := func(skip []int) int {
		if c.placedProbe {
			c.placedProbe = false
			c.h.prob.ended(last) // passed over: the probe does not go there
		}
		last, c.placedProbe = c.pick(c.launched, now, skip...)
		return last
	}
	replica, load, byReport = c.h.pol.Place(c.h.now(), pick, c.h.replicaView)
	if c.placedProbe && replica != last {
		c.placedProbe = false
		c.h.prob.ended(last)
	}
	return replica, load, byReport
}
