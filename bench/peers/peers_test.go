package peers

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// The setups below are shared by the benchmarks and by TestPeersAgree, so
// that the test checks exactly what the benchmarks run.

const (
	// noHedgeDelay is long enough that no hedge fires during a run, but
	// both libraries still arm a timer for it on every call.
	noHedgeDelay = time.Hour
	// oneHedgeDelay is the delay after which the hedge fires in
	// BenchmarkOneHedge, the same for both libraries.
	oneHedgeDelay = 50 * time.Microsecond

	op = "bench" // hedge operation class

	primaryVal = 0 // what a primary copy returns
	hedgeVal   = 1 // what a hedge copy returns
)

// ---- no hedge fires ----

// newNoHedgeHedger uses Fixed rather than the default Percentile{}: the
// default would not arm a timer at all during warm-up, which is cheaper than
// anything failsafe-go does. With Fixed(time.Hour) every call arms (and
// stops) a timer, as failsafe-go's does. The default budget stays on: its
// bookkeeping is part of our fast path.
func newNoHedgeHedger() *hedge.Hedger {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(noHedgeDelay)})
	if err != nil {
		panic(err)
	}
	return h
}

func newNoHedgeExecutor() failsafe.Executor[int] {
	return failsafe.With[int](hedgepolicy.NewWithDelay[int](noHedgeDelay))
}

// fastAttempt is the trivial attempt function of BenchmarkNoHedge.
func fastAttempt(context.Context, hedge.Attempt) (int, error) { return primaryVal, nil }

// fastGet is the same for failsafe-go's Get, which passes nothing.
func fastGet() (int, error) { return primaryVal, nil }

// fastGetExec is the same for failsafe-go's GetWithExecution, the form a
// caller needs when the function must see its attempt's context (it gets
// one from exec.Context()); our Do always passes one.
func fastGetExec(failsafe.Execution[int]) (int, error) { return primaryVal, nil }

// noHedgeCase is one way of making a call in BenchmarkNoHedge. newCall
// builds the call once, outside the timed loop, for the given parent
// context.
type noHedgeCase struct {
	name    string
	newCall func(ctx context.Context) func() (int, error)
}

var noHedgeCases = []noHedgeCase{
	{"hedge", func(ctx context.Context) func() (int, error) {
		h := newNoHedgeHedger()
		return func() (int, error) { return hedge.Do(ctx, h, op, fastAttempt) }
	}},
	// A caller with a per-request context must bind it per call with
	// WithContext (one small allocation), so that is what is measured;
	// with context.Background() the executor needs no binding at all.
	{"failsafe", func(ctx context.Context) func() (int, error) {
		ex := newNoHedgeExecutor()
		if ctx == context.Background() {
			return func() (int, error) { return ex.Get(fastGet) }
		}
		return func() (int, error) { return ex.WithContext(ctx).Get(fastGet) }
	}},
	{"failsafe-exec", func(ctx context.Context) func() (int, error) {
		ex := newNoHedgeExecutor()
		if ctx == context.Background() {
			return func() (int, error) { return ex.GetWithExecution(fastGetExec) }
		}
		return func() (int, error) { return ex.WithContext(ctx).GetWithExecution(fastGetExec) }
	}},
}

// parentCases are the caller's contexts: Background, and a cancellable
// parent as real callers have (children of a cancellable context are
// registered with it, which costs more than children of Background).
var parentCases = []struct {
	name string
	ctx  func() (context.Context, context.CancelFunc)
}{
	{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	{"cancelable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
}

// BenchmarkNoHedge measures the fast path: the attempt returns at once, the
// 1-hour hedge timer is armed and stopped, nothing else runs.
func BenchmarkNoHedge(b *testing.B) {
	for _, pc := range parentCases {
		b.Run(pc.name, func(b *testing.B) {
			for _, c := range noHedgeCases {
				b.Run(c.name, func(b *testing.B) {
					ctx, cancel := pc.ctx()
					defer cancel()
					call := c.newCall(ctx)
					before := runtime.NumGoroutine()
					b.ReportAllocs()
					for b.Loop() {
						if _, err := call(); err != nil {
							b.Fatal(err)
						}
					}
					checkGoroutines(b, before)
				})
			}
		})
	}
}

// ---- one hedge fires ----

// newOneHedgeHedger turns the budget off: the default budget (10% of
// requests, burst 10) would refuse almost every hedge of a benchmark in
// which every call hedges, and failsafe-go has no budget by default.
func newOneHedgeHedger(delay time.Duration, bgReap bool) *hedge.Hedger {
	return newOneHedgeHedgerWith(hedge.Config{ReapInBackground: bgReap}, delay)
}

// newOneHedgeHedgerWith completes cfg with the benchmark's delay and no
// budget.
func newOneHedgeHedgerWith(cfg hedge.Config, delay time.Duration) *hedge.Hedger {
	cfg.Delay, cfg.NoBudget = hedge.Fixed(delay), true
	h, err := hedge.New(cfg)
	if err != nil {
		panic(err)
	}
	return h
}

func newOneHedgeExecutor(delay time.Duration) failsafe.Executor[int] {
	return failsafe.With[int](hedgepolicy.NewWithDelay[int](delay))
}

// slowPrimary is the attempt function of BenchmarkOneHedge: the primary
// blocks until its context is cancelled, the hedge returns at once.
func slowPrimary(ctx context.Context, a hedge.Attempt) (int, error) {
	if !a.Hedge {
		<-ctx.Done()
		return primaryVal, ctx.Err()
	}
	return hedgeVal, nil
}

// slowPrimaryExec is slowPrimary for failsafe-go. The primary waits on
// exec.Canceled(), which is its attempt context's Done channel.
func slowPrimaryExec(exec failsafe.Execution[int]) (int, error) {
	if !exec.IsHedge() {
		<-exec.Canceled()
		return primaryVal, exec.Context().Err()
	}
	return hedgeVal, nil
}

type oneHedgeCase struct {
	name    string
	newCall func(delay time.Duration) func() (int, error)
}

var oneHedgeCases = []oneHedgeCase{
	// Do returns after the cancelled primary has returned (the default).
	{"hedge", func(delay time.Duration) func() (int, error) {
		h := newOneHedgeHedger(delay, false)
		return func() (int, error) { return hedge.Do(context.Background(), h, op, slowPrimary) }
	}},
	// Do returns at once, as failsafe-go does; the primary is reaped on
	// its own goroutine.
	{"hedge-bgreap", func(delay time.Duration) func() (int, error) {
		h := newOneHedgeHedger(delay, true)
		return func() (int, error) { return hedge.Do(context.Background(), h, op, slowPrimary) }
	}},
	// PreciseTimers spins for the last stretch before the hedge timer
	// instead of sleeping on the runtime's timer, which fires about a
	// millisecond late here for sub-millisecond delays.
	{"hedge-precise", func(delay time.Duration) func() (int, error) {
		h := newOneHedgeHedgerWith(hedge.Config{PreciseTimers: true}, delay)
		return func() (int, error) { return hedge.Do(context.Background(), h, op, slowPrimary) }
	}},
	// failsafe-go returns at once and cancels the primary, which exits on
	// its own goroutine.
	{"failsafe", func(delay time.Duration) func() (int, error) {
		ex := newOneHedgeExecutor(delay)
		return func() (int, error) { return ex.GetWithExecution(slowPrimaryExec) }
	}},
}

// oneHedgeDelays are the delays BenchmarkOneHedge runs with. The Go
// runtime fires a sub-millisecond timer late when every goroutine is
// blocked (the scheduler then sleeps in the network poller, whose timeout
// has millisecond granularity on Linux), so with 50µs ns/op is mostly timer
// lateness, the same for both libraries. Delay 0 removes the wait and
// leaves the cost of the hedging machinery: the timer still goes through
// the runtime, the hedge still starts on a new goroutine and the primary is
// still cancelled.
var oneHedgeDelays = []struct {
	name  string
	delay time.Duration
}{
	{"delay=50us", oneHedgeDelay},
	{"delay=0", 0},
}

// timerOnly is not a library: it waits for the delay on a fresh timer and
// nothing else, the floor under every case of BenchmarkOneHedge. Subtract
// it to see what each library adds to the wait.
var timerOnly = oneHedgeCase{"timer-only", func(delay time.Duration) func() (int, error) {
	return func() (int, error) {
		<-time.NewTimer(delay).C
		return hedgeVal, nil
	}
}}

// BenchmarkOneHedge measures a call in which the hedge fires after the
// delay and wins, and the primary is cancelled.
func BenchmarkOneHedge(b *testing.B) {
	for _, d := range oneHedgeDelays {
		b.Run(d.name, func(b *testing.B) {
			for _, c := range append([]oneHedgeCase{timerOnly}, oneHedgeCases...) {
				b.Run(c.name, func(b *testing.B) {
					call := c.newCall(d.delay)
					before := runtime.NumGoroutine()
					b.ReportAllocs()
					for b.Loop() {
						if v, err := call(); err != nil || v != hedgeVal {
							b.Fatalf("got (%d, %v), want (%d, nil): the hedge did not win", v, err, hedgeVal)
						}
					}
					checkGoroutines(b, before)
				})
			}
		})
	}
}

// checkGoroutines fails tb if attempts outlive their calls: once they
// have settled, there must be at most a handful more goroutines than
// before. It waits for them as long as a leak could take to show, not as
// long as a loaded scheduler might take to run an exiting goroutine: the
// minute is a guard against waiting for ever, which a busy machine does
// not reach, and returns as soon as the count is down.
func checkGoroutines(tb testing.TB, before int) {
	tb.Helper()
	const slack = 5
	deadline := time.Now().Add(time.Minute)
	for {
		n := runtime.NumGoroutine()
		if n <= before+slack {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("goroutines grew from %d to %d: attempts outlive their calls", before, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// ---- HTTP, no hedge fires ----

// cannedTransport answers every request with a fresh 200 response and an
// empty body, in memory. The response is fresh because hedgedhttp replaces
// resp.Body with its own wrapper; a shared response would grow a chain of
// wrappers.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		Status:     "200 OK",
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Body:       http.NoBody,
		Request:    req,
	}, nil
}

// httpCase wraps the inner transport in the RoundTripper under test.
type httpCase struct {
	name string
	wrap func(inner http.RoundTripper) http.RoundTripper
}

// httpCases are the RoundTrippers compared.
var httpCases = []httpCase{
	{"plain", func(inner http.RoundTripper) http.RoundTripper { return inner }},
	{"hedgedhttp", func(inner http.RoundTripper) http.RoundTripper {
		rt, err := hedgedhttp.NewRoundTripper(noHedgeDelay, 2, inner)
		if err != nil {
			panic(err)
		}
		return rt
	}},
	// Ours: the same Hedger as BenchmarkNoHedge (1-hour delay, 2 copies,
	// default budget), over hedge.DoHeld.
	{"hedgehttp", func(inner http.RoundTripper) http.RoundTripper {
		rt, err := hedgehttp.New(inner, newNoHedgeHedger(), hedgehttp.Config{})
		if err != nil {
			panic(err)
		}
		return rt
	}},
}

func newRequest() *http.Request {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://peer.invalid/", nil)
	if err != nil {
		panic(err)
	}
	return req
}

// BenchmarkHTTPNoHedge measures a RoundTrip through each RoundTripper over
// cannedTransport, body closed as a real caller must (hedgedhttp cancels
// the winner's context on Close).
//
// Measure each case in a process of its own (-bench 'HTTPNoHedge/plain$',
// and so on): hedgedhttp leaves goroutines behind it (goroutines-left,
// the goroutines more at the end of a case than at its start), whose
// stacks the garbage collector then scans during whatever runs next in
// the process; after its case, hedgehttp measured about 1.4 times slower
// than alone.
func BenchmarkHTTPNoHedge(b *testing.B) {
	for _, c := range httpCases {
		b.Run(c.name, func(b *testing.B) {
			rt := c.wrap(cannedTransport{})
			req := newRequest()
			before := runtime.NumGoroutine()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if err := resp.Body.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(runtime.NumGoroutine()-before), "goroutines-left")
		})
	}
}
