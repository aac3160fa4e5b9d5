package hedge_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// policy makes a Policy with replicas, and a Plan for a request started
// at 0 with the given delay.
func policy(t *testing.T, cfg hedge.Config) *decide.Policy {
	t.Helper()
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	p, err := decide.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func begin(p *decide.Policy, delay time.Duration) *decide.Plan {
	var pl decide.Plan
	p.Begin(&pl, 0, hedge.NewEstimator(hedge.Fixed(delay)), hedge.Never, false, nil)
	return &pl
}

// ask runs Check then Admit at now, as an engine that picks replicas does.
func ask(p *decide.Policy, pl *decide.Plan, now time.Duration, load int, ev decide.Evidence) hedge.Refusal {
	if why := p.Check(pl, now, false); why != decide.Allowed {
		return why
	}
	_, why := p.Admit(pl, load, ev)
	return why
}

// TestSpareCapacityRule checks the spare-capacity rule alone: its
// hedges carry no evidence (EvidenceNone), whose class starts at the edge
// of paying and does not wait at the head.
func TestSpareCapacityRule(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(ms), NoBudget: true})
	if !p.ChecksLoad() {
		t.Fatal("the zero Config should look at the replica's load")
	}
	pl := begin(p, ms)
	if why := ask(p, pl, ms, 1, decide.EvidenceNone); why != hedge.RefusedBusy {
		t.Fatalf("a hedge to a busy replica: %v, want busy", why)
	}
	if !p.Retries(pl, hedge.RefusedBusy) {
		t.Fatal("a busy refusal should be asked again a delay later")
	}
	if p.Retries(pl, hedge.RefusedBudget) {
		t.Fatal("a budget refusal is final")
	}
	if at, _ := p.Due(pl, ms); at != 2*ms {
		t.Fatalf("asked again at %v, want 2ms", at)
	}
	if why := ask(p, pl, 2*ms, 0, decide.EvidenceNone); why != decide.Allowed {
		t.Fatalf("a hedge to an idle replica: %v", why)
	}

	// A copy that replaces a failed one is not a bet on slowness.
	pl = begin(p, ms)
	if why := p.Check(pl, 0, true); why != decide.Allowed {
		t.Fatal(why)
	}
	if _, why := p.Admit(pl, 5, decide.EvidenceNone); why != decide.Allowed {
		t.Fatalf("a retry after a failure to a busy replica: %v", why)
	}

	// MaxReplicaLoad allows that many in flight; AnyReplicaLoad turns
	// the rule off; without replicas there is no load to see.
	for _, tc := range []struct {
		cfg  hedge.Config
		load int
		want hedge.Refusal
	}{
		{hedge.Config{MaxReplicaLoad: 2}, 2, decide.Allowed},
		{hedge.Config{MaxReplicaLoad: 2}, 3, hedge.RefusedBusy},
		{hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad}, 100, decide.Allowed},
	} {
		tc.cfg.Delay, tc.cfg.NoBudget = hedge.Fixed(ms), true
		p := policy(t, tc.cfg)
		if why := ask(p, begin(p, ms), ms, tc.load, decide.EvidenceNone); why != tc.want {
			t.Errorf("%+v at load %d: %v, want %v", tc.cfg, tc.load, why, tc.want)
		}
	}
	if p, _ := decide.FromConfig(hedge.Config{Delay: hedge.Fixed(ms), NoBudget: true}); p.ChecksLoad() {
		t.Error("without Replicas the rule cannot apply")
	}
}

// TestSpareTogether: a replica that holds only copies sent together with
// a primary (the leaves of its fan-out) counts as idle for the spare
// share; one that holds other work counts as busy.
func TestSpareTogether(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(ms), NoBudget: true})
	for range 5000 {
		p.Placed(3, true)
	}
	if s := p.Spare(); s < 0.99 {
		t.Fatalf("spare %v after 5,000 placements beside their own fan-out's leaves", s)
	}
	for range 5000 {
		p.Placed(3, false)
	}
	if s := p.Spare(); s > 0.01 {
		t.Fatalf("spare %v after 5,000 placements behind other work", s)
	}
}

// TestSpareShare checks the other half of the spare-capacity rule: when
// few recent primaries found their replica idle, every replica is busy
// and no hedge goes, even to a replica that happens to be idle.
func TestSpareShare(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(ms), NoBudget: true})
	if p.Spare() != 1 {
		t.Fatalf("spare %v before any placement, want 1", p.Spare())
	}
	for range 5000 {
		p.Placed(2, false)
	}
	if s := p.Spare(); s > 0.01 {
		t.Fatalf("spare %v after 5,000 busy placements", s)
	}
	if why := ask(p, begin(p, ms), ms, 0, decide.EvidenceNone); why != hedge.RefusedBusy {
		t.Fatalf("hedge while every replica is busy: %v, want busy", why)
	}
	for range 5000 {
		p.Placed(0, false)
	}
	if s := p.Spare(); s < 0.99 {
		t.Fatalf("spare %v after 5,000 idle placements", s)
	}
	if why := ask(p, begin(p, ms), ms, 0, decide.EvidenceNone); why != decide.Allowed {
		t.Fatalf("hedge once replicas are idle again: %v", why)
	}
}

// settleHedge asks for one hedge of class ev of a request with a delay of
// 10 ms, when it is due (at the delay, or for a primary at the head of its
// replica once it has waited decide.HeadDelays delays), and if it goes
// records its outcome: won, or lost after running for ran.
func settleHedge(t *testing.T, p *decide.Policy, ev decide.Evidence, won bool, ran time.Duration) hedge.Refusal {
	t.Helper()
	pl := begin(p, 10*ms)
	at := 10 * ms
	if ev == decide.EvidenceHead {
		at = pl.HeadAt()
	}
	why := ask(p, pl, at, 0, ev)
	if why == decide.Allowed {
		p.Succeeded(pl, at+ran, won)
	}
	return why
}

// pays reports whether class ev pays by the zero Config's rule: its waste
// is at most 0.4 of a delay times one plus its win rate.
func pays(p *decide.Policy, ev decide.Evidence) bool {
	return p.Waste(ev) <= 0.4*(1+p.WinRate(ev))+1e-6
}

// TestHeadWaits: the zero Config holds a copy of a primary at the head of
// its replica until it has waited three delays, and asks for it again
// then; a primary behind an earlier request is not held.
func TestHeadWaits(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: 0.2})
	pl := begin(p, 10*ms)
	if why := ask(p, pl, 10*ms, 0, decide.EvidenceHead); why != hedge.RefusedHead {
		t.Fatalf("a head hedge at the delay: %v, want head", why)
	}
	if !p.Retries(pl, hedge.RefusedHead) || pl.HeadAt() != decide.HeadDelays*10*ms {
		t.Fatalf("retries %v, head at %v; want true, %v", p.Retries(pl, hedge.RefusedHead), pl.HeadAt(), decide.HeadDelays*10*ms)
	}
	if why := ask(p, pl, pl.HeadAt(), 0, decide.EvidenceHead); why != decide.Allowed {
		t.Fatalf("a head hedge after three delays: %v", why)
	}
	if why := ask(p, begin(p, 10*ms), 10*ms, 0, decide.EvidenceBehind); why != decide.Allowed {
		t.Fatalf("a behind hedge at the delay: %v", why)
	}
}

func TestPayoffStopsExpensiveLosers(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
	// Hedges of the head class that always lose and run three delays
	// (copies of big requests): the class stops.
	sent := 0
	for range 200 {
		if settleHedge(t, p, decide.EvidenceHead, false, 30*ms) == decide.Allowed {
			sent++
		}
	}
	if sent > 60 {
		t.Fatalf("%d of 200 losing, costly hedges sent: the payoff rule did not stop them", sent)
	}
	if pays(p, decide.EvidenceHead) || p.Waste(decide.EvidenceHead) < 1 {
		t.Fatalf("head: win rate %v, waste %v", p.WinRate(decide.EvidenceHead), p.Waste(decide.EvidenceHead))
	}
	var refused hedge.Refusal
	for range 50 {
		if why := settleHedge(t, p, decide.EvidenceHead, false, 30*ms); why != decide.Allowed {
			refused = why
		}
	}
	if refused != hedge.RefusedPayoff {
		t.Fatalf("refusal %v, want payoff", refused)
	}
	// The other classes are not affected: behind is where it started.
	if r, w := p.WinRate(decide.EvidenceBehind), p.Waste(decide.EvidenceBehind); r != 0.25 || w < 0.5999 || w > 0.6 {
		t.Fatalf("behind after head stopped: win rate %v, waste %v; want its start, 0.25 and 0.6", r, w)
	}
}

func TestPayoffKeepsCheapLosersAndWinners(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
	// Head hedges that lose nine times in ten, but cheaply (a tenth of a
	// delay: ordinary slow requests around a stall), go on once their
	// first outcomes have been measured (a new class starts just short of
	// paying, and its first hedges go at about one in four).
	settle := func(ev decide.Evidence, won func(i int) bool, ran time.Duration) {
		t.Helper()
		sent := 0
		for i := 0; sent < 500; i++ {
			why := settleHedge(t, p, ev, won(i), ran)
			if why == decide.Allowed {
				sent++
			} else if sent >= 10 {
				t.Fatalf("%v hedge %d refused after %d went: %v (win rate %v, waste %v)", ev, i, sent, why, p.WinRate(ev), p.Waste(ev))
			}
			if i > 1000 {
				t.Fatalf("%v: %d of %d hedges went", ev, sent, i)
			}
		}
	}
	settle(decide.EvidenceHead, func(i int) bool { return i%10 == 0 }, ms)
	// Behind hedges that win half the time and whose losers run half a
	// delay go on: 0.25 of a delay wasted per hedge, 0.6 allowed.
	settle(decide.EvidenceBehind, func(i int) bool { return i%2 == 0 }, 5*ms)
	if !pays(p, decide.EvidenceBehind) {
		t.Fatalf("behind: win rate %v, waste %v", p.WinRate(decide.EvidenceBehind), p.Waste(decide.EvidenceBehind))
	}
}

// TestPayoffWinningIsNotEnough: hedges that win half the time but whose
// losers run five delays (2.5 delays wasted per hedge) stop under the
// zero Config, which never lets a class go on for winning alone; with
// PayoffWinRate 0.35 they go on, as its win rate is above that.
func TestPayoffWinningIsNotEnough(t *testing.T) {
	for _, tc := range []struct {
		minWin float64
		goOn   bool
	}{{0, false}, {0.35, true}} {
		p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: tc.minWin})
		sent, late := 0, 0
		for i := range 2000 {
			if settleHedge(t, p, decide.EvidenceBehind, i%2 == 0, 50*ms) == decide.Allowed {
				sent++
				if i >= 1000 {
					late++
				}
			}
		}
		if tc.goOn && late < 990 {
			t.Errorf("PayoffWinRate %v: %d of the last 1,000 hedges went, want all but a few", tc.minWin, late)
		}
		if !tc.goOn && late > 100 {
			t.Errorf("PayoffWinRate %v: %d of the last 1,000 hedges went (win rate %v, waste %v), want few", tc.minWin, late, p.WinRate(decide.EvidenceBehind), p.Waste(decide.EvidenceBehind))
		}
	}
}

// TestPayoffComesBack checks that a class that stopped paying is probed
// now and then, and comes back when its hedges win again.
func TestPayoffComesBack(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
	for range 300 {
		settleHedge(t, p, decide.EvidenceHead, false, 50*ms)
	}
	if pays(p, decide.EvidenceHead) {
		t.Fatal("head pays after 300 costly losses")
	}
	probes := 0
	for range 200_000 {
		if settleHedge(t, p, decide.EvidenceHead, true, 0) == decide.Allowed {
			probes++
		}
		if pays(p, decide.EvidenceHead) {
			break
		}
	}
	if !pays(p, decide.EvidenceHead) {
		t.Fatalf("win rate %v, waste %v after winning probes", p.WinRate(decide.EvidenceHead), p.Waste(decide.EvidenceHead))
	}
	pl := begin(p, 10*ms)
	if why := ask(p, pl, pl.HeadAt(), 0, decide.EvidenceHead); why != decide.Allowed {
		t.Fatalf("head after it pays again: %v", why)
	}
	t.Logf("%d winning probes brought the class back", probes)
}

func TestPayoffOff(t *testing.T) {
	p := policy(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: -1})
	for i := range 500 {
		if why := settleHedge(t, p, decide.EvidenceHead, false, 50*ms); why != decide.Allowed {
			t.Fatalf("hedge %d refused without a payoff rule: %v", i, why)
		}
	}
}

func TestBehindAndGhost(t *testing.T) {
	for _, tc := range []struct {
		ahead, answered int64
		want            decide.Evidence
	}{{0, 0, decide.EvidenceHead}, {2, 1, decide.EvidenceBehind}, {2, 2, decide.EvidenceHead}, {1, 5, decide.EvidenceHead}} {
		if got := decide.Behind(tc.ahead, tc.answered); got != tc.want {
			t.Errorf("Behind(%d, %d) = %v, want %v", tc.ahead, tc.answered, got, tc.want)
		}
	}
	p := policy(t, hedge.Config{})
	if g := p.Ghost(10 * ms); g != decide.GhostDelays*10*ms {
		t.Errorf("ghost %v, want %v", g, decide.GhostDelays*10*ms)
	}
	if g := policy(t, hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad}).Ghost(10 * ms); g != 0 {
		t.Errorf("ghost %v without the spare-capacity rule", g)
	}
}

func TestPayoffWinRateValidation(t *testing.T) {
	for _, v := range []float64{1.5, 2} {
		if _, err := hedge.New(hedge.Config{PayoffWinRate: v}); err == nil {
			t.Errorf("PayoffWinRate %v accepted", v)
		}
	}
	if _, err := hedge.New(hedge.Config{MaxReplicaLoad: -2}); err == nil {
		t.Error("MaxReplicaLoad -2 accepted")
	}
}

// TestLiveBusyReplicaWaits runs the live engine over two replicas, one of
// which is busy with a long request of the same Hedger: the hedge of a
// slow request is refused while the only other replica is busy, asked for
// again a delay later, and goes once a replica is idle.
func TestLiveBusyReplicaWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		// PayoffWinRate 0.2: a new class pays at once, so that only the
		// spare-capacity rule holds the hedge back.
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Replicas: 2, PayoffWinRate: 0.2})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var hedgeAt time.Duration
		t0 := time.Now()
		// Request A holds one replica for 25 ms; request B, sent right
		// after, goes to the other (two choices see A's load) and is slow.
		wg.Go(func() {
			hedge.Do(context.Background(), h, "a", func(ctx context.Context, a hedge.Attempt) (int, error) {
				time.Sleep(25 * ms)
				return 1, nil
			})
		})
		synctest.Wait()
		hedge.Do(context.Background(), h, "b", func(ctx context.Context, a hedge.Attempt) (int, error) {
			if a.Index == 1 {
				mu.Lock()
				hedgeAt = time.Since(t0)
				mu.Unlock()
				return 2, nil
			}
			select {
			case <-time.After(100 * ms):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		wg.Wait()
		st := h.OpStats("b")
		// At 10 ms A's replica is busy: refused. At 20 ms, still busy:
		// refused. At 30 ms (A ended at 25) it goes.
		if st.Refused[hedge.RefusedBusy] != 2 || st.Hedges != 1 || st.HedgeWins != 1 || hedgeAt != 30*ms {
			t.Fatalf("hedge at %v; stats %v", hedgeAt, st)
		}
	})
}

// TestLiveGhostAvoidsStuckReplica checks that a copy cancelled because a
// hedge won keeps counting on its replica: the next request's primary goes
// to the other replica, until the stuck one answers or GhostDelays delays
// pass. The stuck primary is at the head of its replica, so its hedge
// goes after three delays; PayoffWinRate 0.2 lets a new class's hedges go.
func TestLiveGhostAvoidsStuckReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, Replicas: 2, PayoffWinRate: 0.2})
		stuck := -1
		// The primary hangs until cancelled; its hedge wins at once.
		hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
			if a.Index == 0 {
				stuck = a.Replica
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 1, nil
		})
		if stuck < 0 {
			t.Fatal("no primary")
		}
		primaryOn := func() int {
			r := -1
			hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
				r = a.Replica
				return 1, nil
			})
			return r
		}
		// Two choices over two replicas look at both: the stuck one
		// counts one copy in flight, the other none.
		for i := range 20 {
			if r := primaryOn(); r == stuck {
				t.Fatalf("request %d went to the replica whose copy was cancelled", i)
			}
		}
		time.Sleep(decide.GhostDelays * 10 * ms)
		seen := false
		for range 50 {
			seen = seen || primaryOn() == stuck
		}
		if !seen {
			t.Fatalf("the replica is still avoided after %d delays", decide.GhostDelays)
		}
	})
}
