package sim

func (e *engine) onStall(s int32) {
	sv := &e.srv[s]
	sv.stalled = !sv.stalled
	speed := e.slowF
	if sv.stalled {
		speed *= e.slowSpeed
		e.nStalled++
	} else {
		e.nStalled--
	}
	e.setSpeed(s, speed)
	e.ev.push(event{t: e.now + e.rS.ExpFloat64()*e.stallMean[b2i(sv.stalled)], a: s, tag: evTag{kind: evStall}})
}

// onSlow turns the correlated world's slowdown of every server on or off.
func (e *engine) onSlow() {
	e.slow = !e.slow
	e.slowF = 1
	if e.slow {
		e.slowF = 1 / e.c.SlowFactor
	}
	for i := range e.srv {
		speed := e.slowF
		if e.srv[i].stalled {
			speed *= e.slowSpeed
		}
		e.setSpeed(int32(i), speed)
	}
	if e.c.SlowFor > 0 {
		if e.slow {
			e.ev.push(event{t: e.now + e.c.SlowFor, tag: evTag{kind: evSlow}})
		}
		return
	}
	e.ev.push(event{t: e.now + e.rS.ExpFloat64()*e.slowMean[b2i(e.slow)], tag: evTag{kind: evSlow}})
}

// setSpeed changes server s's speed now, accounting the work done at the
// old speed and rescheduling its next completion.
func (e *engine) setSpeed(s int32, speed float64) {
	sv := &e.srv[s]
	if e.ps {
		e.psAdvance(s)
		sv.speed = speed
		e.psSchedule(s)
		return
	}
	if sv.cur >= 0 {
		sv.rem -= (e.now - sv.last) * sv.speed
		if sv.rem < 0 {
			sv.rem = 0
		}
		sv.last = e.now
	}
	sv.speed = speed
	if sv.cur >= 0 {
		e.dep.set(s, e.now+sv.rem/sv.speed)
	}
}
