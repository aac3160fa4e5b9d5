package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runOnce runs one configuration on one plan: it makes a fresh client,
// replays the plan's arrivals and stalls against it, waits for every
// request and stall to end, and returns what the run measured.
func runOnce(ctx context.Context, b Backend, c Contender, p *plan, s Scenario) (*RunResult, error) {
	// Each run starts from a collected heap, so that one run's garbage
	// is not another's pause.
	runtime.GC()
	time.Sleep(s.Settle)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	goroutines := runtime.NumGoroutine()
	client, err := c.New(b)
	if err != nil {
		return nil, fmt.Errorf("making the client: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = client.Close()
		}
	}()
	pids := pidsOf(b)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	load1 := LoadAverage()
	start := time.Now().Add(2 * time.Millisecond)

	stalls := replayStalls(ctx, b, p.stalls, start.Add(s.Warmup))
	defer stalls.stop()
	t := newTraffic(client, b, pids, p, s, start)
	t.dispatch(runCtx, func() { cancelRun(); stalls.stop() })
	cpu1 := ReadCPU(pids)
	dispatchEnd := t.pacer.Now()

	// Every stall of the schedule starts before the last arrival: let
	// the last one run its course, so that every configuration of the
	// repeat sees all of them. Only ctx's end cuts them short.
	if err := stalls.wait(s.StallLength + 10*time.Second); err != nil {
		return nil, err
	}
	// Each request is bounded by its timeout; a client that ignores its
	// context gets a few seconds more, then the run fails rather than
	// hang.
	if err := t.wait(s.Timeout + 5*time.Second); err != nil {
		cancelRun()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	c0 := t.startCounters()
	stats1 := client.Stats()
	closed = true
	if err := client.Close(); err != nil {
		return nil, fmt.Errorf("closing the client: %w", err)
	}
	served1 := served(b)

	r := &RunResult{Config: c.Name, Repeat: p.repeat, Aborted: t.aborted, Load1: load1, Goroutines: goroutines}
	measured := t.measured()
	r.Requests = len(measured)
	r.Errors = int(t.errCount.Load())
	r.FirstError = t.firstErr
	if span := dispatchEnd - s.Warmup; span > 0 {
		r.Rate = float64(r.Requests) / span.Seconds()
	}
	fillLatencies(r, measured)
	r.seq = measured
	r.sent = make([]int64, len(measured))
	for i := range r.sent {
		r.sent[i] = t.start.Add(p.arrivals[p.first+i]).UnixNano()
	}
	fillLags(r, t.measuredLags())
	fillClientStats(r, stats1.sub(c0.stats))
	// The servers count leaves: a fan-out request sends s.FanOut.
	r.ServerExtraPct = serverExtraPct(r.Requests*max(1, s.FanOut), c0.served, served1)
	stalls.fill(r)
	use := CPUBetween(c0.cpu, cpu1)
	r.OtherCPU, r.SelfCPU, r.ChildCPU = use.Others, use.Self, use.Children
	r.SelfCPUPerRequestUs = -1
	if use.OK && r.Requests > 0 {
		r.SelfCPUPerRequestUs = use.Self * cpu1.At.Sub(c0.cpu.At).Seconds() * 1e6 / float64(r.Requests)
	}
	flagNoise(r, s, use)
	return r, nil
}

// stallReplay replays the stall schedules of one run, relative to the
// start of its measured span, on one goroutine per replica, and counts
// the stalls.
type stallReplay struct {
	stop context.CancelFunc
	wg   sync.WaitGroup

	count, errs, stalledNs atomic.Int64
}

// replayStalls starts replaying scheds (one per replica, times relative
// to zero) on b. The replay ends with its schedules, with ctx, or when
// stop is called.
func replayStalls(ctx context.Context, b Backend, scheds [][]Stall, zero time.Time) *stallReplay {
	stallCtx, stop := context.WithCancel(ctx)
	sr := &stallReplay{stop: stop}
	for i, sched := range scheds {
		if len(sched) == 0 {
			continue
		}
		sr.wg.Add(1)
		go func() {
			defer sr.wg.Done()
			sr.replay(stallCtx, b, i, sched, zero)
		}()
	}
	return sr
}

// replay stalls replica i of b at each time of sched.
func (sr *stallReplay) replay(ctx context.Context, b Backend, i int, sched []Stall, zero time.Time) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, st := range sched {
		t.Reset(time.Until(zero.Add(st.At)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t0 := time.Now()
		if err := b.Stall(ctx, i, st.Length); err != nil {
			if ctx.Err() != nil {
				return
			}
			sr.errs.Add(1)
			continue
		}
		sr.count.Add(1)
		sr.stalledNs.Add(int64(time.Since(t0)))
	}
}

// wait returns once every replica's replay has ended, or an error after
// limit: a backend's Stall that does not return.
func (sr *stallReplay) wait(limit time.Duration) error {
	done := make(chan struct{})
	go func() { sr.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		return errors.New("a stall did not end 10 s after its time: the backend's Stall does not return")
	}
}

// fill copies the stall counters into r.
func (sr *stallReplay) fill(r *RunResult) {
	r.Stalls = int(sr.count.Load())
	r.StallErrors = int(sr.errs.Load())
	r.StalledMs = float64(sr.stalledNs.Load()) / 1e6
}

// counters are the client's, the CPU's and the servers' counters at the
// start of a run's measured span.
type counters struct {
	stats  ClientStats
	cpu    CPUSample
	served []int64
}

// traffic sends the requests of one run, each on its own goroutine at its
// intended time, and records their latencies and dispatch lags.
type traffic struct {
	client Client
	b      Backend
	pids   []int
	p      *plan
	s      Scenario
	start  time.Time
	pacer  Pacer

	lat, lag []int64 // per arrival, ns from the intended time
	wg       sync.WaitGroup
	inFlight atomic.Int64
	errCount atomic.Int64 // errors of measured requests
	errOnce  sync.Once
	firstErr string

	// dispatched is how many arrivals were sent; aborted, if not empty,
	// is why dispatch stopped before the last.
	dispatched int
	aborted    string
	// counters0 receives the counters read at the first measured arrival.
	counters0 chan counters
}

// newTraffic returns the traffic of plan p for client, paced from start.
func newTraffic(client Client, b Backend, pids []int, p *plan, s Scenario, start time.Time) *traffic {
	n := len(p.arrivals)
	return &traffic{
		client: client, b: b, pids: pids, p: p, s: s, start: start,
		pacer:     Pacer{Start: start, SpinWindow: s.SpinWindow},
		lat:       make([]int64, n),
		lag:       make([]int64, n),
		counters0: make(chan counters, 1),
	}
}

// dispatch sends the arrivals, paced, until the last or ctx's end. If the
// requests in flight reach Scenario.MaxInFlight it records why in aborted,
// calls abort and stops. At the warm-up boundary it reads the counters on
// their own goroutine, so as not to delay dispatch.
func (t *traffic) dispatch(ctx context.Context, abort func()) {
	for i, at := range t.p.arrivals {
		t.pacer.Wait(at)
		if ctx.Err() != nil {
			break
		}
		if i == t.p.first {
			go func() { t.counters0 <- t.readCounters() }()
		}
		if t.inFlight.Load() >= int64(t.s.MaxInFlight) {
			t.aborted = fmt.Sprintf("%d requests in flight at %v: the backend or the machine cannot keep up with %.0f/s", t.s.MaxInFlight, at.Round(time.Millisecond), t.s.Rate)
			abort()
			break
		}
		t.inFlight.Add(1)
		t.wg.Add(1)
		go t.send(ctx, i, at)
		t.dispatched = i + 1
	}
}

// send runs request i, intended at at, to its end.
func (t *traffic) send(ctx context.Context, i int, at time.Duration) {
	defer t.wg.Done()
	defer t.inFlight.Add(-1)
	t.lag[i] = int64(time.Since(t.start) - at)
	rctx, cancel := context.WithTimeout(ctx, t.s.Timeout)
	err := t.client.Do(rctx, i)
	cancel()
	t.lat[i] = int64(time.Since(t.start) - at)
	if err != nil && i >= t.p.first {
		t.errCount.Add(1)
		t.errOnce.Do(func() { t.firstErr = err.Error() })
	}
}

// wait returns once every request sent has returned, or an error after
// grace: a client that does not honour its context.
func (t *traffic) wait(grace time.Duration) error {
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return fmt.Errorf("%d requests still running %v after the last was sent: the client does not honour its context", t.inFlight.Load(), grace)
	}
}

// readCounters reads the counters now.
func (t *traffic) readCounters() counters {
	return counters{t.client.Stats(), ReadCPU(t.pids), served(t.b)}
}

// startCounters returns the counters at the start of the measured span:
// those read at the first measured arrival, or, if dispatch never reached
// it, now. Call it after wait.
func (t *traffic) startCounters() counters {
	if t.dispatched > t.p.first {
		return <-t.counters0
	}
	return t.readCounters()
}

// measured returns the latencies of the measured requests sent, in
// arrival order.
func (t *traffic) measured() []int64 { return t.lat[t.p.first:max(t.dispatched, t.p.first)] }

// measuredLags returns the dispatch lags of the measured requests sent,
// in arrival order.
func (t *traffic) measuredLags() []int64 { return t.lag[t.p.first:max(t.dispatched, t.p.first)] }

// fillLatencies sets r's latency measures from measured (ns, any order,
// not modified) and keeps a sorted copy in r.lat.
func fillLatencies(r *RunResult, measured []int64) {
	sorted := slices.Clone(measured)
	slices.Sort(sorted)
	r.lat = sorted
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	if len(sorted) > 0 {
		r.MeanUs = sum / float64(len(sorted)) / 1e3
	}
	r.P50Us = usI(Quantile(sorted, 0.50))
	r.P90Us = usI(Quantile(sorted, 0.90))
	r.P99Us = usI(Quantile(sorted, 0.99))
	r.P999Us = usI(Quantile(sorted, 0.999))
	if len(sorted) > 0 {
		r.MaxUs = usI(sorted[len(sorted)-1])
	}
}

// fillLags sets r's dispatch lag measures from lags (ns, any order, not
// modified).
func fillLags(r *RunResult, lags []int64) {
	sorted := slices.Clone(lags)
	slices.Sort(sorted)
	r.LagP50Us = usI(Quantile(sorted, 0.5))
	r.LagP99Us = usI(Quantile(sorted, 0.99))
	if len(sorted) > 0 {
		r.LagMaxUs = usI(sorted[len(sorted)-1])
	}
}

// serverExtraPct is the requests the servers received per measured
// request, minus one, in percent, from their counts before and after; -1
// if a count is missing or there were no requests.
func serverExtraPct(requests int, before, after []int64) float64 {
	if before == nil || after == nil || requests <= 0 {
		return -1
	}
	var d int64
	for i := range after {
		if after[i] < 0 || before[i] < 0 {
			return -1
		}
		d += after[i] - before[i]
	}
	return 100 * (float64(d)/float64(requests) - 1)
}

// flagNoise marks r noisy if it was aborted or went past the scenario's
// limits on other processes' CPU (use) or on dispatch lag, saying why.
func flagNoise(r *RunResult, s Scenario, use CPUUse) {
	var why []string
	if r.Aborted != "" {
		why = append(why, "aborted: "+r.Aborted)
	}
	if use.OK && use.Others > s.MaxOtherCPU {
		why = append(why, fmt.Sprintf("other processes used %.2f cores (limit %.2f)", use.Others, s.MaxOtherCPU))
	}
	if r.LagP99Us > us(s.MaxLag) {
		why = append(why, fmt.Sprintf("dispatch lag p99 %s (limit %s)", fmtUs(r.LagP99Us), fmtUs(us(s.MaxLag))))
	}
	if len(why) > 0 {
		r.Noisy = true
		r.Noise = joinComma(why)
	}
}

// pidsOf returns b's child processes, if it has any.
func pidsOf(b Backend) []int {
	if po, ok := b.(ProcessOwner); ok {
		return po.Pids()
	}
	return nil
}

// served returns b's per-replica request counts, or nil if it does not
// count them.
func served(b Backend) []int64 {
	if sc, ok := b.(ServedCounter); ok {
		return sc.Served()
	}
	return nil
}
