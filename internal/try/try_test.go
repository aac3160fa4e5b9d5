package try

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/drill"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replica is a loopback HTTP server for the tests: it answers at once,
// except every stallEvery-th request it receives, which it holds for
// stall, and it may burn CPU on every request.
type replica struct {
	srv        *httptest.Server
	stallEvery int64
	stall      time.Duration
	cpu        time.Duration
	n          atomic.Int64
	mu         sync.Mutex
	headers    []http.Header
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	n := r.n.Add(1)
	r.mu.Lock()
	if len(r.headers) < 10 {
		r.headers = append(r.headers, req.Header.Clone())
	}
	r.mu.Unlock()
	if r.cpu > 0 {
		burn(r.cpu)
	}
	if r.stallEvery > 0 && n%r.stallEvery == 0 {
		t := time.NewTimer(r.stall)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
		}
	}
	w.Write([]byte("ok\n"))
}

// burn spends about d of CPU, yielding the processor between slices of
// a few microseconds, as a server's goroutines on a loaded runtime are
// preempted: the test's load generator, in the same process, is then
// never held up for whole requests' work behind the replicas'.
func burn(d time.Duration) {
	start := time.Now()
	h := sha256.New()
	buf := make([]byte, 4096)
	for time.Since(start) < d {
		h.Write(buf)
		runtime.Gosched()
	}
}

// startReplicas starts n replicas, stopped when the test ends.
func startReplicas(t *testing.T, n int, set func(i int, r *replica)) ([]*replica, []string) {
	t.Helper()
	var reps []*replica
	var urls []string
	for i := range n {
		r := &replica{}
		if set != nil {
			set(i, r)
		}
		r.srv = httptest.NewServer(r)
		t.Cleanup(r.srv.Close)
		reps = append(reps, r)
		urls = append(urls, r.srv.URL)
	}
	return reps, urls
}

func gets(paths ...string) []Target {
	var out []Target
	for _, p := range paths {
		out = append(out, Target{Method: http.MethodGet, Path: p})
	}
	return out
}

func arms(t *testing.T, list string) []Arm {
	t.Helper()
	a, err := ParseArms(list)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// loadOptions is a run of about 4.5 s at 200 requests/s: 2 s of ramp and
// warm-up, so that the default delay has its 100 latencies an arm, then
// 2.5 s measured.
func loadOptions(urls []string, a []Arm) Options {
	return Options{
		Replicas: urls, Targets: gets("/a", "/b", "/c"), Arms: a,
		Rate: 200, Ramp: 500 * time.Millisecond, Warmup: 1500 * time.Millisecond, Duration: 2500 * time.Millisecond,
		Timeout: 5 * time.Second, Seed: 1, Resamples: 1000,
	}
}

func armByName(t *testing.T, res *Result, name string) *ArmResult {
	t.Helper()
	for _, a := range res.Arms {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no arm %s", name)
	return nil
}

// carried runs run (a whole try run, with whatever it starts and stops
// around it) up to three times, until the machine carried the load: the
// load generator kept to its schedule (Result.Overloaded is false) and
// the replicas that do not stall answered well inside a stall (their
// copies' p99 under limit), and every hedging arm began the measured
// span with a delay under limit and sent at least as many hedges as its
// payoff rule refused. If no attempt did, it skips the test: a verdict
// measured on a machine that could not drive the load, or whose healthy
// replicas were as slow as the stalled one, judges the machine, not
// hedging. So does one whose warm-up was: a live percentile delay is
// learned from the last thousand latencies, so a start slow enough to put
// a twentieth of them above limit leaves a delay that no stall outlasts
// by the head wait (three delays) for the whole of a short run; and a
// warm-up whose copies lost leaves the payoff rule refusing stall hedges
// until its first probe, 5,000 requests on.
func carried(t *testing.T, healthy []int, limit time.Duration, run func() *Result) *Result {
	t.Helper()
	return rerun(t, run, func(res *Result) string {
		why := overloaded(res)
		for _, j := range healthy {
			if p := res.Replica[j].P99; p >= limit {
				why = fmt.Sprintf("replica %d, which does not stall, answered copies in %v at p99 (limit %v)", j, p, limit)
			}
		}
		for _, a := range res.Arms {
			if a.hedges && (a.DelayAtStart <= 0 || a.DelayAtStart >= limit) {
				why = fmt.Sprintf("arm %s began the measured span with a delay of %s (limit %v): its warm-up was as slow as a stall", a.Name, fmtDelay(a.DelayAtStart), limit)
			}
			if n := a.NotSent["payoff"]; n > int64(a.Hedges) {
				why = fmt.Sprintf("arm %s's payoff rule refused %d hedges and let %d go: it learnt from copies that lost, which these replicas, one stalling and the others answering well inside a stall, make only when the machine starves them (docs/default.md, \"After a burst\")", a.Name, n, a.Hedges)
			}
		}
		return why
	})
}

// unloaded runs run up to three times, until its load generator kept to
// its schedule, and skips the test if it never did: the runs without
// stalls, where the verdicts must not read the machine's lag as
// hedging's harm.
func unloaded(t *testing.T, run func() *Result) *Result {
	t.Helper()
	return rerun(t, run, overloaded)
}

func overloaded(res *Result) string {
	if res.Overloaded() {
		return fmt.Sprintf("the load generator started 1%% of the requests %v late or more", res.LagP99)
	}
	return ""
}

// rerun runs run up to three times, until notCarried finds nothing to
// say against the run, and skips the test with what it said if it never
// did.
func rerun(t *testing.T, run func() *Result, notCarried func(*Result) string) *Result {
	t.Helper()
	var why string
	for attempt := 1; attempt <= 3; attempt++ {
		res := run()
		if why = notCarried(res); why == "" {
			return res
		}
		logSummary(t, res)
		t.Logf("attempt %d: the machine did not carry the load: %s", attempt, why)
	}
	t.Skipf("the machine could not carry the load in three attempts (%s): the verdicts would judge it, not hedging", why)
	return nil
}

// A run is overloaded when its load generator's lag p99 is above a
// millisecond and above a tenth of the baseline's p99.
func TestOverloaded(t *testing.T) {
	for _, c := range []struct {
		lag, p99 time.Duration
		want     bool
	}{
		{500 * time.Microsecond, 2 * time.Millisecond, false}, // under the floor
		{4 * time.Millisecond, 50 * time.Millisecond, false},  // under a tenth
		{6 * time.Millisecond, 50 * time.Millisecond, true},
		{2 * time.Millisecond, 3 * time.Millisecond, true},
	} {
		r := &Result{Baseline: "none", LagP99: c.lag, Arms: []*ArmResult{
			{Name: "default", P99: Estimate{Value: time.Second}},
			{Name: "none", P99: Estimate{Value: c.p99}},
		}}
		if got := r.Overloaded(); got != c.want {
			t.Errorf("lag p99 %v, baseline p99 %v: overloaded %v, want %v", c.lag, c.p99, got, c.want)
		}
	}
}

// onSchedule calls stall every period, on a goroutine of its own, until
// stall returns false or the returned function is called (which waits
// for the goroutine to end): the stall schedules of the tests' replicas.
func onSchedule(period time.Duration, stall func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if !stall() {
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func logSummary(t *testing.T, res *Result) {
	t.Helper()
	var b strings.Builder
	res.WriteSummary(&b)
	t.Log("\n" + b.String())
}

// One replica of three holds every 8th of its requests for 80 ms: a p99
// the unhedged arm cannot escape, and that a hedge after a few
// milliseconds cuts by an order of magnitude. The fixed delay hedges from
// the first request, so its verdict must be TAIL CUT on any machine; the
// default learns its delay and the worth of its hedges first, and in a
// few seconds on a loaded machine may not have shown enough to tell, but
// must never be judged harmful.
func TestStallsOnOneReplicaTailCut(t *testing.T) {
	_, urls := startReplicas(t, 3, func(i int, r *replica) {
		if i == 2 {
			r.stallEvery, r.stall = 8, 80*time.Millisecond
		}
	})
	o := loadOptions(urls, arms(t, "none,fixed:10ms,default"))
	o.Rate, o.MaxRate, o.AllowHighRate, o.Duration = 400, 400, true, 8*time.Second // about 1,000 requests an arm: a p99 of ten, whose interval is sure of the cut
	res := carried(t, []int{0, 1}, 20*time.Millisecond, func() *Result {
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	})
	logSummary(t, res)
	none, fixed, def := armByName(t, res, "none"), armByName(t, res, "fixed:10ms"), armByName(t, res, "default")
	if none.Verdict != drill.Baseline {
		t.Errorf("none: verdict %s, want %s", none.Verdict, drill.Baseline)
	}
	if fixed.Verdict != drill.TailCut || fixed.P99.RatioHi >= 1 {
		t.Errorf("fixed: verdict %s (%s), p99 ratio interval %.2f-%.2f; want %s, below 1", fixed.Verdict, fixed.Why, fixed.P99.RatioLo, fixed.P99.RatioHi, drill.TailCut)
	}
	if fixed.Hedges == 0 || fixed.HedgeWins == 0 {
		t.Errorf("fixed: %d hedges, %d wins; want some of each", fixed.Hedges, fixed.HedgeWins)
	}
	// A stalled primary at the head of the fixed arm's requests on its
	// replica comes due at 10 ms and is held until 30 ms (the head
	// wait): the report counts those holds, with the arm's delay.
	if fixed.NotSent["head"] == 0 || fixed.DelayAtStart != 10*time.Millisecond || fixed.DelayAtEnd != 10*time.Millisecond {
		t.Errorf("fixed: hedges not sent %v, delay %v then %v; want holds for the head wait, and 10ms throughout", fixed.NotSent, fixed.DelayAtStart, fixed.DelayAtEnd)
	}
	if def.Verdict != drill.TailCut && def.Verdict != NotSignificant && def.Verdict != FewHedges {
		t.Errorf("default: verdict %s (%s), want %s, %s or %s; hedges not sent: %v", def.Verdict, def.Why, drill.TailCut, NotSignificant, FewHedges, def.NotSent)
	}
	if none.Hedges != 0 {
		t.Errorf("none: %d hedges, want none", none.Hedges)
	}
	if res.Replica[2].P99 < 50*time.Millisecond {
		t.Errorf("the stalling replica's copy p99 is %v, want its stalls to show", res.Replica[2].P99)
	}
}

func TestNoStallsNoTailCut(t *testing.T) {
	_, urls := startReplicas(t, 3, nil)
	res := unloaded(t, func() *Result {
		res, err := Run(context.Background(), loadOptions(urls, arms(t, "none,default")))
		if err != nil {
			t.Fatal(err)
		}
		return res
	})
	logSummary(t, res)
	def := armByName(t, res, "default")
	if def.Verdict != drill.NoTailGain && def.Verdict != NotSignificant && def.Verdict != FewHedges {
		t.Errorf("default: verdict %s (%s), want %s, %s or %s", def.Verdict, def.Why, drill.NoTailGain, NotSignificant, FewHedges)
	}
}

// Every request costs 3 ms of CPU, so a copy takes as long as its
// primary: hedges only add load. Plain hedging at 1 ms, without a
// budget or rules, hedges every request: EXCESS LOAD, on any machine,
// loaded or not. The default, its delay learnt in the warm-up, hedges
// within its budget, its rules keep most of its hedges back, and it cuts
// nothing: that holds only where copies take
// as long as primaries, so a run in which the machine made the latency
// (a replica's copies waited for a core longer than they worked, at the
// median, or the load generator fell behind) is run again, and the test
// skipped if no run was carried: on a starved machine a copy escapes the
// wait for a core, and the default may cut that tail for real.
func TestBigRequestsNoGain(t *testing.T) {
	const cpu = 3 * time.Millisecond
	_, urls := startReplicas(t, 3, func(_ int, r *replica) { r.cpu = cpu })
	a := arms(t, "none,default")
	a = append(a, Arm{Name: "plain-1ms", Doc: "fixed 1 ms, no budget, no rules", Config: constantConfig(hedge.Config{
		Delay: hedge.Fixed(time.Millisecond), NoBudget: true, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1,
	})})
	o := loadOptions(urls, a)
	o.Rate = 100
	o.Warmup = 4 * time.Second   // 130 latencies an arm: the default's delay is learnt before measuring
	o.Duration = 7 * time.Second // 230 requests an arm: enough for a verdict on the p99
	res := rerun(t, func() *Result {
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		// What holds on any machine.
		if p := armByName(t, res, "plain-1ms"); p.Verdict != drill.ExcessLoad || len(p.NotSent) != 0 {
			t.Errorf("plain-1ms: verdict %s (%s), hedges not sent %v; want %s, and none kept back: it has no rule that would", p.Verdict, p.Why, p.NotSent, drill.ExcessLoad)
		}
		if d := armByName(t, res, "default"); d.ExtraLoad > res.LoadLimit {
			t.Errorf("default: extra load %.2f, above the limit %.2f its budget keeps it under", d.ExtraLoad, res.LoadLimit)
		}
		return res
	}, func(res *Result) string {
		why := overloaded(res)
		for j, rr := range res.Replica {
			if rr.P50 > 2*cpu {
				why = fmt.Sprintf("replica %d answered copies in %v at p50, more than twice the %v of work each: the machine, not the request, made the latency", j, rr.P50, cpu)
			}
		}
		return why
	})
	logSummary(t, res)
	def := armByName(t, res, "default")
	if def.DelayAtStart <= 0 {
		t.Errorf("default: no delay learnt in the warm-up; the test measures nothing of it")
	}
	if def.Verdict == drill.TailCut || def.Verdict == drill.ExcessLoad {
		t.Errorf("default: verdict %s (%s), want no tail cut and no excess load; hedges not sent: %v", def.Verdict, def.Why, def.NotSent)
	}
	// It stops by itself: a primary at the head of its replica is slow
	// itself, and its copy waits three delays (the head wait), which a
	// request of 3 ms rarely outlasts; copies that went lose, and the
	// payoff rule stops them.
	held := int64(0)
	for _, n := range def.NotSent {
		held += n
	}
	if int64(def.Hedges) > held {
		t.Errorf("default: %d hedges sent, %d kept back by its rules (%v): want its rules to keep back at least as many as it sends", def.Hedges, held, def.NotSent)
	}
}

func TestWritesRefused(t *testing.T) {
	_, urls := startReplicas(t, 2, nil)
	post := []Target{{Method: http.MethodPost, Path: "/x"}}
	for _, o := range []Options{
		{Replicas: urls, Targets: post, Arms: arms(t, "none,default")},
		{Replicas: urls, Targets: post, Arms: arms(t, "none,default"), AllowWrites: true},
		{Replicas: urls, Targets: post, Arms: arms(t, "none,default"), IdempotencyHeader: "Idempotency-Key"},
	} {
		_, err := Run(context.Background(), o)
		if !errors.Is(err, ErrWritesRefused) && !errors.Is(err, ErrInvalid) {
			t.Errorf("AllowWrites %v, IdempotencyHeader %q: error %v, want ErrWritesRefused", o.AllowWrites, o.IdempotencyHeader, err)
		}
	}
	_, err := Run(context.Background(), Options{Replicas: urls, Targets: post, Arms: arms(t, "none,default")})
	if !errors.Is(err, ErrWritesRefused) {
		t.Errorf("error %v, want ErrWritesRefused", err)
	}
}

// A redirect to a host that is not a replica is not followed: the request
// fails with ErrRedirectRefused, and the other host sees nothing.
func TestRedirectToAnotherHostRefused(t *testing.T) {
	var foreign atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { foreign.Add(1) }))
	defer other.Close()
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
	})
	a, b := httptest.NewServer(redirect), httptest.NewServer(redirect)
	defer a.Close()
	defer b.Close()
	o := Options{Replicas: []string{a.URL, b.URL}, Targets: gets("/r"), Arms: arms(t, "none,default"), Rate: 50, Duration: 200 * time.Millisecond, Seed: 2}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ar := range res.Arms {
		n += ar.ErrorKinds[kindRedirect]
	}
	if n == 0 || foreign.Load() != 0 {
		t.Errorf("%d redirects refused, the other host got %d requests; want some refused and none sent", n, foreign.Load())
	}
	// A target naming another host is refused before anything is sent.
	_, err = ParseHTTPTargets(strings.NewReader("GET "+other.URL+"/x\n"), "", []string{a.URL, b.URL})
	if !errors.Is(err, ErrForeignHost) {
		t.Errorf("target on another host: error %v, want ErrForeignHost", err)
	}
}

// Credentials reach the replicas but no output file. By default the
// outputs name the headers and hold none of their values; asked for the
// values, they hold them but those of credentials, by the header's name
// (Authorization), by the caller's word (SecretHeaders) or by the value's
// shape (a JWT under a name that says nothing of it).
func TestCredentialsNeverWritten(t *testing.T) {
	const secret = "s3cr3t-token-value"
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cnkifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
	reps, urls := startReplicas(t, 2, nil)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+secret)
	h.Set("X-From-Env", secret)
	h.Set("X-Jwt-Assertion", jwt)
	h.Set("X-Plain", "visible")
	o := Options{Replicas: urls, Targets: gets("/p"), Arms: arms(t, "none,default"), Header: h, SecretHeaders: []string{"X-From-Env"},
		Rate: 100, Duration: 300 * time.Millisecond, Seed: 3}
	for _, show := range []bool{false, true} {
		o.ShowHeaderValues = show
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		files := outputs(t, res)
		for name, s := range files {
			if strings.Contains(s, secret) || strings.Contains(s, jwt[:20]) {
				t.Errorf("values shown %v: %s holds a credential", show, name)
			}
		}
		report := files["report.md"]
		want := []string{"`Authorization`", "`X-From-Env`", "`X-Jwt-Assertion`", "`X-Plain`"}
		if show {
			want = []string{"`Authorization: <redacted>`", "`X-From-Env: <redacted>`", "`X-Jwt-Assertion: <redacted>`", "`X-Plain: visible`"}
		} else if strings.Contains(report, "visible") {
			t.Errorf("values not asked for, report.md holds one:\n%s", report)
		}
		for _, w := range want {
			if !strings.Contains(report, w) {
				t.Errorf("values shown %v: report.md lacks %s:\n%s", show, w, report)
			}
		}
	}
	got := ""
	for _, r := range reps {
		r.mu.Lock()
		if len(r.headers) > 0 {
			got = r.headers[0].Get("Authorization")
		}
		r.mu.Unlock()
	}
	if got != "Bearer "+secret {
		t.Errorf("the replicas got Authorization %q, want the credential", got)
	}
}

// outputs returns the summary and every file WriteFiles writes, by name.
func outputs(t *testing.T, res *Result) map[string]string {
	t.Helper()
	paths, err := res.WriteFiles(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	res.WriteSummary(&sum)
	files := map[string]string{"summary": sum.String()}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

func TestInterruptKeepsResults(t *testing.T) {
	_, urls := startReplicas(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Replicas: urls, Targets: gets("/i"), Arms: arms(t, "none,default"), Rate: 100, Duration: time.Minute, Seed: 4}
	var prog strings.Builder
	var pmu sync.Mutex
	o.Progress = writerFunc(func(p []byte) (int, error) {
		pmu.Lock()
		defer pmu.Unlock()
		prog.Write(p)
		if strings.Count(prog.String(), "\n") == 2 {
			cancel()
		}
		return len(p), nil
	})
	o.ProgressEvery = 100 * time.Millisecond
	res, err := Run(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if res == nil || !res.Interrupted || res.Arms[0].Requests == 0 {
		t.Fatalf("result %+v: want the requests measured before the interruption", res)
	}
	pmu.Lock()
	defer pmu.Unlock()
	if !strings.Contains(prog.String(), "p99 (last 5s): none") {
		t.Errorf("progress %q lacks the per-arm p99", prog.String())
	}
	// Each line is named as the command's other lines are, once.
	for line := range strings.Lines(prog.String()) {
		if !strings.HasPrefix(line, "hedge try: ") || strings.Count(line, "try:") != 1 {
			t.Errorf("progress line %q: want it to begin with \"hedge try: \" alone", line)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A service that answers 429 makes the load back off, never pushes on.
func TestPushbackBacksOff(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	a, b := httptest.NewServer(h), httptest.NewServer(h)
	defer a.Close()
	defer b.Close()
	o := Options{Replicas: []string{a.URL, b.URL}, Targets: gets("/"), Arms: arms(t, "none,default"), Rate: 100, Duration: 2 * time.Second, Seed: 5}
	res, err := Run(context.Background(), o)
	if err != nil && !errors.Is(err, ErrServiceFailing) {
		t.Fatal(err)
	}
	if len(res.Backoff) == 0 || res.Pushback == 0 {
		t.Fatalf("no back-off recorded (%d pushbacks)", res.Pushback)
	}
	if res.Sent > 100 {
		t.Errorf("%d requests sent in 2 s at 100/s under constant pushback; want the rate halved each second", res.Sent)
	}
}

func TestOptionsValidate(t *testing.T) {
	two := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	ok := Options{Replicas: two, Targets: gets("/"), Arms: arms(t, "none,default")}.Defaults()
	for _, tc := range []struct {
		name string
		edit func(o *Options)
		want error
	}{
		{"one replica", func(o *Options) { o.Replicas = two[:1] }, ErrInvalid},
		{"duplicate replica", func(o *Options) { o.Replicas = []string{two[0], two[0] + "/"} }, ErrInvalid},
		{"replica with a path", func(o *Options) { o.Replicas = []string{two[0] + "/x", two[1]} }, ErrInvalid},
		{"replica with credentials", func(o *Options) { o.Replicas = []string{"http://u:p@127.0.0.1:3", two[1]} }, ErrInvalid},
		{"rate above ceiling", func(o *Options) { o.Rate = 300 }, ErrRateCeiling},
		{"ceiling raised without consent", func(o *Options) { o.MaxRate = 1000; o.Rate = 500 }, ErrRateCeiling},
		{"other idempotency header", func(o *Options) { o.IdempotencyHeader = "X-Req" }, ErrInvalid},
		{"no targets", func(o *Options) { o.Targets = nil }, ErrInvalid},
	} {
		o := ok
		tc.edit(&o)
		if err := o.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	o := ok
	o.MaxRate, o.Rate, o.AllowHighRate = 1000, 500, true
	if err := o.Validate(); err != nil {
		t.Errorf("high rate with consent: %v", err)
	}
}

func TestParseTargets(t *testing.T) {
	reps := []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}
	in := "# comment\nGET /a?x=1\nX-Trace: 1\n\nHEAD http://10.0.0.2:8080/b\n\n"
	ts, err := ParseHTTPTargets(strings.NewReader(in), "", reps)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Path != "/a?x=1" || ts[0].Header.Get("X-Trace") != "1" || ts[1].Method != "HEAD" || ts[1].Path != "/b" {
		t.Errorf("targets %+v", ts)
	}
	js := `{"method":"GET","url":"/j","header":{"Accept":["text/plain"]}}` + "\n" + `{"method":"GET","url":"http://10.0.0.1:8080/k"}`
	ts, err = ParseJSONTargets(strings.NewReader(js), reps)
	if err != nil || len(ts) != 2 || ts[0].Header.Get("Accept") != "text/plain" || ts[1].Path != "/k" {
		t.Errorf("json targets %+v, %v", ts, err)
	}
	if _, err := ParseJSONTargets(strings.NewReader(`{"url":"http://evil.example/x"}`), reps); !errors.Is(err, ErrForeignHost) {
		t.Errorf("foreign host: %v", err)
	}
	ts, err = TemplateTargets("GET", "/items/{key}?v={key}", []string{"a b", "c/d"})
	if err != nil || ts[0].Path != "/items/a%20b?v=a%20b" || ts[1].Path != "/items/c%2Fd?v=c%2Fd" {
		t.Errorf("template targets %+v, %v", ts, err)
	}
	for _, bad := range []string{"get /x\n", "GET\n", "GET /x\nnot a header\n"} {
		if _, err := ParseHTTPTargets(strings.NewReader(bad), "", reps); !errors.Is(err, ErrTargets) {
			t.Errorf("%q: %v, want ErrTargets", bad, err)
		}
	}
}

func TestParseArms(t *testing.T) {
	a, err := ParseArms("none, default, fixed:20ms, p99, hedge-live-budget5, plain-p95, plain-p99.5")
	if err != nil || len(a) != 7 {
		t.Fatalf("%v, %v", a, err)
	}
	// plain-p95 is the live p95 and the default budget, the default's
	// other rules off.
	cfg, err := a[5].Config()
	if err != nil || cfg.Delay != (hedge.Percentile{P: 95}) || cfg.MaxReplicaLoad != hedge.AnyReplicaLoad || cfg.PayoffWinRate >= 0 || cfg.NoBudget || cfg.Budget != nil || !a[5].hedges() {
		t.Errorf("plain-p95: %+v, %v", cfg, err)
	}
	for _, bad := range []string{"none", "none,none", "none,fixed:0", "none,p20", "none,bogus", "none,hedge-fixed", "none,default-fan", "none,plain-p20", "none,plain-p", "none,plain-px", "none,plain-p1e2"} {
		if _, err := ParseArms(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestNotSentText(t *testing.T) {
	got := notSentSince(map[string]int64{"head": 9, "payoff": 40, "busy": 3, "budget": 2}, map[string]int64{"head": 1, "busy": 3, "budget": 1})
	if want := map[string]int64{"head": 8, "payoff": 40, "budget": 1}; !maps.Equal(got, want) {
		t.Fatalf("notSentSince = %v, want %v", got, want)
	}
	if s, want := notSentText(got), "not paying 40, held for the head wait 8, budget spent 1"; s != want {
		t.Errorf("notSentText = %q, want %q", s, want)
	}
	if notSentSince(map[string]int64{"head": 1}, map[string]int64{"head": 1}) != nil {
		t.Error("no change: want nil")
	}
}

// A p99 worse, better, or no better is put down to hedging (EXCESS LOAD,
// TAIL CUT, NO TAIL GAIN) only when hedges went with at least as many
// requests as lie above the p99; fewer cannot have moved it, and the
// verdict is TOO FEW HEDGES.
func TestVerdictThinTail(t *testing.T) {
	res := &Result{LoadLimit: 0.25, MinCut: 0.1}
	base := &ArmResult{Name: "none", lat: make([]int64, 250), P99: Estimate{Value: 3 * time.Millisecond}}
	for _, c := range []struct {
		hedged int
		ratio  [3]float64
		want   drill.Outcome
	}{
		{1, [3]float64{1.5, 1.4, 1.7}, FewHedges},
		{2, [3]float64{1.5, 1.4, 1.7}, FewHedges},
		{3, [3]float64{1.5, 1.4, 1.7}, drill.ExcessLoad},
		{10, [3]float64{1.5, 1.4, 1.7}, drill.ExcessLoad},
		{0, [3]float64{0.57, 0.42, 0.63}, FewHedges},
		{2, [3]float64{0.57, 0.42, 0.63}, FewHedges},
		{3, [3]float64{0.57, 0.42, 0.63}, drill.TailCut},
		{0, [3]float64{1.0, 0.95, 1.05}, FewHedges}, // a cut ruled out, but no hedge to have made it
		{3, [3]float64{1.0, 0.95, 1.05}, drill.NoTailGain},
	} {
		ar := &ArmResult{Name: "default", lat: make([]int64, 250), Hedged: c.hedged, Hedges: c.hedged, ExtraLoad: float64(c.hedged) / 250,
			P99: Estimate{Value: 5 * time.Millisecond, Ratio: c.ratio[0], RatioLo: c.ratio[1], RatioHi: c.ratio[2]}}
		if got, why := verdict(res, ar, false, base); got != c.want {
			t.Errorf("%d requests hedged of 250, p99 ratio %.2f (%.2f-%.2f): %s (%s), want %s", c.hedged, c.ratio[0], c.ratio[1], c.ratio[2], got, why, c.want)
		}
	}
}
