package drill

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func run(t *testing.T, mod func(*Params)) Result {
	t.Helper()
	p := DefaultParams()
	mod(&p)
	r, err := Run(p)
	if err != nil {
		t.Fatalf("Run(%v): %v", p, err)
	}
	return r
}

func winTimes(r Result, ns ...int) []time.Duration {
	var out []time.Duration
	for _, n := range ns {
		out = append(out, r.Requests[n-1].Latency)
	}
	return out
}

// The fixture's shape, as the lab describes it.
func TestFixture(t *testing.T) {
	reqs := Requests()
	if len(reqs) != Count || Count != 20 {
		t.Fatalf("%d requests, want 20", len(reqs))
	}
	slow := map[int]time.Duration{6: 640 * ms, 12: 900 * ms, 17: 450 * ms}
	var maxNormal time.Duration
	for i, r := range reqs {
		n := i + 1
		if want, ok := slow[n]; ok {
			if r.Primary != want {
				t.Errorf("request %d primary %v, want %v", n, r.Primary, want)
			}
		} else {
			maxNormal = max(maxNormal, r.Primary)
		}
		if r.Primary <= WriteCommit || r.Backup <= WriteCommit {
			t.Errorf("request %d: latencies %v/%v must exceed the %v commit time", n, r.Primary, r.Backup, WriteCommit)
		}
	}
	if maxNormal != 120*ms {
		t.Errorf("slowest normal primary %v, want 120ms", maxNormal)
	}
	base := run(t, func(p *Params) { p.Hedge = false })
	if base.P95 != 640*ms || base.BaselineP95 != 640*ms || base.Outcome != Baseline || base.Hedges != 0 {
		t.Errorf("baseline: p95 %v (baseline %v), %d hedges, %s", base.P95, base.BaselineP95, base.Hedges, base.Outcome)
	}
}

// Every outcome the lab, the page and the CLI promise.
func TestOutcomes(t *testing.T) {
	t.Run("50ms budget 100%: excess load", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Delay = 50 * ms })
		if r.Hedges != 20 || r.P95 != 146*ms || r.ExtraLoad != 100 || r.Outcome != ExcessLoad {
			t.Errorf("hedges %d, p95 %v, extra %v%%, %s; want 20, 146ms, 100%%, EXCESS LOAD", r.Hedges, r.P95, r.ExtraLoad, r.Outcome)
		}
	})
	t.Run("130ms: tail cut", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Delay = 130 * ms })
		if got := r.HedgedRequests(); !slices.Equal(got, []int{6, 12, 17}) {
			t.Errorf("hedged %v, want [6 12 17]", got)
		}
		for _, n := range []int{6, 12, 17} {
			if r.Requests[n-1].Winner != Backup {
				t.Errorf("request %d: %v won, want the backup", n, r.Requests[n-1].Winner)
			}
		}
		if got := winTimes(r, 6, 12, 17); !slices.Equal(got, []time.Duration{225 * ms, 226 * ms, 233 * ms}) {
			t.Errorf("backups win at %v, want 225, 226, 233 ms", got)
		}
		if r.BaselineP95 != 640*ms || r.P95 != 226*ms || r.ExtraLoad != 15 || r.Outcome != TailCut {
			t.Errorf("p95 %v -> %v, extra %v%%, %s; want 640ms -> 226ms, 15%%, TAIL CUT", r.BaselineP95, r.P95, r.ExtraLoad, r.Outcome)
		}
		if r.LoserWork != 684*ms {
			t.Errorf("loser work with cancellation %v, want 684ms", r.LoserWork)
		}
		if !strings.Contains(r.Summary, "640 ms to 226 ms for 15% extra") {
			t.Errorf("summary %q", r.Summary)
		}
	})
	t.Run("500ms", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Delay = 500 * ms })
		if got := r.HedgedRequests(); !slices.Equal(got, []int{6, 12}) {
			t.Errorf("hedged %v, want [6 12]", got)
		}
		if r.Requests[16].Latency != 450*ms || r.P95 != 595*ms {
			t.Errorf("request 17 takes %v, p95 %v; want 450ms and 595ms", r.Requests[16].Latency, r.P95)
		}
	})
	t.Run("0ms hedges everything", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Delay = 0 })
		if r.Hedges != 20 || r.Outcome != ExcessLoad {
			t.Errorf("hedges %d, %s; want 20, EXCESS LOAD", r.Hedges, r.Outcome)
		}
	})
	t.Run("budget 10% at 50ms: no tail gain", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Delay, p.Budget = 50*ms, 10 })
		if got := r.HedgedRequests(); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("hedged %v, want [1 2]", got)
		}
		for _, n := range []int{1, 2} {
			if r.Requests[n-1].Winner != Primary {
				t.Errorf("request %d: the %v won, want the primary", n, r.Requests[n-1].Winner)
			}
		}
		if r.P95 != 640*ms || r.Outcome != NoTailGain {
			t.Errorf("p95 %v, %s; want 640ms, NO TAIL GAIN", r.P95, r.Outcome)
		}
	})
	t.Run("130ms without cancellation", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Cancel = false })
		if r.LoserWork != 1990*ms || r.Outcome != TailCut || r.P95 != 226*ms {
			t.Errorf("loser work %v, %s, p95 %v; want 1990ms, TAIL CUT, 226ms", r.LoserWork, r.Outcome, r.P95)
		}
	})
	t.Run("write without key: duplicate writes", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Op = Write })
		if r.Outcome != DuplicateWrites || r.DuplicateWrites != 3 {
			t.Fatalf("%s with %d duplicates, want DUPLICATE WRITES with 3", r.Outcome, r.DuplicateWrites)
		}
		for _, rr := range r.Requests {
			want := 1
			if rr.N == 6 || rr.N == 12 || rr.N == 17 {
				want = 2
			}
			if rr.Writes != want {
				t.Errorf("request %d wrote %d times, want %d", rr.N, rr.Writes, want)
			}
		}
	})
	t.Run("write with key: tail cut", func(t *testing.T) {
		r := run(t, func(p *Params) { p.Op = WriteKey })
		if r.Outcome != TailCut || r.DuplicateWrites != 0 || r.Deduplicated != 3 || r.P95 != 226*ms {
			t.Errorf("%s, %d duplicates, %d deduplicated, p95 %v; want TAIL CUT, 0, 3, 226ms", r.Outcome, r.DuplicateWrites, r.Deduplicated, r.P95)
		}
	})
}

// The trace is in time order and tells the story of request 6 at 130 ms.
func TestTrace(t *testing.T) {
	r := run(t, func(p *Params) { p.Op = Write })
	for i := 1; i < len(r.Events); i++ {
		if r.Events[i].At < r.Events[i-1].At {
			t.Fatalf("event %d at %v before event %d at %v", i, r.Events[i].At, i-1, r.Events[i-1].At)
		}
	}
	var six []string
	for _, e := range r.Events {
		if e.Req == 6 {
			six = append(six, FormatMs(e.At)+" "+e.Kind.String()+" "+e.Copy.String())
		}
	}
	want := []string{"0 ms send primary", "60 ms commit primary", "130 ms hedge backup", "190 ms commit backup", "225 ms win backup", "225 ms cancel primary"}
	if !slices.Equal(six, want) {
		t.Errorf("request 6:\n got %q\nwant %q", six, want)
	}
	if r.End != 233*ms {
		t.Errorf("end %v, want 233ms", r.End)
	}
	sends := 0
	for _, e := range r.Events {
		if e.Kind == Send {
			sends++
		}
	}
	if sends != Count {
		t.Errorf("%d sends, want %d", sends, Count)
	}
	// Without cancellation the losers finish.
	r = run(t, func(p *Params) { p.Cancel = false })
	if r.End != 900*ms || r.Events[len(r.Events)-1].Kind != Finish {
		t.Errorf("no-cancel trace ends at %v with %v, want 900ms finish", r.End, r.Events[len(r.Events)-1].Kind)
	}
}

// Refusals are traced, and a cancelled backup that had not committed
// writes nothing.
func TestBudgetAndCommitEdges(t *testing.T) {
	r := run(t, func(p *Params) { p.Delay, p.Budget = 50*ms, 10 })
	refused := 0
	for _, rr := range r.Requests {
		if rr.Refused {
			refused++
		}
	}
	if refused != 18 || r.HedgeBudget != 2 {
		t.Errorf("%d refused with a budget of %d, want 18 and 2", refused, r.HedgeBudget)
	}
	// Request 3 at 50 ms: primary answers at 95 ms, the backup (started at
	// 50) would commit at 110: cancelled first, one write.
	r = run(t, func(p *Params) { p.Delay, p.Op = 50*ms, Write })
	if w := r.Requests[2].Writes; w != 1 {
		t.Errorf("request 3 wrote %d times, want 1", w)
	}
	// Without cancellation that backup runs on and commits.
	r = run(t, func(p *Params) { p.Delay, p.Op, p.Cancel = 50*ms, Write, false })
	if w := r.Requests[2].Writes; w != 2 {
		t.Errorf("request 3 without cancellation wrote %d times, want 2", w)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{
		{Hedge: true, Delay: -ms, Budget: 100},
		{Hedge: true, Delay: MaxDelay + 1, Budget: 100},
		{Hedge: true, Budget: 101},
		{Hedge: true, Budget: -1},
		{Hedge: true, Budget: 100, Op: 7},
	} {
		if _, err := Run(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := ParseOp("delete"); err == nil || !strings.Contains(err.Error(), "read, write, write-key") {
		t.Errorf("ParseOp: %v", err)
	}
	for _, s := range []string{"read", "write", "write-key"} {
		if o, err := ParseOp(s); err != nil || o.String() != s {
			t.Errorf("ParseOp(%q) = %v, %v", s, o, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []time.Duration{5, 1, 4, 2, 3}
	for p, want := range map[int]time.Duration{1: 1, 20: 1, 21: 2, 50: 3, 95: 5, 100: 5} {
		if got := Percentile(xs, p); got != want {
			t.Errorf("p%d = %v, want %v", p, got, want)
		}
	}
	if !slices.Equal(xs, []time.Duration{5, 1, 4, 2, 3}) {
		t.Error("Percentile modified its input")
	}
	// For every integer percentage and every size up to twice the
	// drill's, the rank is ceil(p n / 100) computed in integers.
	for n := 1; n <= 2*Count; n++ {
		xs := make([]time.Duration, n)
		for i := range xs {
			xs[i] = time.Duration(n - i) // descending: Percentile sorts
		}
		for p := 1; p <= 100; p++ {
			if got, want := Percentile(xs, p), time.Duration((p*n+99)/100); got != want {
				t.Fatalf("p%d of 1..%d = %v, want %v", p, n, got, want)
			}
		}
	}
}
