package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The Gate's rules, on synctest's fake clock: synctest.Wait returns once
// every other goroutine of the bubble is blocked, so "the stall is on" and
// "the waiter is blocked" are facts when they are checked, and elapsed
// times are exact.
func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		ctx := context.Background()
		g.Wait(ctx) // open: returns at once
		if g.Stalled() {
			t.Fatal("a zero Gate is stalled")
		}

		// A stall blocks a waiter until it ends, and no longer.
		stallErr := make(chan error, 1)
		go func() { stallErr <- g.Stall(ctx, 30*time.Millisecond) }()
		synctest.Wait()
		if !g.Stalled() {
			t.Fatal("not stalled while Stall runs")
		}
		t0 := time.Now()
		g.Wait(ctx)
		if d := time.Since(t0); d != 30*time.Millisecond {
			t.Fatalf("a waiter during a 30ms stall waited %v", d)
		}
		if err := <-stallErr; err != nil {
			t.Fatal(err)
		}
		if g.Stalled() {
			t.Fatal("still stalled after Stall returned")
		}

		// A waiter's own context releases it from a stall that goes on.
		go func() { stallErr <- g.Stall(ctx, 30*time.Millisecond) }()
		synctest.Wait()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Millisecond)
		t0 = time.Now()
		g.Wait(wctx)
		wcancel()
		if d := time.Since(t0); d != 10*time.Millisecond || !g.Stalled() {
			t.Fatalf("a waiter whose context ends after 10ms waited %v (stalled: %v)", d, g.Stalled())
		}
		if err := <-stallErr; err != nil {
			t.Fatal(err)
		}

		// Ending the stall's context ends the stall at once, releasing
		// its waiters.
		cctx, cancel := context.WithCancel(ctx)
		go func() { stallErr <- g.Stall(cctx, time.Hour) }()
		synctest.Wait()
		released := make(chan struct{})
		go func() { g.Wait(ctx); close(released) }()
		synctest.Wait() // the waiter is blocked on the stall
		t0 = time.Now()
		cancel()
		if err := <-stallErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("stall ended by its context: %v, want context.Canceled", err)
		}
		<-released
		if d := time.Since(t0); d != 0 || g.Stalled() {
			t.Fatalf("the stall outlived its context by %v (stalled: %v)", d, g.Stalled())
		}

		// Close releases a stall in progress and refuses new ones.
		go func() { stallErr <- g.Stall(ctx, time.Hour) }()
		synctest.Wait()
		closed := make(chan struct{})
		go func() { g.Wait(ctx); close(closed) }()
		synctest.Wait()
		t0 = time.Now()
		g.Close()
		if err := <-stallErr; err != ErrGateClosed {
			t.Fatalf("stall ended by Close: %v, want ErrGateClosed", err)
		}
		<-closed
		if d := time.Since(t0); d != 0 || g.Stalled() {
			t.Fatalf("Close ended the stall after %v (stalled: %v)", d, g.Stalled())
		}
		if err := g.Stall(ctx, time.Millisecond); err != ErrGateClosed {
			t.Fatalf("stall after Close: %v, want ErrGateClosed", err)
		}
		g.Wait(ctx) // closed and not stalled: returns at once
	})
}

// A tiny comparison on HTTP replicas: both configurations see the same
// stalls, the servers answered every request, the hedged one sent hedges,
// the unhedged one none, and the report files are written and parse.
func TestRunHTTP(t *testing.T) {
	b, err := StartHTTP(HTTPOptions{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := Scenario{
		Rate: 400, Duration: 600 * time.Millisecond, Warmup: 150 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.1, Repeats: 2, Seed: 5,
		MaxReruns: -1, MaxTotalReruns: -1, Settle: 10 * time.Millisecond,
		// Behaviour, not latency: a request on a saturated machine may
		// take seconds, and must not fail for it.
		Timeout: time.Minute, MaxInFlight: 1 << 20,
	}
	var cs []Contender
	for _, n := range []string{"none-random", "hedge-fixed-nobudget"} {
		st, err := LookupStrategy(n)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, StrategyContender(st, StrategyOptions{FixedDelay: 2 * time.Millisecond}, false))
	}
	var progress bytes.Buffer
	res, err := Run(context.Background(), b, s, cs, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 || len(res.Configs) != 2 {
		t.Fatalf("%d runs, %d configs; progress:\n%s", len(res.Runs), len(res.Configs), progress.String())
	}
	stalls := map[int]int{}
	for _, r := range res.Runs {
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s repeat %d: %d requests, %d errors (%s)", r.Config, r.Repeat, r.Requests, r.Errors, r.FirstError)
		}
		if r.Stalls == 0 {
			t.Errorf("%s repeat %d: no stall happened", r.Config, r.Repeat)
		}
		if prev, ok := stalls[r.Repeat]; ok && prev != r.Stalls {
			t.Errorf("repeat %d: %d stalls in one configuration, %d in the other: the schedule must be shared", r.Repeat, prev, r.Stalls)
		}
		stalls[r.Repeat] = r.Stalls
		switch r.Config {
		case "none-random":
			// The servers' count over the measured span also takes in
			// warm-up requests that reach a server only after measuring
			// started, as many as the machine's scheduling delays: at
			// most all of the warm-up. So one copy per request bounds it
			// by the warm-up's share whatever the timing, and a second
			// copy per request would add 100%.
			p := makePlan(s.Defaults(), b.Replicas(), r.Repeat)
			most := 100 * float64(p.first) / float64(r.Requests)
			if r.ExtraPct != 0 || r.ServerExtraPct > most {
				t.Errorf("unhedged run sent extra copies: client %v%%, servers %v%% (at most %.1f%% from the warm-up)", r.ExtraPct, r.ServerExtraPct, most)
			}
		case "hedge-fixed-nobudget":
			if r.ExtraPct <= 0 {
				t.Errorf("hedged run sent no hedge (stalls %d)", r.Stalls)
			}
		}
		// Known, not necessarily positive: the warm-up may have opened
		// every connection the measured span needs (h2c_test counts
		// them).
		if r.Dials == Unknown {
			t.Errorf("%s: dials not counted (%d)", r.Config, r.Dials)
		}
	}
	if !strings.Contains(progress.String(), "hedge-fixed-nobudget") {
		t.Errorf("progress output: %q", progress.String())
	}
	t.Log("\n" + progress.String())

	dir := t.TempDir()
	rep := NewReport("test")
	rep.Backends = append(rep.Backends, res)
	if _, err := WriteReport(dir, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	data, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Backends) != 1 || len(back.Backends[0].Configs) != 2 || len(back.Backends[0].Configs[0].CCDF) == 0 {
		t.Fatalf("JSON round trip lost results: %+v", back)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if err != nil || !strings.Contains(string(md), "| hedge-fixed-nobudget |") {
		t.Fatalf("markdown: %v\n%s", err, md)
	}
	if fi, err := os.Stat(filepath.Join(dir, CCDFFile("http"))); err != nil || fi.Size() == 0 {
		t.Fatalf("CCDF plot: %v", err)
	}
}

func TestScenarioValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Scenario
		want string
	}{
		{Scenario{Rate: -1}, "rate"},
		{Scenario{StallShare: 0.7}, "stall share"},
		{Scenario{Repeats: -2}, "repeats"},
		{Scenario{Rate: 1e6, Duration: time.Hour}, "requests per run"},
	} {
		err := tc.s.Defaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
	if err := (Scenario{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestStrategies(t *testing.T) {
	for _, n := range StrategyNames() {
		s, _ := LookupStrategy(n)
		if _, err := s.Config(StrategyOptions{FixedDelay: time.Millisecond}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if s.Doc == "" {
			t.Errorf("%s has no doc", n)
		}
	}
	for _, n := range DefaultStrategies {
		if _, err := LookupStrategy(n); err != nil {
			t.Error(err)
		}
	}
	if _, err := LookupStrategy("hope"); err == nil || !strings.Contains(err.Error(), DefaultStrategy+",") {
		t.Errorf("unknown name: %v", err)
	}
}

// default is the zero hedge.Config: nothing of the library's default is
// written out here, so the bench follows the library with no edit.
func TestDefaultStrategyIsZeroConfig(t *testing.T) {
	s, err := LookupStrategy(DefaultStrategy)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config(StrategyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, hedge.Config{}) {
		t.Errorf("default's Config is %+v, want the zero hedge.Config", cfg)
	}
	// What the runner adds: the replicas and the timers' precision.
	var got hedge.Config
	b := configBackend{replicas: 3, got: &got}
	if _, err := StrategyContender(s, StrategyOptions{}, false).New(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, hedge.Config{Replicas: 3}) {
		t.Errorf("default's client got %+v, want only Replicas set", got)
	}
	if !slices.Contains(DefaultStrategies, DefaultStrategy) {
		t.Errorf("DefaultStrategies %v leave out %s", DefaultStrategies, DefaultStrategy)
	}
}

// No configuration writes out the default budget: a Budget is set only
// where it differs from the library's, and is fresh on every call.
func TestStrategyBudgets(t *testing.T) {
	def := hedge.DefaultBudget().String()
	for _, n := range StrategyNames() {
		s, _ := LookupStrategy(n)
		a, _ := s.Config(StrategyOptions{FixedDelay: time.Millisecond})
		b, _ := s.Config(StrategyOptions{FixedDelay: time.Millisecond})
		if a.Budget == nil {
			continue
		}
		if a.Budget.String() == def {
			t.Errorf("%s spells out the default budget %s: leave Budget nil", n, def)
		}
		if a.Budget == b.Budget {
			t.Errorf("%s returns the same Budget twice: a Budget is state", n)
		}
	}
}

// hedge-live, the former name of default, is an alias: it looks up the
// strategy named default, and is not listed among the names.
func TestStrategyAlias(t *testing.T) {
	s, err := LookupStrategy("hedge-live")
	if err != nil || s.Name != DefaultStrategy {
		t.Fatalf("hedge-live: %q, %v; want the strategy %q", s.Name, err, DefaultStrategy)
	}
	if got := StrategyAliases()["hedge-live"]; got != DefaultStrategy {
		t.Errorf("StrategyAliases()[hedge-live] = %q", got)
	}
	if slices.Contains(StrategyNames(), "hedge-live") {
		t.Error("an alias is listed among the names")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a strategy under an alias did not panic")
		}
	}()
	RegisterStrategy(Strategy{Name: "hedge-live", Config: constant(hedge.Config{})})
}

// configBackend records the hedge.Config a client is made with.
type configBackend struct {
	replicas int
	got      *hedge.Config
}

func (b configBackend) Name() string                                    { return "config" }
func (b configBackend) Replicas() int                                   { return b.replicas }
func (b configBackend) Stall(context.Context, int, time.Duration) error { return nil }
func (b configBackend) Close() error                                    { return nil }
func (b configBackend) NewClient(cfg hedge.Config) (Client, error) {
	*b.got = cfg
	return ClientFuncs{}, nil
}

func TestServerExtraPct(t *testing.T) {
	for _, tc := range []struct {
		requests      int
		before, after []int64
		want          float64
	}{
		{100, []int64{10, 20}, []int64{85, 95}, 50},
		{100, []int64{0, 0}, []int64{50, 50}, 0},
		{100, nil, []int64{50, 50}, -1},
		{100, []int64{0, 0}, nil, -1},
		{100, []int64{0, -1}, []int64{50, 50}, -1},
		{100, []int64{0, 0}, []int64{-1, 50}, -1},
		{0, []int64{0, 0}, []int64{0, 0}, -1},
	} {
		if got := serverExtraPct(tc.requests, tc.before, tc.after); got != tc.want {
			t.Errorf("serverExtraPct(%d, %v, %v) = %v, want %v", tc.requests, tc.before, tc.after, got, tc.want)
		}
	}
}

func TestFlagNoise(t *testing.T) {
	s := Scenario{MaxOtherCPU: 0.5, MaxLag: time.Millisecond}
	var quiet RunResult
	flagNoise(&quiet, s, CPUUse{OK: true, Others: 0.5})
	if quiet.Noisy || quiet.Noise != "" {
		t.Errorf("a run within its limits flagged noisy: %q", quiet.Noise)
	}
	loud := RunResult{Aborted: "too many", LagP99Us: 1001}
	flagNoise(&loud, s, CPUUse{OK: true, Others: 0.6})
	for _, want := range []string{"aborted: too many", "other processes used 0.60 cores", "dispatch lag p99"} {
		if !loud.Noisy || !strings.Contains(loud.Noise, want) {
			t.Errorf("noise %q (noisy %v), want it to say %q", loud.Noise, loud.Noisy, want)
		}
	}
	var unread RunResult
	flagNoise(&unread, s, CPUUse{Others: 9})
	if unread.Noisy {
		t.Error("a CPU reading that failed flagged the run noisy")
	}
}
