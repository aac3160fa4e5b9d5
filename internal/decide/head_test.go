package decide

import (
	"testing"
	"time"
)

// headRT is a Runtime whose replicas are idle and whose primary is at the
// head of its replica (or behind, when behind is set): it records the
// copies launched and the timer armed.
type headRT struct {
	behind   bool
	launched []time.Duration
	armed    time.Duration
	refused  []Refusal
}

func (r *headRT) Place(time.Duration) (int, int, bool) { return 1, 0, false }
func (r *headRT) Evidence() Evidence {
	if r.behind {
		return EvidenceBehind
	}
	return EvidenceHead
}
func (r *headRT) Launch(now time.Duration, _ int, _ Grant) bool {
	r.launched = append(r.launched, now)
	return true
}
func (r *headRT) Refused(_ time.Duration, why Refusal, _ int) { r.refused = append(r.refused, why) }
func (r *headRT) Arm(at time.Duration)                        { r.armed = at }

// TestHeadWait: with the payoff rule on, a copy of a primary at the head
// of its replica is refused (RefusedHead) until the primary has waited
// HeadDelays delays, and the driver asks for it again exactly then; a
// primary behind an earlier request is not held; with the rule off
// (PayoffWinRate negative), neither is.
func TestHeadWait(t *testing.T) {
	const delay = 10 * time.Millisecond
	const start = 5 * time.Millisecond
	for _, c := range []struct {
		name     string
		minWin   float64
		behind   bool
		wantHeld bool
	}{
		{"head", 0.2, false, true},
		{"behind", 0.2, true, false},
		{"head without the payoff rule", -1, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// PayoffWinRate 0.2 is below a new class's win rate: the payoff
			// rule itself lets the copy go.
			p := New(Config{MaxAttempts: 2, Replicas: 3, PayoffWinRate: c.minWin, Rollout: 1, MaxLoad: -1})
			var pl Plan
			p.Begin(&pl, start, fixed(delay), Never, false, nil)
			if got, want := pl.HeadAt(), start+HeadDelays*delay; got != want {
				t.Fatalf("HeadAt = %v, want %v", got, want)
			}
			rt := &headRT{behind: c.behind}
			p.Schedule(&pl, start, rt)
			if rt.armed != start+delay {
				t.Fatalf("first timer at %v, want %v", rt.armed, start+delay)
			}
			why := p.Fire(&pl, start+delay, rt)
			if !c.wantHeld {
				if why != Allowed || len(rt.launched) != 1 || rt.launched[0] != start+delay {
					t.Fatalf("at the delay: %v, launched %v; want a copy at %v", why, rt.launched, start+delay)
				}
				return
			}
			if why != RefusedHead || len(rt.launched) != 0 {
				t.Fatalf("at the delay: %v, launched %v; want head, none", why, rt.launched)
			}
			if !p.Retries(&pl, why) || rt.armed != pl.HeadAt() {
				t.Fatalf("after the head wait's refusal: retries %v, timer at %v; want true, %v", p.Retries(&pl, why), rt.armed, pl.HeadAt())
			}
			if len(rt.refused) != 1 || rt.refused[0] != RefusedHead || !Counted(RefusedHead) {
				t.Fatalf("refusals counted %v, want one head", rt.refused)
			}
			if why := p.Fire(&pl, pl.HeadAt(), rt); why != Allowed || len(rt.launched) != 1 {
				t.Fatalf("at HeadAt: %v, launched %v; want a copy", why, rt.launched)
			}
			if pl.Evidence != EvidenceHead || pl.HedgeAt != pl.HeadAt() {
				t.Fatalf("the hedge is recorded as %v at %v, want head at %v", pl.Evidence, pl.HedgeAt, pl.HeadAt())
			}
		})
	}
}

// TestHeadAtEdges: no copy due means never, and a delay of zero means at
// once.
func TestHeadAtEdges(t *testing.T) {
	pl := Plan{Start: time.Second, Delay: Never}
	if pl.HeadAt() != Never {
		t.Fatalf("HeadAt with no delay = %v, want Never", pl.HeadAt())
	}
	pl.Delay = 0
	if pl.HeadAt() != time.Second {
		t.Fatalf("HeadAt with a zero delay = %v, want the start", pl.HeadAt())
	}
	pl.Start, pl.Delay = Never/2, Never/3
	if pl.HeadAt() != Never {
		t.Fatalf("HeadAt past the end of time = %v, want Never", pl.HeadAt())
	}
}
