package drill

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/quantile"
)

// Count is the number of requests in the drill.
const Count = 20

// WriteCommit is how long after its start a write copy commits.
const WriteCommit = 60 * time.Millisecond

// LoadLimit is the drill's policy limit on extra load, in percent of the
// requests: more backups than this is EXCESS LOAD.
const LoadLimit = 25

// MaxDelay is the largest hedge delay Validate accepts.
const MaxDelay = 10 * time.Second

// Request is one request of the fixture: how long each copy takes from its
// start to its answer.
type Request struct {
	Primary, Backup time.Duration
}

// fixture is the drill's data, request 1 first. See the package doc for
// what each choice makes true; drill_test.go checks all of it.
var fixture = [Count]Request{
	{88, 84}, {74, 91}, {95, 62}, {67, 77}, {102, 66},
	{640, 95}, {81, 88}, {113, 61}, {70, 73}, {92, 104},
	{78, 69}, {900, 96}, {99, 83}, {85, 71}, {120, 64},
	{72, 98}, {450, 103}, {106, 79}, {64, 87}, {90, 68},
}

// Requests returns a copy of the fixture, request 1 at index 0, with
// latencies in time.Duration.
func Requests() []Request {
	out := make([]Request, Count)
	for i, r := range fixture {
		out[i] = Request{Primary: r.Primary * time.Millisecond, Backup: r.Backup * time.Millisecond}
	}
	return out
}

// Op is what the requests do.
type Op int

// Operations.
const (
	// Read has no side effect: hedging it is safe.
	Read Op = iota
	// Write commits WriteCommit after each copy starts, with no
	// idempotency key: two commits are two writes.
	Write
	// WriteKey is a write carrying an idempotency key: the server
	// deduplicates a second commit of the same request.
	WriteKey
)

var opNames = []string{"read", "write", "write-key"}

// String returns the operation's name as the command line and the lab's
// API spell it: read, write or write-key.
func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Describe returns the operation in words.
func (o Op) Describe() string {
	switch o {
	case Write:
		return "write without idempotency key"
	case WriteKey:
		return "write with idempotency key"
	}
	return "read"
}

// ParseOp parses read, write or write-key.
func ParseOp(s string) (Op, error) {
	if i := slices.Index(opNames, s); i >= 0 {
		return Op(i), nil
	}
	return 0, fmt.Errorf("unknown operation %q: use one of %s", s, strings.Join(opNames, ", "))
}

// Params are the drill's controls. The zero value is not the default:
// start from DefaultParams.
type Params struct {
	// Hedge turns hedging on; off, every request sends its primary only.
	Hedge bool
	// Delay is when a backup is sent, after its primary: 0 to MaxDelay.
	Delay time.Duration
	// Budget is the percentage of the requests that may hedge, 0 to 100,
	// spent in arrival order.
	Budget int
	// Cancel cancels the losing copy when the winner answers.
	Cancel bool
	// Op is the operation.
	Op Op
}

// DefaultParams returns the drill's default controls: hedging on, a 130 ms
// delay, a 100% budget, cancellation on, reads.
func DefaultParams() Params {
	return Params{Hedge: true, Delay: 130 * time.Millisecond, Budget: 100, Cancel: true, Op: Read}
}

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid drill parameters")

// Validate reports every out-of-range parameter, each with what to use.
func (p Params) Validate() error {
	var errs []error
	if p.Delay < 0 || p.Delay > MaxDelay {
		errs = append(errs, fmt.Errorf("delay %v: use 0 to %v", p.Delay, MaxDelay))
	}
	if p.Budget < 0 || p.Budget > 100 {
		errs = append(errs, fmt.Errorf("budget %d%%: use 0 to 100", p.Budget))
	}
	if p.Op < 0 || int(p.Op) >= len(opNames) {
		errs = append(errs, fmt.Errorf("unknown operation %d: use one of %s", p.Op, strings.Join(opNames, ", ")))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
}

// String describes the parameters on one line.
func (p Params) String() string {
	if !p.Hedge {
		return "no hedging, " + p.Op.Describe()
	}
	c := "cancel the loser"
	if !p.Cancel {
		c = "losers run to completion"
	}
	return fmt.Sprintf("hedge after %s, budget %d%%, %s, %s", FormatMs(p.Delay), p.Budget, c, p.Op.Describe())
}

// Copy names a request's copy.
type Copy int

// Copies.
const (
	Primary Copy = iota // the copy sent at time 0
	Backup              // the copy sent at the delay
)

// String returns "primary" or "backup".
func (c Copy) String() string {
	if c == Backup {
		return "backup"
	}
	return "primary"
}

// Kind is the kind of an Event.
type Kind int

// Event kinds, in the order they are listed when they share an instant
// and a request.
const (
	// Send: a primary is sent.
	Send Kind = iota
	// Commit: a write copy commits (Text says whether it is a duplicate).
	Commit
	// Dedupe: a second commit is deduplicated by the idempotency key.
	Dedupe
	// Hedge: a backup is sent because the primary outlived the delay.
	Hedge
	// Refuse: the primary outlived the delay but the budget is spent.
	Refuse
	// Win: a copy answers first; the request is done.
	Win
	// Cancel: the losing copy is cancelled.
	Cancel
	// Finish: without cancellation, a losing copy completes; its answer is
	// discarded.
	Finish
)

var kindNames = []string{"send", "commit", "dedupe", "hedge", "refuse", "win", "cancel", "finish"}

// String returns the kind's name: send, commit, dedupe, hedge, refuse, win,
// cancel or finish.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one line of the trace.
type Event struct {
	// At is the event's time since the requests were sent.
	At time.Duration
	// Req is the request number, from 1.
	Req int
	// Copy is the copy the event is about.
	Copy Copy
	// Kind says what happened.
	Kind Kind
	// Text says it in words, without the time and the request number.
	Text string
}

// String formats the event as one line: "225 ms  request 6: backup answers
// first: latency 225 ms".
func (e Event) String() string {
	return fmt.Sprintf("%s  request %d: %s", FormatMs(e.At), e.Req, e.Text)
}

// Outcome is the one-line verdict of a run.
type Outcome string

// Outcomes, in the order Run checks them (see the package doc).
const (
	Baseline        Outcome = "BASELINE"         // hedging is off
	DuplicateWrites Outcome = "DUPLICATE WRITES" // a write without a key committed twice
	ExcessLoad      Outcome = "EXCESS LOAD"      // extra load above LoadLimit
	TailCut         Outcome = "TAIL CUT"         // the p95 fell below the baseline's
	NoTailGain      Outcome = "NO TAIL GAIN"     // hedges, if any, bought nothing
)

// RequestResult is what happened to one request.
type RequestResult struct {
	// N is the request number, from 1.
	N int
	// Primary and Backup are the fixture's latencies of its copies.
	Primary, Backup time.Duration
	// Hedged reports whether a backup was sent; Refused whether the
	// primary outlived the delay but the budget was spent.
	Hedged, Refused bool
	// Winner is the copy that answered first, and Latency its answer time.
	Winner  Copy
	Latency time.Duration
	// LoserWork is the running time of the losing copy (0 if not hedged).
	LoserWork time.Duration
	// Writes is how many commits took effect as writes (0 for reads; 2 is
	// a duplicate write); Deduped how many the key deduplicated.
	Writes, Deduped int
}

// Result is a complete run: every request, the trace and the measures.
type Result struct {
	// Params are the parameters of the run.
	Params Params
	// Requests has one entry per request, request 1 first.
	Requests []RequestResult
	// Events is the trace, in time order (ties: by request, then Kind).
	Events []Event
	// BaselineP50 and BaselineP95 are the nearest-rank percentiles of the
	// primaries alone (no hedging); P50 and P95 those of the run.
	BaselineP50, BaselineP95 time.Duration
	P50, P95                 time.Duration
	// Hedges is how many backups were sent, HedgeBudget how many the
	// budget allowed, and ExtraLoad the backups in percent of the requests.
	Hedges, HedgeBudget int
	ExtraLoad           float64
	// LoserWork is the backend work spent on losers (see the package doc).
	LoserWork time.Duration
	// DuplicateWrites counts requests that wrote twice; Deduplicated the
	// second commits an idempotency key absorbed.
	DuplicateWrites, Deduplicated int
	// Outcome is the verdict and Summary says why, in one sentence.
	Outcome Outcome
	Summary string
	// End is the time of the last event.
	End time.Duration
}

// Run replays the drill with p. It returns an error wrapping ErrInvalid if
// p is out of range.
func Run(p Params) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	reqs := Requests()
	res := Result{Params: p, Requests: make([]RequestResult, Count)}
	if p.Hedge {
		res.HedgeBudget = p.Budget * Count / 100
	}
	var evs []Event
	add := func(at time.Duration, n int, c Copy, k Kind, format string, a ...any) {
		evs = append(evs, Event{At: at, Req: n, Copy: c, Kind: k, Text: fmt.Sprintf(format, a...)})
	}
	for i, rq := range reqs {
		n := i + 1
		rr := RequestResult{N: n, Primary: rq.Primary, Backup: rq.Backup, Winner: Primary, Latency: rq.Primary}
		add(0, n, Primary, Send, "primary sent")
		// start and stop of each copy that ran; stop is when it stopped
		// running (answered, was cancelled, or completed as a loser).
		type run struct {
			c           Copy
			start, stop time.Duration
		}
		runs := []run{{Primary, 0, rq.Primary}}
		if p.Hedge && rq.Primary > p.Delay {
			if res.Hedges < res.HedgeBudget {
				res.Hedges++
				rr.Hedged = true
				add(p.Delay, n, Backup, Hedge, "primary still running after %s: backup sent (hedge %d)", FormatMs(p.Delay), res.Hedges)
			} else {
				rr.Refused = true
				add(p.Delay, n, Backup, Refuse, "primary still running after %s: no backup, the budget of %d hedges is spent", FormatMs(p.Delay), res.HedgeBudget)
			}
		}
		if rr.Hedged {
			backupEnd := p.Delay + rq.Backup
			loser := run{Backup, p.Delay, backupEnd}
			if backupEnd < rq.Primary {
				rr.Winner, rr.Latency = Backup, backupEnd
				loser = run{Primary, 0, rq.Primary}
				runs[0] = run{Backup, p.Delay, backupEnd}
			}
			natural := loser.stop
			if p.Cancel {
				loser.stop = rr.Latency
			}
			rr.LoserWork = loser.stop - loser.start
			runs = append(runs, loser)
			if p.Cancel {
				add(rr.Latency, n, loser.c, Cancel, "%s cancelled after %s of work", loser.c, FormatMs(rr.LoserWork))
			} else {
				add(natural, n, loser.c, Finish, "losing %s completes after %s of work; its answer is discarded", loser.c, FormatMs(rr.LoserWork))
			}
		}
		if rr.Hedged {
			add(rr.Latency, n, rr.Winner, Win, "%s answers first: latency %s", rr.Winner, FormatMs(rr.Latency))
		} else {
			add(rr.Latency, n, Primary, Win, "primary answers: latency %s", FormatMs(rr.Latency))
		}
		if p.Op != Read {
			// Commits in time order; at a tie the primary's first.
			slices.SortStableFunc(runs, func(a, b run) int {
				return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.c, b.c))
			})
			for _, r := range runs {
				at := r.start + WriteCommit
				if at > r.stop {
					continue // stopped before it committed
				}
				switch {
				case rr.Writes == 0:
					rr.Writes++
					add(at, n, r.c, Commit, "%s commits the write", r.c)
				case p.Op == WriteKey:
					rr.Deduped++
					add(at, n, r.c, Dedupe, "%s commits again: deduplicated by the idempotency key (on the server, package dedup does this)", r.c)
				default:
					rr.Writes++
					add(at, n, r.c, Commit, "%s commits the write again: DUPLICATE WRITE", r.c)
				}
			}
		}
		if rr.Writes > 1 {
			res.DuplicateWrites++
		}
		res.Deduplicated += rr.Deduped
		res.LoserWork += rr.LoserWork
		res.Requests[i] = rr
	}
	slices.SortStableFunc(evs, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Req, b.Req), cmp.Compare(a.Kind, b.Kind))
	})
	res.Events = evs
	res.End = evs[len(evs)-1].At

	lat := make([]time.Duration, Count)
	base := make([]time.Duration, Count)
	for i, rr := range res.Requests {
		lat[i], base[i] = rr.Latency, rr.Primary
	}
	res.P50, res.P95 = Percentile(lat, 50), Percentile(lat, 95)
	res.BaselineP50, res.BaselineP95 = Percentile(base, 50), Percentile(base, 95)
	res.ExtraLoad = 100 * float64(res.Hedges) / Count
	res.Outcome, res.Summary = verdict(&res)
	return res, nil
}

// Percentile returns the nearest-rank p-th percentile of xs (p an integer
// percentage, 1 to 100): the value of rank ceil(p x n / 100) in ascending
// order, quantile.Rank(p/100, n), the project's one definition. It does
// not modify xs.
func Percentile(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[quantile.Rank(float64(p)/100, len(s))-1]
}

// HedgedRequests returns the numbers of the hedged requests.
func (r *Result) HedgedRequests() []int {
	var ns []int
	for _, rr := range r.Requests {
		if rr.Hedged {
			ns = append(ns, rr.N)
		}
	}
	return ns
}

func verdict(r *Result) (Outcome, string) {
	p := r.Params
	hedged := r.HedgedRequests()
	switch {
	case !p.Hedge:
		return Baseline, fmt.Sprintf("No hedging: the p95 is %s, set by the slow primaries of requests 6, 12 and 17.", FormatMs(r.BaselineP95))
	case r.DuplicateWrites > 0:
		var dup []int
		for _, rr := range r.Requests {
			if rr.Writes > 1 {
				dup = append(dup, rr.N)
			}
		}
		return DuplicateWrites, fmt.Sprintf("%s %s each wrote twice: a hedged write without an idempotency key commits on both copies, and cancelling the loser cannot undo a commit.",
			plural(len(dup), "Request", "Requests"), list(dup))
	case r.ExtraLoad > LoadLimit:
		return ExcessLoad, fmt.Sprintf("%d of %d requests hedged: +%s backend requests, over the %d%% limit, to take the p95 from %s to %s.",
			r.Hedges, Count, pct(r.ExtraLoad), LoadLimit, FormatMs(r.BaselineP95), FormatMs(r.P95))
	case r.P95 < r.BaselineP95:
		return TailCut, fmt.Sprintf("The p95 falls from %s to %s for %s extra requests (%s %s hedged).",
			FormatMs(r.BaselineP95), FormatMs(r.P95), pct(r.ExtraLoad), plural(len(hedged), "request", "requests"), list(hedged))
	case len(hedged) == 0:
		return NoTailGain, fmt.Sprintf("No request was hedged, so the p95 stays %s.", FormatMs(r.P95))
	default:
		return NoTailGain, fmt.Sprintf("The p95 stays %s: the %s went to %s %s, whose primaries won anyway; the slow requests got none.",
			FormatMs(r.P95), plural(len(hedged), "hedge", fmt.Sprintf("%d hedges", len(hedged))), plural(len(hedged), "request", "requests"), list(hedged))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// list formats 6, 12 and 17.
func list(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	switch len(s) {
	case 0:
		return "none"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func pct(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) + "%" }

// FormatMs formats d in milliseconds: "225 ms", "12.5 ms".
func FormatMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
}
