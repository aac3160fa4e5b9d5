package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/tailcut/hedge"
)

// TraceEvent is one decision of a run, reported to Simulator.Trace: a copy
// that went (Copy >= 0; the primary is copy 0), or a copy that the
// library's Policy refused (Copy = -1, Refused says why).
type TraceEvent struct {
	Request int           // the request's index in arrival order, from 0
	Copy    int           // the copy's index, or -1 for a refusal
	At      float64       // simulated time
	Refused hedge.Refusal // why no copy went, when Copy is -1
}

// Script replaces a run's random arrivals and sizes with given ones, to
// drive the simulator through a scenario decided in advance (as the tests
// that compare it with the live engine do).
type Script struct {
	// Requests lists the requests in arrival order.
	Requests []ScriptedRequest
}

// ScriptedRequest is one request of a Script.
type ScriptedRequest struct {
	// At is the arrival time, not before the previous request's.
	At float64
	// Sizes gives the work of each copy: Sizes[k] for copy k, which
	// must be positive for every copy the request may send.
	Sizes []float64
	// Deadline, if positive, is the caller's deadline, that long after
	// At: the library sends no copy once it has passed, nor a delayed
	// copy when less than the delay is left (decide.Policy). The
	// simulator does not cancel copies at the deadline: a scenario that
	// compares with the live engine lets its requests finish before.
	Deadline float64
}

// RunScript runs c with the arrivals and copy sizes of sc instead of
// random ones: c.Requests is len(sc.Requests), nothing is warm-up, and
// c.Load only sets nothing but validation. Routing, queueing, stalls and
// the strategy run as usual, so a scenario without queueing has enough
// servers for every copy in flight.
func (s *Simulator) RunScript(c Config, sc Script) (RunResult, error) {
	return s.RunScriptContext(context.Background(), c, sc)
}

// RunScriptContext is RunScript that stops early, with ctx's error and
// no result, once ctx has ended: the event loop checks it every few
// thousand events.
func (s *Simulator) RunScriptContext(ctx context.Context, c Config, sc Script) (RunResult, error) {
	c.Requests, c.Warmup, c.Fanout, c.FanoutNeed = len(sc.Requests), 0, 1, 0
	if err := c.Validate(); err != nil {
		return RunResult{}, err
	}
	var errs []error
	for i, r := range sc.Requests {
		if i > 0 && !(r.At >= sc.Requests[i-1].At) {
			errs = append(errs, fmt.Errorf("script request %d arrives at %v, before request %d at %v", i, r.At, i-1, sc.Requests[i-1].At))
		}
		if len(r.Sizes) == 0 || len(r.Sizes) > MaxAttempts {
			errs = append(errs, fmt.Errorf("script request %d has %d sizes: give 1 to %d, one per copy it may send", i, len(r.Sizes), MaxAttempts))
		}
		if !(r.Deadline >= 0) {
			errs = append(errs, fmt.Errorf("script request %d has deadline %v: use 0 for none, or a positive time", i, r.Deadline))
		}
		for k, x := range r.Sizes {
			if !(x > 0) {
				errs = append(errs, fmt.Errorf("script request %d copy %d has size %v: use a positive amount of work", i, k, x))
			}
		}
	}
	if len(errs) > 0 {
		return RunResult{}, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	e := &s.e
	e.init(c)
	e.script = sc.Requests
	e.traceFn, e.doneFn = s.Trace, s.Done
	e.nextArr = sc.Requests[0].At
	e.ctx = ctx
	e.run()
	e.script, e.traceFn, e.doneFn, e.ctx = nil, nil, nil, nil
	if err := e.err; err != nil {
		e.err = nil
		return RunResult{}, err
	}
	return e.result(), nil
}

// emit reports ev to the trace, if any.
func (e *engine) emit(ev TraceEvent) {
	if e.traceFn != nil {
		e.traceFn(ev)
	}
}
