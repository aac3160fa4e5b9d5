package advise

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// replayed runs the default line's replay of s over replicas replicas, in
// the order the requests were sent.
func replayed(t *testing.T, s *Sample, replicas int) *replay {
	t.Helper()
	lat := make([]float64, s.Len())
	for i, d := range s.Latencies {
		lat[i] = float64(d)
	}
	e := newEmpirical(s.sorted())
	rp, err := replayConfig(context.Background(), e, s, lat, replayOrder(s, false, 1), defaultReplayConfig(e, replicas), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

// hedgedOf counts the hedged requests of a replay whose primary took x.
func hedgedOf(rp *replay, x time.Duration) int {
	n := 0
	for _, h := range rp.hedged {
		if h.x == float64(x) {
			n++
		}
	}
	return n
}

// bigRequests is a sample of 40,000 requests sent every 10 ms: 1 ms each
// but 4% of 40 ms and about 3% of 10 ms, so that the p95, the delay, is
// 10 ms and the requests of 40 ms are those that hedge. In spells, every
// request sent in one of two 100 ms spells in each 5 s is big (40 ms), as
// is every one of two 80 ms spells (10 ms); alone, the same latencies come
// one at a time among the fast ones.
func bigRequests(spells bool) *Sample {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "big requests"}
	for k := range 40_000 {
		at := time.Duration(k) * 10 * time.Millisecond
		ph := at % (2500 * time.Millisecond)
		x := time.Millisecond
		switch {
		case spells && ph < 100*time.Millisecond:
			x = 40 * time.Millisecond
		case spells && ph >= time.Second && ph < 1080*time.Millisecond:
			x = 10 * time.Millisecond
		case !spells && k%25 == 3:
			x = 40 * time.Millisecond
		case !spells && (k%100 == 17 || k%100 == 51 || k%100 == 84):
			x = 10 * time.Millisecond
		}
		s.Latencies = append(s.Latencies, x)
		s.Times = append(s.Times, t0.Add(at))
	}
	return s
}

// The payoff rule is in effect in the default line's replay: hedges that
// cannot win stop. On 20 replicas, at most four requests of 40 ms are in
// flight at once, so a replica is idle for nearly every copy, and the
// budget (10%, bursts of 10) has a token for each of a spell's ten; the
// spare-capacity rule alone, as the replay applied it before, sent a copy
// of every request of 40 ms: 4% of requests.
//
// Alone, a request of 40 ms sends its copy at 10 ms, when the request
// sent next (1 ms: none of the 10 ms ones follows a 40 ms one) is the
// nearest of the copy's moment: the copy answers at 11 ms and wins, and
// every one of the 1,600 hedges. In spells, a copy's moment is the
// spell's, whose requests take 40 ms: it would answer at 50 ms, after its
// primary, each loss running three delays (the payoff rule's waste), and
// only the copy of a spell's last request, sent as the spell ends, draws
// a fast one and wins, one in ten. The win rate falls under the payoff
// rule's 0.35 after about 35 hedges, and from then the rule lets a
// hedge of that kind go only by its soft gate and its probes (one in
// 5,000 requests): far under a quarter of the 4%.
func TestDefaultReplayStopsHedgesThatDoNotPay(t *testing.T) {
	alone := replayed(t, bigRequests(false), 20)
	if n := hedgedOf(alone, 40*time.Millisecond); n != 1600 || len(alone.hedged) != 1600 {
		t.Errorf("alone: %d hedges, %d of the 40 ms requests; want every one of the 1,600", len(alone.hedged), n)
	}
	if p := alone.refused[hedge.RefusedPayoff]; p != 0 {
		t.Errorf("alone: %d refusals by the payoff rule, want none: every copy wins", p)
	}

	sp := replayed(t, bigRequests(true), 20)
	n, p := len(sp.hedged), sp.refused[hedge.RefusedPayoff]
	if n >= 1600/4 || p == 0 {
		t.Errorf("spells: %d hedges and %d refusals by the payoff rule; want under 400 hedges of the 1,600 requests of 40 ms, the rest refused by the payoff rule", n, p)
	}
	if w := sp.pol.WinRate(decide.EvidenceHead); w >= decide.DefaultPayoffWinRate {
		t.Errorf("spells: win rate %.3f of hedges on a replica with nothing ahead, want under %v", w, decide.DefaultPayoffWinRate)
	}
	t.Logf("hedges of 40,000 requests: alone %d, in spells %d (payoff refusals %d, win rate %.3f)", len(alone.hedged), n, p, sp.pol.WinRate(decide.EvidenceHead))
}

// busyPeriods is a sample of periods of 10 ms, each of 99 requests: two
// of 3 ms sent at its start (10 µs apart), 96 of 20 µs sent 30 µs apart
// from 20 µs while those two run, and one of 1 ms sent at 5 ms, when
// nothing else is in flight. Its p95 is 20 µs.
func busyPeriods(periods int) *Sample {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "busy"}
	add := func(at, x time.Duration) {
		s.Latencies = append(s.Latencies, x)
		s.Times = append(s.Times, t0.Add(at))
	}
	for p := range periods {
		base := time.Duration(p) * 10 * time.Millisecond
		add(base, 3*time.Millisecond)
		add(base+10*time.Microsecond, 3*time.Millisecond)
		for j := range 96 {
			add(base+20*time.Microsecond+time.Duration(j)*30*time.Microsecond, 20*time.Microsecond)
		}
		add(base+5*time.Millisecond, time.Millisecond)
	}
	return s
}

// The pause is in effect in the default line's replay: no hedge goes
// while fewer than a quarter of recent primaries found their replica
// idle, even to an idle replica. On two replicas each period's two
// requests of 3 ms take one each, and the 96 short ones sent while they
// run find both busy: 3 primaries in 99 (those two and the 1 ms one) find
// an idle replica. The share the library keeps moves 1/1024 of the way
// to each primary's: by a factor of (1023/1024)^96 = 0.91 a period, from
// 1 to under a quarter in about 15 periods. The request of 1 ms, sent at
// 5 ms onto an idle replica, finds the other idle when its copy is due:
// the spare-capacity rule alone would send its copy in each of the 400
// periods (1% of requests, within the budget). It goes in the first
// periods only (some of the first 15: its copies there lose, and the
// payoff rule may stop them sooner), and every period's asks after the
// first 20 are refused busy with an idle replica picked: the pause. On
// four replicas the two requests of 3 ms leave two idle, the short ones
// nearly always find one (the picker draws two of four), the share stays
// high and no ask is paused; what holds the copies of the request of
// 1 ms back there is the payoff rule alone (a copy draws from its moment,
// which holds only that request, so its copies lose and run long).
func TestDefaultReplayPausesWithoutSpareCapacity(t *testing.T) {
	const periods = 400
	two := replayed(t, busyPeriods(periods), 2)
	n := hedgedOf(two, time.Millisecond)
	if n < 1 || n > 20 {
		t.Errorf("two replicas: the request of 1 ms hedged in %d periods of %d, want some of the first 15 only", n, periods)
	}
	if two.paused < periods-20 {
		t.Errorf("two replicas: %d asks refused with an idle replica picked, want one at least for each of the %d periods after the first 20", two.paused, periods-20)
	}
	if s := two.pol.Spare(); s >= 0.25 {
		t.Errorf("two replicas: the share of primaries placed on an idle replica is %.3f, want under a quarter (about 3 in 99)", s)
	}
	four := replayed(t, busyPeriods(periods), 4)
	if n := hedgedOf(four, time.Millisecond); n < 1 || four.paused != 0 || four.pol.Spare() < 0.25 {
		t.Errorf("four replicas: the request of 1 ms hedged in %d periods of %d, %d asks paused, spare %.3f; want some hedged, none paused, the share above a quarter", n, periods, four.paused, four.pol.Spare())
	}
	t.Logf("1 ms requests hedged: two replicas %d (spare %.3f, %d asks paused), four replicas %d (spare %.3f)", n, two.pol.Spare(), two.paused, hedgedOf(four, time.Millisecond), four.pol.Spare())
}

// stalledReplica is a sample of n requests sent every 5 ms, round robin
// over three named replicas, each answered in 300 to 600 µs, but for the
// requests to replica "c" sent while it is stopped (30 ms in every
// 250 ms), which wait for the stop to end: 4% of all requests, so that
// the p95, the replay's delay, is of the answers that did not wait.
func stalledReplica(n int) *Sample {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "one replica stopped 30 ms in 250"}
	for k := range n {
		at := time.Duration(k) * 5 * time.Millisecond
		x := 300*time.Microsecond + time.Duration(k*7919%301)*time.Microsecond
		rep := []string{"a", "b", "c"}[k%3]
		if phase := at % (250 * time.Millisecond); rep == "c" && phase < 30*time.Millisecond {
			x += 30*time.Millisecond - phase
		}
		s.Latencies = append(s.Latencies, x)
		s.Times = append(s.Times, t0.Add(at))
		s.Replicas = append(s.Replicas, rep)
	}
	return s
}

// With each request's replica named, the replay keeps primaries where
// they were sent and draws a copy from its moment's requests on the
// copy's replica: a request stuck on the stopped replica hedges to one
// that was answering at once then, and wins. Its hedge rate is about the
// stuck share (4%; the budget's 10% allows it) and its p99 falls to
// about the delay's three-delay head wait plus a fast answer. Without
// the names (the primaries spread by the picker, a copy drawing from the
// moment's requests on every replica, a third of them stuck), the
// copies into the stop mostly draw from stuck requests, lose, and the
// payoff rule stops them.
func TestDefaultReplayOnRecordedReplicas(t *testing.T) {
	s := stalledReplica(4000)
	stuck := 0
	for _, x := range s.Latencies {
		if x > time.Millisecond {
			stuck++
		}
	}
	line := func(s *Sample, o Options) *Outcome {
		t.Helper()
		o.Percentiles, o.Sizes = []float64{95}, []Sizes{}
		rep, err := Advise(context.Background(), s, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Predictions {
			if p.Kind == "independent-local" && p.Default != nil {
				return p.Default
			}
		}
		t.Fatal("no default line")
		return nil
	}
	named := line(s, Options{})
	share := float64(stuck) / float64(len(s.Latencies))
	if named.HedgeRate < share/2 || named.HedgeRate > 2*share || named.P99Ratio > 0.3 {
		t.Errorf("named replicas: hedged %.3f (stuck %.3f), p99 ratio %.2f; want about the stuck share hedged and the p99 cut below 0.3", named.HedgeRate, share, named.P99Ratio)
	}
	anon := *s
	anon.Replicas = nil
	spread := line(&anon, Options{Replicas: 3})
	if spread.HedgeRate >= named.HedgeRate {
		t.Errorf("unnamed replicas hedged %.3f, named %.3f: want fewer without the names", spread.HedgeRate, named.HedgeRate)
	}
	t.Logf("stuck %.3f; named: hedged %.3f, p99 ratio %.2f; spread by the picker: hedged %.3f, p99 ratio %.2f", share, named.HedgeRate, named.P99Ratio, spread.HedgeRate, spread.P99Ratio)
}
