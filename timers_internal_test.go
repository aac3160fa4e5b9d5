package hedge

import (
	"context"
	"testing"
	"time"
)

const us = time.Microsecond

// TestPlanWait checks, at fixed estimates of lateness, how the loop waits
// for a timer due in wait: never a spin for a queue that is not precise
// or for a timer far away, a kernel sleep when the runtime timer would
// wake too late, and a spin for the last stretch only.
func TestPlanWait(t *testing.T) {
	typical := lateness{coarse: 1000 * us, fine: 60 * us} // stretch 90 µs
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		pending bool
		precise bool
		late    lateness
		spin    time.Duration // allowance left; -1: spinBurst
		mode    waitMode
		d       time.Duration
	}{
		{"nothing queued", 0, false, true, typical, -1, waitCoarse, linger},
		{"nothing queued, not precise", 0, false, false, typical, -1, waitCoarse, linger},
		{"not precise: runtime timer, however close", 300 * us, true, false, typical, -1, waitCoarse, 300 * us},
		{"not precise, far", 5 * time.Millisecond, true, false, typical, -1, waitCoarse, 5 * time.Millisecond},
		{"far: runtime timer until its lateness and the stretch", 5 * time.Millisecond, true, true, typical, -1, waitCoarse, 5*time.Millisecond - 1000*us - 90*us},
		{"just far enough for the runtime timer", 1340 * us, true, true, typical, -1, waitCoarse, 250 * us},
		{"too close for the runtime timer: one slice", 1339 * us, true, true, typical, -1, waitFine, fineSlice},
		{"sub-millisecond: kernel sleep, a slice at most", 500 * us, true, true, typical, -1, waitFine, fineSlice},
		{"kernel sleep to the stretch", 200 * us, true, true, typical, -1, waitFine, 110 * us},
		{"within the stretch: spin", 90 * us, true, true, typical, -1, waitSpin, 90 * us},
		{"due now: spin (the loop fires it next turn)", 0, true, true, typical, -1, waitSpin, 0},
		{"precise kernel sleeps: a short stretch", 30 * us, true, true, lateness{coarse: 1000 * us, fine: 2 * us}, -1, waitFine, 20 * us},
		{"late kernel sleeps: stretch capped", 1600 * us, true, true, lateness{coarse: 4 * time.Millisecond, fine: 4 * time.Millisecond}, -1, waitFine, 100 * us},
		{"late kernel sleeps: spin within the cap", 1500 * us, true, true, lateness{coarse: 4 * time.Millisecond, fine: 4 * time.Millisecond}, -1, waitSpin, 1500 * us},
		{"an idle machine's runtime timer", 400 * us, true, true, lateness{coarse: 50 * us, fine: 60 * us}, -1, waitCoarse, 260 * us},
		{"spent: kernel sleep to the timer itself", 90 * us, true, true, typical, 89 * us, waitFine, 90 * us},
		{"spent: no stretch kept before a far timer", 1300 * us, true, true, typical, 0, waitCoarse, 300 * us},
		{"enough left for what remains of the stretch", 40 * us, true, true, typical, 40 * us, waitSpin, 40 * us},
		{"not enough for the stretch: kernel sleep to the timer", 200 * us, true, true, typical, 89 * us, waitFine, 200 * us},
	} {
		spin := tc.spin
		if spin < 0 {
			spin = spinBurst
		}
		mode, d := planWait(tc.wait, tc.pending, tc.precise, tc.late, spin)
		if mode != tc.mode || d != tc.d {
			t.Errorf("%s: planWait(%v, %v, %v, %+v, %v) = %v, %v; want %v, %v", tc.name, tc.wait, tc.pending, tc.precise, tc.late, spin, mode, d, tc.mode, tc.d)
		}
	}
}

func TestSpinStretch(t *testing.T) {
	for _, tc := range []struct{ fine, want time.Duration }{
		{0, minSpin},
		{4 * us, minSpin},
		{60 * us, 90 * us},
		{time.Millisecond, spinWindow},
		{time.Hour, spinWindow},
	} {
		if got := spinStretch(tc.fine); got != tc.want {
			t.Errorf("spinStretch(%v) = %v; want %v", tc.fine, got, tc.want)
		}
	}
}

// TestAdapt feeds the lateness estimator fixed sequences: it rises a
// quarter of the way to a later sample and falls a sixty-fourth of the
// way to an earlier one, within [0, ceiling]; on a steady spread it
// settles near a high percentile, and one outlier moves it only part of
// the way.
func TestAdapt(t *testing.T) {
	for _, tc := range []struct {
		est, sample, ceiling, want time.Duration
	}{
		{100 * us, 200 * us, time.Millisecond, 125 * us},
		{100 * us, 36 * us, time.Millisecond, 99 * us},
		{100 * us, 100 * us, time.Millisecond, 100 * us},
		{100 * us, -5 * us, time.Millisecond, 100*us - 100*us/64},
		{100 * us, time.Hour, 500 * us, 200 * us},
		{0, 1, time.Millisecond, 1}, // a one-nanosecond rise is not lost to rounding
	} {
		if got := adapt(tc.est, tc.sample, tc.ceiling); got != tc.want {
			t.Errorf("adapt(%v, %v, %v) = %v; want %v", tc.est, tc.sample, tc.ceiling, got, tc.want)
		}
	}
	// Samples 50, 51, ..., 149 µs over and over: the estimate ends in
	// the upper part of the spread, not at its mean.
	est := time.Duration(0)
	for range 200 {
		for i := range 100 {
			est = adapt(est, time.Duration(50+i)*us, time.Millisecond)
		}
	}
	if est < 125*us || est > 149*us {
		t.Errorf("estimate over a steady 50-149 µs spread = %v; want between the p75 and the max", est)
	}
	// One outlier of 10 ms among samples of 60 µs: capped, and forgotten.
	est = 60 * us
	est = adapt(est, 10*time.Millisecond, maxFineLate)
	if est != 60*us+(maxFineLate-60*us+3)/4 {
		t.Errorf("after an outlier: %v", est)
	}
	for range 400 {
		est = adapt(est, 60*us, maxFineLate)
	}
	if est > 61*us {
		t.Errorf("400 steady samples after an outlier: %v; want back near 60 µs", est)
	}
}

// TestAllowance checks the spin allowance at fixed times: a twentieth of
// the time that passed, saved up to spinBurst, less what was spun; time
// going backwards adds nothing.
func TestAllowance(t *testing.T) {
	var a allowance
	a = a.refill(time.Millisecond)
	if a.left != 50*us {
		t.Fatalf("after 1 ms: %v; want 50 µs", a.left)
	}
	a = a.spend(30 * us)
	if a.left != 20*us {
		t.Fatalf("after spinning 30 µs: %v; want 20 µs", a.left)
	}
	a = a.spend(time.Millisecond)
	if a.left != 0 {
		t.Fatalf("overspent: %v; want 0", a.left)
	}
	a = a.refill(500 * us) // earlier than the last refill
	if a.left != 0 || a.at != time.Millisecond {
		t.Fatalf("time going backwards: %+v", a)
	}
	a = a.refill(time.Hour)
	if a.left != spinBurst {
		t.Fatalf("after an hour: %v; want the burst, %v", a.left, spinBurst)
	}
	// Spinning all the time it is allowed to, over a second, spins a
	// twentieth of it.
	a, spun := allowance{}, time.Duration(0)
	for now := time.Duration(0); now < time.Second; now += 100 * us {
		a = a.refill(now)
		s := min(a.left, 100*us)
		spun += s
		a = a.spend(s)
	}
	if spun > time.Second/spinShare {
		t.Fatalf("spun %v in a second; want at most %v", spun, time.Second/spinShare)
	}
}

// BenchmarkTimerQueueLooks counts how often the timer queue wakes for
// nothing, when most calls answer before their delay: 16 callers, each
// call answering after a 200 µs sleep (which the runtime may stretch to
// about a millisecond), hedged after 1 or 5 ms. The queue sleeps until its
// earliest timer, which that call usually beats, so its wakes come about
// once per delay, whatever the rate of calls: as kicks (the runtime timer
// that starts the loop) while no timer has come due, as the loop's looks
// at its heap once one has.
//
//	go test -run '^$' -bench TimerQueueLooks -benchtime 3s .
func BenchmarkTimerQueueLooks(b *testing.B) {
	for _, delay := range []time.Duration{time.Millisecond, 5 * time.Millisecond} {
		b.Run("delay="+delay.String(), func(b *testing.B) {
			h, err := New(Config{Delay: Fixed(delay), NoBudget: true})
			if err != nil {
				b.Fatal(err)
			}
			answer := func(ctx context.Context, a Attempt) (int, error) {
				time.Sleep(200 * time.Microsecond)
				return 0, nil
			}
			start := time.Now()
			b.SetParallelism(8) // 16 callers on two cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					Do(context.Background(), h, "op", answer)
				}
			})
			elapsed := time.Since(start).Seconds()
			q := h.timers
			q.mu.Lock()
			kicks, looks, fired := q.kicks, q.looks, q.fired
			q.mu.Unlock()
			b.ReportMetric(float64(b.N)/elapsed, "calls/s")
			b.ReportMetric(float64(fired)/float64(b.N), "fired/call")
			b.ReportMetric(float64(kicks)/elapsed, "kicks/s")
			b.ReportMetric(float64(looks)/elapsed, "looks/s")
		})
	}
}

// TestTimerPeak checks the windowed maximum at fixed samples: a sample
// counts for one to two windows, then is forgotten.
func TestTimerPeak(t *testing.T) {
	var p peak
	p = p.add(5*us, 4)
	p = p.add(9*us, 4)
	p = p.add(1*us, 4)
	if p.value() != 9*us {
		t.Fatalf("after 5, 9, 1 µs: %v; want 9 µs", p.value())
	}
	p = p.add(2*us, 4) // the window turns over
	if p.value() != 9*us || p.n != 0 {
		t.Fatalf("window full: %+v; want 9 µs kept", p)
	}
	for range 3 {
		p = p.add(3*us, 4)
	}
	if p.value() != 9*us {
		t.Fatalf("7 samples after 9 µs: %v; want 9 µs still", p.value())
	}
	p = p.add(3*us, 4)
	if p.value() != 3*us {
		t.Fatalf("two windows after 9 µs: %v; want it forgotten, 3 µs", p.value())
	}
}

// TestTimerCoarseLate checks the runtime timer's estimate: it starts at
// initialCoarseLate and never falls below it; it rises at once to a
// later sample; it never falls below the largest sample seen, up to
// maxSettledCoarseLate; beyond that, a descheduled wake-up is forgotten
// after two recent windows.
func TestTimerCoarseLate(t *testing.T) {
	e := newCoarseLate()
	if e.value() != initialCoarseLate {
		t.Fatalf("start: %v; want %v", e.value(), initialCoarseLate)
	}
	for range 10 * recentWindow {
		e = e.add(-5 * us)
		e = e.add(60 * us)
	}
	if e.value() != initialCoarseLate {
		t.Fatalf("after low samples: %v; want %v still", e.value(), initialCoarseLate)
	}
	e = e.add(1300 * us)
	if e.value() != 1300*us {
		t.Fatalf("then 1.3 ms: %v; want 1.3 ms at once", e.value())
	}
	for range 10 * recentWindow {
		e = e.add(60 * us)
	}
	if e.value() != 1300*us {
		t.Fatalf("many low samples after 1.3 ms: %v; want 1.3 ms kept", e.value())
	}
	e = e.add(10 * time.Millisecond)
	if e.value() != maxCoarseLate {
		t.Fatalf("a 10 ms outlier: %v; want the cap, %v", e.value(), maxCoarseLate)
	}
	for range recentWindow {
		e = e.add(60 * us)
	}
	if e.value() != maxCoarseLate {
		t.Fatalf("a recent window after the outlier: %v; want it kept", e.value())
	}
	for range recentWindow {
		e = e.add(60 * us)
	}
	if e.value() != maxSettledCoarseLate {
		t.Fatalf("two recent windows after the outlier: %v; want what the settled memory keeps of it, %v", e.value(), maxSettledCoarseLate)
	}
}

// idleRuntimeLate models how late the runtime timer of an otherwise idle
// process on Linux wakes after a sleep of d: the runtime sleeps in
// epoll_wait, which counts whole milliseconds, so it sleeps d truncated
// to the millisecond (nothing, for a sleep under one) and then, if that
// woke before d, one millisecond more; each of these sleeps wakes 50 µs
// late (the kernel's timer slack).
func idleRuntimeLate(d time.Duration) time.Duration {
	const slack = 50 * us
	woke := d.Truncate(time.Millisecond)
	if woke > 0 {
		woke += slack
	}
	if woke < d {
		woke += time.Millisecond + slack
	}
	return woke - d
}

// TestTimerIdleRuntimeLate checks the model at lengths on either side of
// its steps.
func TestTimerIdleRuntimeLate(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{
		{300 * us, 750 * us},
		{4030 * us, 20 * us},
		{4050 * us, 0},
		{4051 * us, 1049 * us},
		{4800 * us, 300 * us},
	} {
		if got := idleRuntimeLate(tc.d); got != tc.want {
			t.Errorf("idleRuntimeLate(%v) = %v; want %v", tc.d, got, tc.want)
		}
	}
}

// TestPreciseQueueOnIdleRuntime drives planWait and the queue's estimates
// against idleRuntimeLate, for hedge timers at fixed delays set a few
// microseconds apart from one call to the next: however the estimates
// move, no timer may come due while the queue sleeps on the runtime
// timer (it would be sent up to a millisecond late). This is what an
// estimate of the runtime timer's lateness between its two modes gets
// wrong, and so does one that falls back to the samples of a while: the
// sleeps lengthen as it falls, into the next millisecond.
func TestPreciseQueueOnIdleRuntime(t *testing.T) {
	const fineLate = 60 * us
	for _, delay := range []time.Duration{1500 * us, 2 * time.Millisecond, 2900 * us, 5 * time.Millisecond, 20 * time.Millisecond} {
		q := newTimerQueue(time.Time{})
		q.late.fine = fineLate
		missed, coarse := 0, 0
		const calls = 10000
		for i := range calls {
			wait := delay - time.Duration(i*37%20)*us
			for wait > 0 {
				mode, d := planWait(wait, true, true, q.late, spinBurst)
				if mode == waitSpin {
					break
				}
				late := fineLate
				if mode == waitCoarse {
					coarse++
					late = idleRuntimeLate(d)
					q.observeCoarse(late)
					if d+late > wait {
						missed++
						break
					}
				}
				wait -= d + late
			}
		}
		if coarse == 0 {
			t.Errorf("delay %v: the runtime timer was never used", delay)
		}
		if missed > 0 {
			t.Errorf("delay %v: %d of %d timers came due during a runtime-timer sleep; estimate at the end %v", delay, missed, calls, q.late.coarse)
		}
	}
}

// countTimed counts its firings.
type countTimed struct{ taken, fired int }

func (c *countTimed) due()                  { c.taken++ }
func (c *countTimed) fire(at time.Duration) { c.fired++ }

// A call has one timer at most: adding a timer for a slot that holds one
// moves it, earlier or later, and advance moves it only earlier, or
// queues one for a slot that holds none and was not taken.
func TestTimerQueueOneTimerPerSlot(t *testing.T) {
	q := newTimerQueue(time.Time{})
	q.kickAt = -1 // no kick: nothing serves the queue, and no clock is read
	var a, b countTimed
	ta, tb := timerItem{t: &a, slot: -1}, timerItem{t: &b, slot: -1}
	q.add(&ta, time.Hour)
	q.add(&tb, 2*time.Hour)
	q.add(&ta, 3*time.Hour)
	if len(q.items) != 2 || q.items[0].t != &b || q.items[ta.slot].at != 3*time.Hour {
		t.Fatalf("after adding a's timer twice: %d items, the first %v; want 2, b's first", len(q.items), q.items[0].t)
	}
	taken := false
	q.advance(&ta, 4*time.Hour, &taken)
	if q.items[ta.slot].at != 3*time.Hour {
		t.Errorf("advance moved a's timer later, to %v", q.items[ta.slot].at)
	}
	q.advance(&ta, time.Minute, &taken)
	if len(q.items) != 2 || q.items[0].t != &a || q.items[0].at != time.Minute {
		t.Errorf("advance to 1m: first item %v at %v", q.items[0].t, q.items[0].at)
	}
	q.remove(&ta)
	if ta.armed || ta.slot != -1 || len(q.items) != 1 {
		t.Errorf("after remove: a armed %v, slot %d, %d items; want false, -1, 1", ta.armed, ta.slot, len(q.items))
	}
	taken = true
	q.advance(&ta, time.Minute, &taken)
	if ta.slot != -1 || len(q.items) != 1 {
		t.Errorf("advance queued a timer that the queue had taken: slot %d, %d items", ta.slot, len(q.items))
	}
	taken = false
	q.advance(&ta, time.Minute, &taken)
	if ta.slot < 0 || len(q.items) != 2 {
		t.Errorf("advance did not queue a timer for a slot that held none: slot %d, %d items", ta.slot, len(q.items))
	}
}
