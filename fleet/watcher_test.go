package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = time.Millisecond

// writeFile replaces path's content at once, as an editor or kubelet
// does: a reader sees the old file or the new one, never half of one.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// pod is one Watcher over a file, with its Hedgers and what it told.
type pod struct {
	w      *fleet.Watcher
	h      map[string]*hedge.Hedger
	path   string
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	events []fleet.Event
}

// startPod starts a Watcher of the policy file in a new directory, with
// one Hedger named "api", inside the current synctest bubble. opt's
// Service, Instance, Source, Hedgers and OnEvent are set here.
func startPod(t *testing.T, opt fleet.Options, doc string) *pod {
	t.Helper()
	p := &pod{path: filepath.Join(t.TempDir(), "policy.yaml"), done: make(chan error, 1)}
	if doc != "" {
		writeFile(t, p.path, doc)
	}
	if p.h == nil {
		h, err := hedge.New(hedge.Config{Delay: hedge.Percentile{}})
		if err != nil {
			t.Fatal(err)
		}
		p.h = map[string]*hedge.Hedger{"api": h}
	}
	opt.Service, opt.Source, opt.Hedgers = "checkout", fleet.NewFile(p.path), p.h
	if opt.Instance == "" {
		opt.Instance = "pod-1"
	}
	opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opt.OnEvent = func(e fleet.Event) {
		p.mu.Lock()
		p.events = append(p.events, e)
		p.mu.Unlock()
	}
	w, err := fleet.NewWatcher(opt)
	if err != nil {
		t.Fatal(err)
	}
	p.w = w
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- w.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}

func (p *pod) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// kinds returns the kinds of the events told so far, with the reason of
// refusals: "applied", "refused:stale".
func (p *pod) kinds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.events {
		k := e.Kind.String()
		if e.Reason != "" {
			k += ":" + string(e.Reason)
		}
		out = append(out, k)
	}
	return out
}

// doc writes a policy document for service checkout.
func doc(version int, rules string) string {
	return fmt.Sprintf("service: checkout\nversion: %d\nhedgers:\n  \"*\":\n%s", version, rules)
}

// settleFor lets the file be polled and the jitter pass.
func settleFor(d time.Duration) {
	time.Sleep(d + fleet.DefaultPoll + ms)
	synctest.Wait()
}

// TestWatcherAppliesAfterJitter checks that a document is applied to the
// running Hedger within the poll and the jitter, not before the jitter's
// draw, and that the status says so.
func TestWatcherAppliesAfterJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const jitter = 2 * time.Second
		start := time.Now()
		p := startPod(t, fleet.Options{Jitter: jitter}, doc(3, "    mode: shadow\n    maxAttempts: 3\n"))
		synctest.Wait()
		if s := p.w.Status(); s.State != fleet.StateCode || s.Version != 0 {
			t.Fatalf("status before any apply: %+v", s)
		}
		settleFor(jitter)
		s := p.w.Status()
		if s.State != fleet.StateApplied || s.Version != 3 || s.Source != "file "+p.path || s.Instance != "pod-1" {
			t.Fatalf("status %+v, want version 3 applied", s)
		}
		if took := s.Applied.Sub(start); took > jitter+fleet.DefaultPoll {
			t.Errorf("applied %v after the write, later than the jitter allows", took)
		}
		if l := p.h["api"].Live(); l.Mode != hedge.Shadow || l.MaxAttempts != 3 {
			t.Errorf("the Hedger runs %+v, want shadow with 3 attempts", l)
		}
		if st := p.w.Stats(); st.Applied != 1 {
			t.Errorf("Stats %+v, want 1 applied", st)
		}
	})
}

// TestWatcherRefuses checks each document that must not be applied: the
// last good one stays in force, and the refusal is counted and told
// with its reason.
func TestWatcherRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		why  fleet.Reason
	}{
		{"invalid", doc(8, "    mode: sometimes\n"), fleet.ReasonInvalid},
		{"unknown field", doc(8, "    mode: on\n    noBudget: true\n"), fleet.ReasonInvalid},
		{"every cap off", doc(8, "    budget: {ratio: 0, burst: 0}\n"), fleet.ReasonInvalid},
		{"not YAML", "service: [checkout\n", fleet.ReasonInvalid},
		{"too large", doc(8, "    mode: on\n") + "#" + strings.Repeat("x", 10<<20) + "\n", fleet.ReasonTooLarge},
		{"other service", strings.Replace(doc(8, "    mode: on\n"), "checkout", "payments", 1), fleet.ReasonService},
		{"older version", doc(6, "    mode: on\n"), fleet.ReasonStale},
		{"same version, other content", doc(7, "    mode: on\n"), fleet.ReasonStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPod(t, fleet.Options{Jitter: time.Second}, doc(7, "    mode: off\n"))
				settleFor(time.Second)
				writeFile(t, p.path, tc.doc)
				settleFor(time.Second)
				if s := p.w.Status(); s.Version != 7 || s.State != fleet.StateApplied || s.Error == "" {
					t.Errorf("status %+v, want version 7 in force and the refusal's error", s)
				}
				if l := p.h["api"].Live(); l.Mode != hedge.Off {
					t.Errorf("the Hedger runs %+v, want the last good document's off", l)
				}
				st := p.w.Stats()
				if st.Refused[tc.why] != 1 || st.Applied != 1 {
					t.Errorf("Stats %+v, want one refusal for %s and one document applied", st, tc.why)
				}
				if got := p.kinds(); len(got) != 2 || got[1] != "refused:"+string(tc.why) {
					t.Errorf("events %v, want applied then refused:%s", got, tc.why)
				}
			})
		})
	}
}

// TestWatcherNotLive checks that a document a Hedger cannot apply while
// it runs (a percentile for a fixed delay) is refused, for every Hedger.
func TestWatcherNotLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fixed, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * ms)})
		if err != nil {
			t.Fatal(err)
		}
		live, err := hedge.New(hedge.Config{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "policy.json")
		writeFile(t, path, `{"service": "checkout", "version": 1, "hedgers": {"*": {"percentile": 99}}}`)
		w, err := fleet.NewWatcher(fleet.Options{Service: "checkout", Instance: "pod-1", Source: fleet.NewFile(path),
			Hedgers: map[string]*hedge.Hedger{"fixed": fixed, "live": live}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		settleFor(0)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if st := w.Stats(); st.Refused[fleet.ReasonNotLive] != 1 || st.Applied != 0 {
			t.Fatalf("Stats %+v, want the document refused as not_live", st)
		}
		if s := w.Status(); !strings.Contains(s.Error, `Hedger "fixed"`) || s.State != fleet.StateCode {
			t.Fatalf("status %+v, want the code's Config and an error naming the fixed Hedger", s)
		}
		if l := live.Live(); l.Percentile != 0 {
			t.Fatalf("the other Hedger applied part of a refused document: %+v", l)
		}
	})
}

// TestWatcherKillExpires checks the kill switch: every Hedger off at
// once, then the rest of the document when it expires, after a jitter.
func TestWatcherKillExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const jitter = time.Second
		until := time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)
		p := startPod(t, fleet.Options{Jitter: jitter}, doc(2, "    mode: shadow\n    ops:\n      get: {mode: on}\n")+"kill: {until: "+until+", reason: incident}\n")
		settleFor(jitter)
		if l := p.h["api"].Live(); l.Mode != hedge.Off || l.Ops != nil {
			t.Fatalf("under the kill switch the Hedger runs %+v, want off", l)
		}
		time.Sleep(30*time.Minute - jitter - fleet.DefaultPoll - 2*ms)
		synctest.Wait()
		if l := p.h["api"].Live(); l.Mode != hedge.Off {
			t.Fatalf("before the switch ends the Hedger runs %+v, want off", l)
		}
		settleFor(2 * jitter)
		if l := p.h["api"].Live(); l.Mode != hedge.Shadow || l.Ops["get"].Mode != hedge.On {
			t.Fatalf("after the switch the Hedger runs %+v, want the document's shadow and get on", l)
		}
		if got := p.kinds(); strings.Join(got, " ") != "applied kill_ended applied" {
			t.Fatalf("events %v", got)
		}
	})
}

// TestWatcherStoreLost checks fail static: a store lost keeps the last
// good document, LostAfter later the pod falls back, and the store back
// with the same document runs it again.
func TestWatcherStoreLost(t *testing.T) {
	for _, fb := range []fleet.Fallback{fleet.FallbackOff, fleet.FallbackCode} {
		t.Run(fb.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const lostAfter = time.Minute
				good := doc(4, "    mode: shadow\n")
				p := startPod(t, fleet.Options{LostAfter: lostAfter, Fallback: fb}, good)
				settleFor(0)
				if err := os.Remove(p.path); err != nil {
					t.Fatal(err)
				}
				settleFor(0)
				if s := p.w.Status(); s.State != fleet.StateStale || s.Version != 4 || s.Error == "" {
					t.Fatalf("store lost: status %+v, want version 4 stale, with the error", s)
				}
				if l := p.h["api"].Live(); l.Mode != hedge.Shadow {
					t.Fatalf("store lost: the Hedger runs %+v, want the last good shadow", l)
				}
				time.Sleep(lostAfter)
				synctest.Wait()
				want := hedge.Live{}
				if fb == fleet.FallbackOff {
					want.Mode = hedge.Off
				}
				if s, l := p.w.Status(), p.h["api"].Live(); s.State != fleet.StateFallback || l.Mode != want.Mode {
					t.Fatalf("after LostAfter: status %+v, Hedger %+v; want fallback %v", s, l, fb)
				}
				writeFile(t, p.path, good)
				settleFor(0)
				if s, l := p.w.Status(), p.h["api"].Live(); s.State != fleet.StateApplied || s.Error != "" || l.Mode != hedge.Shadow {
					t.Fatalf("store back: status %+v, Hedger %+v; want version 4 applied again", s, l)
				}
				st := p.w.Stats()
				if st.StoreErrors != 1 || st.Fallbacks != 1 || st.Applied != 2 {
					t.Fatalf("Stats %+v", st)
				}
			})
		})
	}
}

// TestWatcherStartsWithoutStore checks a pod whose store is unreachable
// at start: it runs the Config in code and says why, then applies the
// document once the store has one.
func TestWatcherStartsWithoutStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, fleet.Options{LostAfter: time.Hour}, "")
		settleFor(0)
		if s := p.w.Status(); s.State != fleet.StateCode || !strings.Contains(s.Error, "no such file") {
			t.Fatalf("status %+v, want the code's Config and the store's error", s)
		}
		if l := p.h["api"].Live(); l.Mode != hedge.On || l.Ops != nil {
			t.Fatalf("the Hedger runs %+v, want its Config", l)
		}
		// Past LostAfter: a pod that never had a document has nothing
		// to fall back from.
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if s := p.w.Status(); s.State != fleet.StateCode || p.w.Stats().Fallbacks != 0 {
			t.Fatalf("status %+v after LostAfter without a document, want the code's Config", s)
		}
		writeFile(t, p.path, doc(1, "    mode: off\n"))
		settleFor(0)
		if s := p.w.Status(); s.State != fleet.StateApplied || s.Version != 1 || s.Error != "" {
			t.Fatalf("status %+v, want version 1 applied", s)
		}
	})
}

// TestWatcherChangeInDoubt checks that a change waiting for its jitter
// does not count as applied, and that a newer document during the wait
// replaces it: the pod goes from the old document to the newest, never
// through one it did not see whole.
func TestWatcherChangeInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const jitter = 10 * time.Second
		p := startPod(t, fleet.Options{Jitter: jitter}, doc(1, "    mode: off\n"))
		settleFor(jitter)
		writeFile(t, p.path, doc(2, "    mode: on\n"))
		time.Sleep(fleet.DefaultPoll + ms)
		writeFile(t, p.path, doc(3, "    mode: shadow\n"))
		settleFor(jitter)
		if s, l := p.w.Status(), p.h["api"].Live(); s.Version != 3 || l.Mode != hedge.Shadow {
			t.Fatalf("status %+v, Hedger %+v; want version 3, shadow", s, l)
		}
		for _, k := range p.kinds() {
			if k != "applied" {
				t.Fatalf("events %v, want applies only", p.kinds())
			}
		}
	})
}

// TestWatcherAnnounces checks that the Announcer is given the pod's
// status after a change.
func TestWatcherAnnounces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{}
		startPod(t, fleet.Options{Announcer: a, Instance: "pod-7"}, doc(5, "    mode: on\n"))
		settleFor(0)
		s := a.last()
		if s.Version != 5 || s.State != fleet.StateApplied || s.Instance != "pod-7" || s.Service != "checkout" {
			t.Fatalf("announced %+v, want version 5 applied on pod-7", s)
		}
	})
}

type announcer struct {
	mu sync.Mutex
	s  []fleet.PodStatus
}

func (a *announcer) Announce(_ context.Context, s fleet.PodStatus) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.s = append(a.s, s)
	return nil
}

func (a *announcer) last() fleet.PodStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.s) == 0 {
		return fleet.PodStatus{}
	}
	return a.s[len(a.s)-1]
}

// TestWatcherKeepsLearned checks that applying a document keeps what
// the Hedger learned: its latency window reads the new percentile from
// the samples it holds, with no new request.
func TestWatcherKeepsLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, fleet.Options{}, "")
		h := p.h["api"]
		for i := range 200 {
			hedge.Do(context.Background(), h, "get", func(context.Context, hedge.Attempt) (int, error) {
				time.Sleep(time.Duration(1+i%100) * ms)
				return 0, nil
			})
		}
		before := h.OpStats("get")
		writeFile(t, p.path, doc(1, "    percentile: 50\n"))
		settleFor(0)
		after := h.OpStats("get")
		if after.Requests != before.Requests || after.Delay >= before.Delay*3/4 || after.Delay < 45*ms {
			t.Fatalf("delay %v with %d requests before, %v with %d after; want about 50ms read from the same samples",
				before.Delay, before.Requests, after.Delay, after.Requests)
		}
		time.Sleep(time.Second) // the Hedger's timer goroutine ends
	})
}

// TestWatcherJitterSpreads checks that pods given one change apply it at
// different times, each within the jitter of seeing it.
func TestWatcherJitterSpreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const jitter = 5 * time.Second
		start := time.Now()
		var pods []*pod
		for i := range 20 {
			pods = append(pods, startPod(t, fleet.Options{Jitter: jitter, Instance: fmt.Sprintf("pod-%d", i)}, doc(1, "    mode: off\n")))
		}
		settleFor(jitter)
		first, last := time.Duration(1<<62), time.Duration(0)
		for _, p := range pods {
			s := p.w.Status()
			if s.Version != 1 {
				t.Fatalf("%s: status %+v, want version 1 applied within the jitter", s.Instance, s)
			}
			took := s.Applied.Sub(start)
			first, last = min(first, took), max(last, took)
		}
		if last > jitter || first == last {
			t.Fatalf("pods applied from %v to %v after the write: want different times, within %v", first, last, jitter)
		}
	})
}

// source is a store reported by hand: a Source whose reports the test
// sends, for what a file cannot say (revisions, deletion).
type source struct{ c chan fleet.Report }

func (s source) String() string { return "test source" }

func (s source) Watch(ctx context.Context, report func(fleet.Report)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-s.c:
			report(r)
		}
	}
}

// TestWatcherRevisionsAndDeletion checks that a report of an older store
// revision is refused, even with a newer version, and that a deletion
// returns the Hedgers to their Config.
func TestWatcherRevisionsAndDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{})
		if err != nil {
			t.Fatal(err)
		}
		src := source{make(chan fleet.Report)}
		w, err := fleet.NewWatcher(fleet.Options{Service: "checkout", Instance: "pod-1", Source: src,
			Hedgers: map[string]*hedge.Hedger{"api": h}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		src.c <- fleet.Report{Doc: []byte(doc(5, "    mode: off\n")), Revision: 100}
		synctest.Wait()
		src.c <- fleet.Report{Doc: []byte(doc(6, "    mode: on\n")), Revision: 90}
		synctest.Wait()
		if s, st := w.Status(), w.Stats(); s.Version != 5 || s.Revision != 100 || st.Refused[fleet.ReasonStale] != 1 || h.Live().Mode != hedge.Off {
			t.Fatalf("after an older revision: status %+v, stats %+v, Hedger %+v", s, st, h.Live())
		}
		src.c <- fleet.Report{Deleted: true, Revision: 101}
		synctest.Wait()
		if s, l := w.Status(), h.Live(); s.State != fleet.StateCode || s.Version != 0 || l.Mode != hedge.On {
			t.Fatalf("after deletion: status %+v, Hedger %+v; want the Config in code", s, l)
		}
		cancel()
		<-done
	})
}

// TestInRolloutSticky checks that the pods in a rollout stay in as it
// grows, and that the share in is about the rollout's.
func TestInRolloutSticky(t *testing.T) {
	const n = 10000
	in := map[float64]int{}
	for i := range n {
		name := fmt.Sprintf("checkout-7d9f8-%d", i)
		was := false
		for _, share := range []float64{0, 0.01, 0.1, 0.5, 1} {
			now := fleet.InRollout(name, share)
			if was && !now {
				t.Fatalf("%s left the rollout as it grew to %v", name, share)
			}
			if now {
				in[share]++
			}
			was = now
		}
	}
	// Binomial(10000, share): 5 standard deviations either side.
	for share, got := range in {
		want := share * n
		sd := math.Sqrt(n * share * (1 - share))
		if math.Abs(float64(got)-want) > 5*sd {
			t.Errorf("%d of %d pods in a rollout of %v, want about %v", got, n, share, want)
		}
	}
	if in[0] != 0 || in[1] != n {
		t.Errorf("rollout 0 takes %d pods, 1 takes %d; want none and all", in[0], in[1])
	}
}

// TestRolloutModes checks that pods out of a rollout run in shadow and
// pods in it run on, per operation too.
func TestRolloutModes(t *testing.T) {
	p, err := fleet.Parse([]byte(doc(1, "    rollout: 0.5\n    ops:\n      get: {rollout: 1}\n")))
	if err != nil {
		t.Fatal(err)
	}
	var on, shadow string
	for i := 0; on == "" || shadow == ""; i++ {
		name := fmt.Sprintf("pod-%d", i)
		if fleet.InRollout(name, 0.5) {
			on = name
		} else {
			shadow = name
		}
	}
	if l := p.Live("api", on, time.Time{}); l.Mode != hedge.On || l.Ops["get"].Mode != hedge.On {
		t.Errorf("a pod in: %+v", l)
	}
	if l := p.Live("api", shadow, time.Time{}); l.Mode != hedge.Shadow || l.Ops["get"].Mode != hedge.On {
		t.Errorf("a pod out: %+v", l)
	}
}

// TestWatcherFlappingStore checks a store that comes and goes more often
// than LostAfter: the pod keeps the last good document, never falls
// back, and applies nothing again for a document it already runs.
func TestWatcherFlappingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		good := doc(2, "    mode: shadow\n")
		p := startPod(t, fleet.Options{LostAfter: time.Second}, good)
		settleFor(0)
		for range 5 {
			if err := os.Remove(p.path); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * ms)
			if l := p.h["api"].Live(); l.Mode != hedge.Shadow {
				t.Fatalf("store lost: the Hedger runs %+v, want the last good shadow", l)
			}
			writeFile(t, p.path, good)
			time.Sleep(300 * ms)
		}
		// Longer than LostAfter with the store back: no fallback.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st, s := p.w.Stats(), p.w.Status()
		if st.StoreErrors != 5 || st.Fallbacks != 0 || st.Applied != 1 || s.State != fleet.StateApplied || s.Version != 2 {
			t.Fatalf("Stats %+v, status %+v; want 5 store errors, no fallback, version 2 applied once", st, s)
		}
	})
}

// TestWatcherRunOnce checks that a second Run is refused.
func TestWatcherRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPod(t, fleet.Options{}, doc(1, "    mode: on\n"))
		synctest.Wait() // the first Run has started
		if err := p.w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("second Run = %v, want an error", err)
		}
	})
}

// TestWatcherKillEndsInFallback checks that a kill switch that ends
// while the pod has fallen back leaves the fallback in force: the rest
// of a document from a store lost long ago does not come back by itself.
func TestWatcherKillEndsInFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		p := startPod(t, fleet.Options{LostAfter: time.Minute, Fallback: fleet.FallbackOff}, doc(1, "    mode: on\n")+"kill: {until: "+until+"}\n")
		settleFor(0)
		if err := os.Remove(p.path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if s, l := p.w.Status(), p.h["api"].Live(); s.State != fleet.StateFallback || l.Mode != hedge.Off {
			t.Fatalf("status %+v, Hedger %+v; want the fallback's off", s, l)
		}
	})
}

// TestNewWatcherRefuses checks that every mistake in Options is reported
// at once, matching ErrInvalidOptions.
func TestNewWatcherRefuses(t *testing.T) {
	_, err := fleet.NewWatcher(fleet.Options{Hedgers: map[string]*hedge.Hedger{"*": nil}, Jitter: -1, Fallback: 7})
	if !errors.Is(err, fleet.ErrInvalidOptions) {
		t.Fatalf("NewWatcher = %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"Service is empty", "Source is nil", `Hedgers["*"] is nil`, `named "*"`, "Jitter = -1ns", "Fallback = 7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestWatcherKillStopsHedges runs traffic whose every request wants a
// hedge, then pushes a kill switch: from the moment the pod applies it,
// no hedge is sent, not even those of requests already waiting for one.
func TestWatcherKillStopsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: -1})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "policy.yaml")
		writeFile(t, path, doc(1, "    mode: on\n"))
		var mu sync.Mutex
		atKill := int64(-1)
		w, err := fleet.NewWatcher(fleet.Options{Service: "checkout", Instance: "pod-1", Source: fleet.NewFile(path),
			Hedgers: map[string]*hedge.Hedger{"api": h}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnEvent: func(e fleet.Event) {
				if e.Kind == fleet.EventApplied && e.Version == 2 {
					mu.Lock()
					atKill = h.OpStats("get").Hedges
					mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()

		// A request every millisecond, half a millisecond off the file's
		// polls, so that no hedge timer fires in the instant the pod
		// applies the switch: each primary takes 50 ms, its hedge 1 ms.
		stop := make(chan struct{})
		var traffic sync.WaitGroup
		traffic.Go(func() {
			time.Sleep(ms / 2)
			for {
				select {
				case <-stop:
					return
				default:
				}
				traffic.Go(func() {
					s := 0
					hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
						d := 50 * ms
						if a.Index > 0 {
							d = ms
						}
						select {
						case <-time.After(d):
						case <-ctx.Done():
						}
						return s, nil
					})
				})
				time.Sleep(ms)
			}
		})
		time.Sleep(300 * ms)
		until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		writeFile(t, path, doc(2, "    mode: on\n")+"kill: {until: "+until+"}\n")
		time.Sleep(300 * ms)
		close(stop)
		traffic.Wait()
		cancel()
		<-done

		mu.Lock()
		defer mu.Unlock()
		after := h.OpStats("get").Hedges
		if atKill <= 0 || after != atKill {
			t.Fatalf("hedges when the kill switch was applied: %d; at the end: %d; want some before and none after", atKill, after)
		}
	})
}
