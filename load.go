package hedge

import (
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// Load is a server's own account of its load, sent with an answer: what
// the toolkit's server middleware reports (package loadreport over HTTP,
// ORCA over gRPC), and what a transport passes to Hedger.ReportLoad.
//
// A client alone sees only its own requests in flight on each replica,
// which are the replica's load only when it sends most of the replica's
// traffic. While a replica's last report is fresh (it arrived less than a
// hedge delay ago), the spare-capacity rule reads the replica's load from
// it instead: a copy goes to the replica the picker chose only if the
// report, with the copies this Hedger sent there since, leaves a worker
// free, however idle the replica looks to this Hedger alone. The picker
// itself keeps reading this Hedger's own requests in flight: a report is
// fresh for few replicas at a time, and its count of every client's
// requests cannot be weighed against another replica's count of this
// Hedger's alone. So a report never draws a copy to its replica; it
// only says whether the replica the picker chose has room. When that
// replica is busy by its report while this Hedger's own view says it has
// room, the copy goes to the picker's next choice among the replicas
// holding no copy of the request (up to four replicas are read), so that
// a replica that says it is busy, truly or not, keeps copies off itself
// but not off the others; where both views say busy, the copy is refused
// as it is without reports. Nor does a report count fewer requests than
// this Hedger has in flight there itself: a replica that says it is idle
// while this Hedger's requests wait there gains no copy by saying so.
//
// A primary placed while its replica's report was fresh is classed by it
// (waiting behind other clients' work, or running) for the payoff rule,
// and its copy waits the head wait as a copy of a primary at the head
// does (see Config.PayoffWinRate). An older report, as a stalled replica's
// last one soon is, gives way to the client's own view. Stats.LoadByReport and Stats.LoadByOwnView count which view each
// hedge decision read. What the reports gain and cost is measured in
// docs/default.md, "Load reports".
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
// a replica out of range, with a negative count, or to a Hedger without
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

// replicaReports is what a Hedger keeps of its replicas' reports: the
// last from each, and the copies sent there since it arrived.
type replicaReports struct {
	reports []atomic.Pointer[decide.Report]
	sent    []atomic.Int64
}

// replicaView is what this Hedger knows of replica i's load, as
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
