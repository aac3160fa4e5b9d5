package decide

import (
	"math"
	"slices"
	"testing"
	"time"
)

// placeWorld is four replicas as one client sees them at one instant:
// own is its requests in flight on each, rep each one's last report (At 0
// for none), and the primary of the request holds replica 0.
type placeWorld struct {
	p    *Policy
	now  time.Duration
	own  [4]int
	rep  [4]Report
	read []int // the replicas whose load Place read, in order
}

func newPlaceWorld(t *testing.T) *placeWorld {
	t.Helper()
	const d = 10 * time.Millisecond
	p := New(Config{MaxAttempts: 2, Replicas: 4, PayoffWinRate: -1, Rollout: 1, MaxLoad: 0})
	var pl Plan
	p.Begin(&pl, 0, fixed(d), Never, false, nil) // reports count for a delay
	return &placeWorld{p: p, now: 100 * time.Millisecond}
}

// place runs Policy.Place with the two-choice Picker and the random bits
// u, as the engines do.
func (w *placeWorld) place(u uint64) (int, int, bool) {
	var pk Picker
	w.read = w.read[:0]
	pick := func(skip []int) int {
		return pk.Pick(4, append([]int{0}, skip...), func(i int) int { return w.own[i] }, u)
	}
	read := func(r int) (Report, int, int) {
		w.read = append(w.read, r)
		return w.rep[r], 0, w.own[r]
	}
	return w.p.Place(w.now, pick, read)
}

// uniformBits are random bits that make the Picker's two draws take every
// pair of its candidates, in both orders.
func uniformBits() []uint64 {
	var us []uint64
	for a := range uint64(8) {
		for b := range uint64(8) {
			us = append(us, a<<29|b<<61)
		}
	}
	return us
}

// TestPlaceMovesPastBusyReport: one replica answers at once, so the
// client sees it idle and the picker prefers it, but it reports a long
// queue; another is slow, with the client's own request waiting there;
// a third is idle and says so. Whatever the picker draws, the copy goes
// to the idle one: the replica that says it is busy keeps the copy off
// itself, and the picker's next choice takes it.
func TestPlaceMovesPastBusyReport(t *testing.T) {
	w := newPlaceWorld(t)
	w.own = [4]int{1, 0, 1, 0}
	w.rep[1] = Report{At: w.now - time.Millisecond, Present: 1000, Workers: 1}
	w.rep[3] = Report{At: w.now - time.Millisecond, Present: 0, Workers: 1}
	firstBusy := 0
	for _, u := range uniformBits() {
		r, l, by := w.place(u)
		if r != 3 || l != 0 || !by {
			t.Fatalf("u %#x: Place = %d, load %d, by report %v; want replica 3, idle by its report (read %v)", u, r, l, by, w.read)
		}
		if w.read[0] == 1 {
			firstBusy++
		}
	}
	if firstBusy == 0 {
		t.Fatal("the picker never chose the replica that reports itself busy first: the test does not test the move")
	}
}

// TestPlaceOwnViewDecides: the picker's choice is the copy's replica,
// busy or not, when the client's own view gives its load (no fresh
// report), and when its report and the own view agree that it is busy:
// the copy is refused as without reports, and asked for again a delay
// later. Only a report that says busy where the own view says idle moves
// the copy.
func TestPlaceOwnViewDecides(t *testing.T) {
	w := newPlaceWorld(t)
	w.own = [4]int{1, 2, 2, 2}
	for _, u := range uniformBits() {
		r, l, by := w.place(u)
		if r < 1 || l != 2 || by || len(w.read) != 1 {
			t.Fatalf("u %#x: Place = %d, load %d, by report %v, read %v; want the picker's one choice, busy by the own view", u, r, l, by, w.read)
		}
	}
	// Every replica has a request of the client's; replica 1 reports a
	// queue as well.
	w = newPlaceWorld(t)
	w.own = [4]int{1, 1, 1, 1}
	w.rep[1] = Report{At: w.now, Present: 3, Workers: 1}
	chose1 := false
	for _, u := range uniformBits() {
		r, l, by := w.place(u)
		if len(w.read) != 1 || r != w.read[0] {
			t.Fatalf("u %#x: Place = %d, load %d, by report %v, read %v; want the picker's one choice", u, r, l, by, w.read)
		}
		if r == 1 {
			chose1 = true
			if l != 3 || !by {
				t.Fatalf("u %#x: replica 1 at load %d, by report %v; want 3 by report", u, l, by)
			}
		}
	}
	if !chose1 {
		t.Fatal("the picker never chose replica 1: the test does not test it")
	}
}

// TestPlaceEveryCandidateBusy: when every replica but the primary's
// reports a queue, Place reads each once and returns the picker's
// choice, which Admit refuses; it reads at most MaxCandidates.
func TestPlaceEveryCandidateBusy(t *testing.T) {
	w := newPlaceWorld(t)
	for r := 1; r < 4; r++ {
		w.rep[r] = Report{At: w.now, Present: 5, Workers: 2}
	}
	r, l, by := w.place(0x123456789abcdef)
	if !by || l != 4 || r != w.read[0] {
		t.Fatalf("Place = %d, load %d, by report %v, read %v; want the first read, busy by its report", r, l, by, w.read)
	}
	if got := slices.Sorted(slices.Values(w.read)); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("read %v, want each candidate once", w.read)
	}
	var pl Plan
	w.p.Begin(&pl, 0, fixed(time.Millisecond), Never, false, nil)
	if err := w.p.Check(&pl, time.Millisecond, false); err != Allowed {
		t.Fatal(err)
	}
	if _, why := w.p.Admit(&pl, l, EvidenceNone); why != RefusedBusy {
		t.Fatalf("Admit of the last candidate: %v, want %v", why, RefusedBusy)
	}

	// A large fleet: the candidates read stop at MaxCandidates.
	n, reads := 50, 0
	pick := func(skip []int) int {
		var pk Picker
		return pk.Pick(n, append([]int{0}, skip...), nil, uint64(len(skip))*0x9e3779b97f4a7c15)
	}
	busy := func(int) (Report, int, int) { reads++; return Report{At: w.now, Present: 3, Workers: 1}, 0, 0 }
	if r, _, _ := w.p.Place(w.now, pick, busy); r < 1 || reads != MaxCandidates {
		t.Fatalf("50 replicas, all busy: Place = %d after %d reads, want a replica after %d", r, reads, MaxCandidates)
	}
}

// TestPlaceNoCandidate: a picker with nothing to offer, and one that
// cannot leave a replica out (it offers the same again), end the search.
func TestPlaceNoCandidate(t *testing.T) {
	w := newPlaceWorld(t)
	none := func([]int) int { return -1 }
	read := func(int) (Report, int, int) { t.Fatal("a load read without a candidate"); return Report{}, 0, 0 }
	if r, l, by := w.p.Place(w.now, none, read); r != -1 || l != -1 || by {
		t.Fatalf("no candidate: Place = %d, %d, %v; want -1, -1, false", r, l, by)
	}
	calls := 0
	same := func([]int) int { calls++; return 2 }
	busy := func(int) (Report, int, int) { return Report{At: w.now, Present: 1, Workers: 1}, 0, 0 }
	if r, l, by := w.p.Place(w.now, same, busy); r != 2 || l != 1 || !by || calls != 2 {
		t.Fatalf("a picker that cannot skip: Place = %d, %d, %v after %d picks; want 2, 1, true after 2", r, l, by, calls)
	}
}

// TestReportedLoadOwnFloor: a fresh report that counts fewer requests on
// its replica than the client has in flight there itself is read as
// counting the client's own: saying it is idle draws no copy to a
// replica where the client sees its requests wait. A report that counts
// more (other clients' work) is read as it is.
func TestReportedLoadOwnFloor(t *testing.T) {
	w := newPlaceWorld(t)
	for _, c := range []struct {
		rep       Report
		sent, own int
		want      int
	}{
		{Report{Present: 0, Workers: 1}, 0, 2, 2},
		{Report{Present: 0, Workers: 1}, 1, 2, 2},
		{Report{Present: 0, Workers: 4}, 0, 2, 0}, // room for both and one more
		{Report{Present: 5, Workers: 1}, 0, 2, 5},
		{Report{Present: 1, Workers: 1}, 1, 2, 2},
		{Report{Present: 0, Workers: 1}, 0, 0, 0},
	} {
		c.rep.At = w.now
		if got, by := w.p.ReportedLoad(c.rep, c.sent, c.own, w.now); got != c.want || !by {
			t.Errorf("%+v, %d sent since, %d own: ReportedLoad = %d, %v; want %d by report", c.rep, c.sent, c.own, got, by, c.want)
		}
	}
}

// TestReportAheadSaturates: counts near the top of int read as a replica
// as busy as can be, never as a negative load (an idle one).
func TestReportAheadSaturates(t *testing.T) {
	for _, c := range []struct {
		r    Report
		sent int
	}{
		{Report{Present: math.MaxInt, Workers: 1}, 0},
		{Report{Present: math.MaxInt, Workers: 1}, 3},
		{Report{Present: math.MaxInt - 1, Workers: 4}, 2},
		{Report{Present: math.MaxInt / 2, Workers: 1}, math.MaxInt/2 + 7},
	} {
		if got := c.r.Ahead(c.sent); got < math.MaxInt/2 {
			t.Errorf("%+v with %d sent since: Ahead = %d, want a huge count", c.r, c.sent, got)
		}
	}
	for _, c := range []struct{ a, b, want int }{
		{0, 0, 0},
		{3, 4, 7},
		{math.MaxInt, 1, math.MaxInt},
		{math.MaxInt - 5, 5, math.MaxInt},
		{math.MaxInt - 5, 4, math.MaxInt - 1},
		{-3, 4, 4},
	} {
		if got := AddCount(c.a, c.b); got != c.want {
			t.Errorf("AddCount(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
