package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/etcdtest"
)

// Scenario names, the rows of the table.
const (
	ScenarioPush        = "push"
	ScenarioFollower    = "push, a follower killed"
	ScenarioLeader      = "push, the leader killed"
	ScenarioKill        = "kill switch (off)"
	ScenarioInvalid     = "invalid documents"
	ScenarioStoreReturn = "push after the whole store restarted"
)

// Row is one scenario's measures. A field that does not apply to the
// scenario is nil.
type Row struct {
	Source   string `json:"source"`
	Scenario string `json:"scenario"`
	// Pushes is the documents pushed.
	Pushes int `json:"pushes"`
	// Applies is how many (watcher, push) pairs applied the push within
	// the bound; Missed how many did not.
	Applies int `json:"applies"`
	Missed  int `json:"missed"`
	// P50, P99 and Max are of the time from a push's start to a
	// watcher's apply, over every watcher of every push. Max is the time
	// until every watcher applied the slowest push.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// Accepted is the longest time a push took to be accepted by the
	// store (etcd's Put returned; the file's symlink swapped), retries
	// included.
	Accepted time.Duration `json:"accepted_ns"`
	// AfterAccepted is the longest time from the store's acceptance of a
	// push to a watcher's apply: Max without the store's own delay (an
	// election after the leader was killed, say).
	AfterAccepted time.Duration `json:"after_accepted_ns"`
	// HedgesOn is the hedges sent in Options.Hold before the kill switch,
	// with hedging on: proof that the traffic hedges.
	HedgesOn *int64 `json:"hedges_on,omitempty"`
	// HedgesAfterOff is the hedges sent after each watcher applied the
	// kill switch, until Options.Hold after the last did, and
	// CallsAfterOff the calls made meanwhile.
	HedgesAfterOff *int64 `json:"hedges_after_off,omitempty"`
	CallsAfterOff  *int64 `json:"calls_after_off,omitempty"`
	// HedgesBegunAfterOff is the part of HedgesAfterOff whose calls began
	// after the watcher applied "off"; the others' calls were in flight
	// when it did.
	HedgesBegunAfterOff *int64 `json:"hedges_begun_after_off,omitempty"`
	// Invalid is the invalid documents pushed, InvalidApplied the
	// applies of any of them by any watcher, and Refusals the refusals
	// the watchers reported.
	Invalid        *int `json:"invalid,omitempty"`
	InvalidApplied *int `json:"invalid_applied,omitempty"`
	Refusals       *int `json:"refusals,omitempty"`
	// Behind is the watchers not on the latest version once the store
	// is back and Options.Bound has passed since the push.
	Behind *int `json:"behind,omitempty"`
	// Listed is the pods the store lists on the latest version (what
	// `hedge policy status` shows), after the whole store restarted.
	Listed *int `json:"listed,omitempty"`
}

// Result is a run's rows and how it was run.
type Result struct {
	Options Options   `json:"options"`
	Started time.Time `json:"started"`
	Elapsed string    `json:"elapsed"`
	Rows    []Row     `json:"rows"`
}

// store is where the parent pushes documents.
type store interface {
	push(ctx context.Context, doc []byte) error
}

// runner runs the scenarios of one source.
type runner struct {
	o       Options
	source  string
	st      store
	f       *pods
	version int64
	service string
	log     func(format string, args ...any)
}

// Run measures each of o.Sources in turn and returns every row.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	res := &Result{Options: o, Started: time.Now().UTC()}
	for _, s := range o.Sources {
		var (
			rows []Row
			err  error
		)
		switch s {
		case SourceEtcd:
			rows, err = runEtcd(ctx, o)
		case SourceFile:
			rows, err = runFile(ctx, o)
		}
		res.Rows = append(res.Rows, rows...)
		if err != nil {
			res.Elapsed = time.Since(res.Started).Round(time.Second).String()
			return res, fmt.Errorf("%s: %w", s, err)
		}
	}
	res.Elapsed = time.Since(res.Started).Round(time.Second).String()
	return res, nil
}

func newRunner(o Options, source string) *runner {
	start := time.Now()
	return &runner{o: o, source: source, service: "bench", log: func(format string, args ...any) {
		fmt.Fprintf(o.Progress, "%6.1fs %s: %s\n", time.Since(start).Seconds(), source, fmt.Sprintf(format, args...))
	}}
}

// startFleet pushes the first document, starts the workers and waits
// until every watcher applied it.
func (r *runner) startFleet(ctx context.Context, base WorkerConfig) error {
	r.version++
	if err := r.st.push(ctx, validDoc(r.service, r.version, 95, time.Time{})); err != nil {
		return fmt.Errorf("pushing the first document: %w", err)
	}
	r.log("starting %d watchers in %d worker processes", r.o.Watchers, r.o.Procs)
	base.Service, base.Rate, base.Jitter, base.Seed = r.service, r.o.Rate, r.o.Jitter, r.o.Seed
	f, err := start(ctx, r.o, base)
	if err != nil {
		return err
	}
	r.f = f
	ok, err := f.wait(ctx, time.Now().Add(r.o.Bound), func() bool { return f.allApplied(r.version) })
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%d of %d watchers did not apply the first document within %v", f.behind(r.version), r.o.Watchers, r.o.Bound)
	}
	r.log("every watcher runs version %d", r.version)
	return nil
}

// pushOnce pushes doc, retrying until the store accepts it or the bound
// passes, and returns how long that took.
func (r *runner) pushOnce(ctx context.Context, doc []byte, t0 time.Time) (time.Duration, error) {
	for {
		// Unless Options.Attempt says otherwise, one attempt may wait as
		// long as etcd takes to elect a leader and answer; it is sent
		// again only when it fails.
		limit := max(r.o.Bound-time.Since(t0), time.Second)
		if r.o.Attempt > 0 {
			limit = r.o.Attempt
		}
		actx, cancel := context.WithTimeout(ctx, limit)
		err := r.st.push(actx, doc)
		cancel()
		if err == nil {
			return time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if time.Since(t0) > r.o.Bound {
			return 0, fmt.Errorf("the store did not accept the push within %v: %w", r.o.Bound, err)
		}
		r.log("push refused by the store, trying again: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
}

// measured is the outcome of one push.
type measured struct {
	times    []time.Duration
	missed   int
	accepted time.Duration
}

// afterAccepted is the longest time from the store's acceptance to an
// apply.
func (m measured) afterAccepted() time.Duration { return maxOf(m.times) - m.accepted }

// push pushes the next version (with a kill switch when kill is set),
// runs during at the same moment, and waits until every watcher applied
// it or the bound passed.
func (r *runner) push(ctx context.Context, percentile int, kill bool, during func()) (measured, error) {
	r.version++
	v := r.version
	var until time.Time
	if kill {
		until = time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	}
	doc := validDoc(r.service, v, percentile, until)
	t0 := time.Now()
	if during != nil {
		go during()
	}
	acc, err := r.pushOnce(ctx, doc, t0)
	if err != nil {
		return measured{}, err
	}
	if _, err := r.f.wait(ctx, t0.Add(r.o.Bound), func() bool { return r.f.allApplied(v) }); err != nil {
		return measured{}, err
	}
	times, missed := r.f.appliedTimes(v, t0)
	m := measured{times: times, missed: missed, accepted: acc}
	r.log("version %d: %d of %d watchers applied it, the last after %v (store accepted it after %v)",
		v, len(times), r.o.Watchers, maxOf(times).Round(time.Millisecond), acc.Round(time.Millisecond))
	return m, nil
}

// row folds measured pushes into a row.
func (r *runner) row(scenario string, ms []measured) Row {
	row := Row{Source: r.source, Scenario: scenario, Pushes: len(ms)}
	var all []time.Duration
	for _, m := range ms {
		all = append(all, m.times...)
		row.Missed += m.missed
		row.Accepted = max(row.Accepted, m.accepted)
		row.AfterAccepted = max(row.AfterAccepted, m.afterAccepted())
	}
	row.Applies = len(all)
	slices.Sort(all)
	row.P50, row.P99, row.Max = quantile(all, 0.5), quantile(all, 0.99), maxOf(all)
	return row
}

// pushes runs the plain push scenario.
func (r *runner) pushes(ctx context.Context) (Row, error) {
	var ms []measured
	for i := range r.o.Pushes {
		m, err := r.push(ctx, percentileFor(i), false, nil)
		if err != nil {
			return Row{}, err
		}
		ms = append(ms, m)
	}
	return r.row(ScenarioPush, ms), nil
}

// killSwitch counts the hedges sent with hedging on, pushes a document
// with a kill switch, and counts the hedges each watcher sent after it
// applied it; then it pushes a document without one.
func (r *runner) killSwitch(ctx context.Context) (Row, error) {
	before, err := r.f.snapshot(ctx)
	if err != nil {
		return Row{}, err
	}
	if err := sleep(ctx, r.o.Hold); err != nil {
		return Row{}, err
	}
	on, err := r.f.snapshot(ctx)
	if err != nil {
		return Row{}, err
	}
	var hedgesOn int64
	for w := range on {
		hedgesOn += on[w].Hedges - before[w].Hedges
	}
	m, err := r.push(ctx, 95, true, nil)
	if err != nil {
		return Row{}, err
	}
	// Hold, and on until every watcher that applied "off" made a call
	// since: a count of hedges after off means nothing without calls.
	if err := sleep(ctx, r.o.Hold); err != nil {
		return Row{}, err
	}
	var after []message
	for deadline := time.Now().Add(r.o.Bound); ; {
		if after, err = r.f.snapshot(ctx); err != nil {
			return Row{}, err
		}
		if r.o.Rate == 0 || r.callsAfter(after) || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return Row{}, err
		}
	}
	var hedges, calls, late int64
	r.f.mu.Lock()
	for w := range after {
		a, ok := r.f.applied[w][r.version]
		if !ok {
			continue // a miss, counted as such
		}
		if after[w].Mode != "off" {
			r.f.mu.Unlock()
			return Row{}, fmt.Errorf("watcher %d applied the kill switch but its Hedger is %s", w, after[w].Mode)
		}
		hedges += after[w].Hedges - a.Hedges
		calls += after[w].Requests - a.Requests
		late += after[w].Late
	}
	r.f.mu.Unlock()
	row := r.row(ScenarioKill, []measured{m})
	row.HedgesOn, row.HedgesAfterOff, row.CallsAfterOff, row.HedgesBegunAfterOff = &hedgesOn, &hedges, &calls, &late
	r.log("kill switch: %d hedges in %v before it; %d hedges in %d calls after it, %d of calls begun after it", hedgesOn, r.o.Hold, hedges, calls, late)
	if _, err := r.push(ctx, 95, false, nil); err != nil {
		return Row{}, err
	}
	return row, nil
}

// callsAfter reports whether every watcher that applied the latest
// version made a call since, by the counts in after.
func (r *runner) callsAfter(after []message) bool {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	for w := range after {
		if a, ok := r.f.applied[w][r.version]; ok && after[w].Requests <= a.Requests {
			return false
		}
	}
	return true
}

// invalid pushes each invalid document and waits until every watcher
// refused it; it counts the applies meanwhile.
func (r *runner) invalid(ctx context.Context) (Row, error) {
	docs := invalidDocs(r.service, r.version)
	r.f.mu.Lock()
	applies0 := r.f.applies
	r.f.mu.Unlock()
	refusals := 0
	var waitErr []string
	for _, d := range docs {
		r.f.mu.Lock()
		base := slices.Clone(r.f.refused)
		r.f.mu.Unlock()
		if _, err := r.pushOnce(ctx, d.doc, time.Now()); err != nil {
			return Row{}, err
		}
		ok, err := r.f.wait(ctx, time.Now().Add(r.o.Bound), func() bool {
			for w := range base {
				if r.f.refused[w] <= base[w] {
					return false
				}
			}
			return true
		})
		if err != nil {
			return Row{}, err
		}
		r.f.mu.Lock()
		n := 0
		for w := range base {
			n += min(r.f.refused[w]-base[w], 1)
		}
		r.f.mu.Unlock()
		refusals += n
		if !ok {
			waitErr = append(waitErr, fmt.Sprintf("%s: %d of %d refused it", d.name, n, r.o.Watchers))
		}
		r.log("invalid document (%s): %d of %d watchers refused it", d.name, n, r.o.Watchers)
	}
	r.f.mu.Lock()
	applied := r.f.applies - applies0
	r.f.mu.Unlock()
	n := len(docs)
	row := Row{Source: r.source, Scenario: ScenarioInvalid, Pushes: n, Invalid: &n, InvalidApplied: &applied, Refusals: &refusals}
	behind := r.f.behind(r.version)
	row.Behind = &behind
	if len(waitErr) > 0 {
		r.log("not every watcher reported a refusal within %v: %s", r.o.Bound, strings.Join(waitErr, "; "))
	}
	// The store holds an invalid document now: push a good one.
	if _, err := r.push(ctx, 95, false, nil); err != nil {
		return Row{}, err
	}
	return row, nil
}

// runFile runs the file source's scenarios through a ConfigMap-style
// directory.
func runFile(ctx context.Context, o Options) ([]Row, error) {
	r := newRunner(o, SourceFile)
	dir, err := workDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cm := &ConfigMapDir{Dir: filepath.Join(dir, "policy")}
	r.st = fileStore{cm}
	r.log("policy in %s, updated by a ConfigMap's symlink swap", filePath(dir))
	if err := r.startFleet(ctx, WorkerConfig{Source: SourceFile, File: filePath(dir)}); err != nil {
		return nil, err
	}
	defer r.f.stop()
	var rows []Row
	for _, step := range []func(context.Context) (Row, error){r.pushes, r.killSwitch, r.invalid} {
		row, err := step(ctx)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

type fileStore struct{ cm *ConfigMapDir }

func (s fileStore) push(_ context.Context, doc []byte) error {
	return s.cm.Write(map[string][]byte{policyFile: doc})
}

// runEtcd runs the etcd scenarios against a cluster of three members.
func runEtcd(ctx context.Context, o Options) ([]Row, error) {
	r := newRunner(o, SourceEtcd)
	r.log("starting a cluster of three etcd members")
	c, err := etcdtest.StartN(3, etcdtest.Options{})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	r.log("members at %s", strings.Join(c.Endpoints(), ", "))
	st, err := newEtcdStore(c.Endpoints(), r.service)
	if err != nil {
		return nil, err
	}
	defer st.close()
	r.st = st
	if err := r.startFleet(ctx, WorkerConfig{Source: SourceEtcd, Endpoints: c.Endpoints()}); err != nil {
		return nil, err
	}
	defer r.f.stop()
	var rows []Row
	add := func(row Row, err error) error {
		if err == nil {
			rows = append(rows, row)
		}
		return err
	}
	if err := add(r.pushes(ctx)); err != nil {
		return rows, err
	}
	if err := add(r.kill(ctx, c, false)); err != nil {
		return rows, err
	}
	if err := add(r.kill(ctx, c, true)); err != nil {
		return rows, err
	}
	if err := add(r.killSwitch(ctx)); err != nil {
		return rows, err
	}
	if err := add(r.invalid(ctx)); err != nil {
		return rows, err
	}
	if err := add(r.storeRestart(ctx, c)); err != nil {
		return rows, err
	}
	return rows, nil
}

// kill pushes while a member is killed, the leader or a follower, then
// restarts it and counts the watchers not on the latest version.
func (r *runner) kill(ctx context.Context, c *etcdtest.Cluster, leader bool) (Row, error) {
	scenario := ScenarioFollower
	if leader {
		scenario = ScenarioLeader
	}
	var ms []measured
	for i := range r.o.Pushes {
		l, err := c.Leader(10 * time.Second)
		if err != nil {
			return Row{}, err
		}
		victim := l
		if !leader {
			var followers []*etcdtest.Member
			for _, m := range c.Members {
				if m != l {
					followers = append(followers, m)
				}
			}
			victim = followers[i%len(followers)]
		}
		r.log("killing %s (leader: %v) as version %d is pushed", victim.Name, leader, r.version+1)
		m, err := r.push(ctx, percentileFor(i), false, victim.Kill)
		if err != nil {
			return Row{}, err
		}
		ms = append(ms, m)
		if err := r.restart(ctx, c, victim); err != nil {
			return Row{}, err
		}
	}
	row := r.row(scenario, ms)
	if err := r.countBehind(ctx, &row); err != nil {
		return Row{}, err
	}
	return row, nil
}

// restart restarts the members and waits until the cluster is healthy.
func (r *runner) restart(ctx context.Context, c *etcdtest.Cluster, ms ...*etcdtest.Member) error {
	// Each member is restarted on a goroutine of its own: a member is
	// healthy only once a quorum runs, so that restarting a majority one
	// by one would wait for ever on the first.
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			// A kill run beside a push may still be under way.
			for m.Running() {
				if err := sleep(ctx, 10*time.Millisecond); err != nil {
					errs[i] = err
					return
				}
			}
			if err := m.Restart(); err != nil {
				errs[i] = fmt.Errorf("restarting %s: %w", m.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.WaitHealthy(time.Minute); err != nil {
		return err
	}
	r.log("the store is back: %d members healthy", len(c.Members))
	return nil
}

// countBehind waits until every watcher is on the latest version or the
// bound passes, and sets row.Behind to those that are not.
func (r *runner) countBehind(ctx context.Context, row *Row) error {
	v := r.version
	if _, err := r.f.wait(ctx, time.Now().Add(r.o.Bound), func() bool { return r.f.allApplied(v) }); err != nil {
		return err
	}
	b := r.f.behind(v)
	row.Behind = &b
	return nil
}

// storeRestart kills every member, restarts them, pushes, and counts the
// watchers not on the new version.
func (r *runner) storeRestart(ctx context.Context, c *etcdtest.Cluster) (Row, error) {
	r.log("killing every member")
	for _, m := range c.Members {
		m.Kill()
	}
	if err := r.restart(ctx, c, c.Members...); err != nil {
		return Row{}, err
	}
	m, err := r.push(ctx, 95, false, nil)
	if err != nil {
		return Row{}, err
	}
	row := r.row(ScenarioStoreReturn, []measured{m})
	if err := r.countBehind(ctx, &row); err != nil {
		return Row{}, err
	}
	if l, ok := r.st.(lister); ok {
		n, err := r.listed(ctx, l)
		if err != nil {
			return Row{}, err
		}
		row.Listed = &n
	}
	return row, nil
}

// lister is a store that lists what the pods announced.
type lister interface {
	onVersion(ctx context.Context, v int64) (int, error)
}

// listed waits until the store lists every watcher on the latest
// version, as `hedge policy status` would, or the bound passes, and
// returns how many it lists so.
func (r *runner) listed(ctx context.Context, l lister) (int, error) {
	deadline := time.Now().Add(r.o.Bound)
	for {
		n, err := l.onVersion(ctx, r.version)
		if err != nil && time.Now().After(deadline) {
			return 0, err
		}
		if n == r.o.Watchers || time.Now().After(deadline) {
			r.log("the store lists %d of %d pods on version %d", n, r.o.Watchers, r.version)
			return n, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

func percentileFor(i int) int {
	if i%2 == 0 {
		return 90
	}
	return 95
}

// validDoc is a policy document of version v: hedging on for every
// Hedger, at the given percentile, with a kill switch until until if it
// is not zero.
func validDoc(service string, v int64, percentile int, until time.Time) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: on\n    percentile: %d\n", service, v, percentile)
	if !until.IsZero() {
		fmt.Fprintf(&b, "kill:\n  until: %s\n  reason: fleet bench\n", until.Format(time.RFC3339))
	}
	return []byte(b.String())
}

type invalidDoc struct {
	name string
	doc  []byte
}

// invalidDocs are documents every watcher must refuse, after version v
// was applied.
func invalidDocs(service string, v int64) []invalidDoc {
	return []invalidDoc{
		{"a mode that does not exist", fmt.Appendf(nil, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: sometimes\n", service, v+1)},
		{"a rollout above 1", fmt.Appendf(nil, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: on\n    rollout: 1.5\n", service, v+2)},
		{"an unknown field", fmt.Appendf(nil, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: on\n    delay: 5ms\n", service, v+3)},
		{"another service's document", fmt.Appendf(nil, "service: %s-other\nversion: %d\nhedgers:\n  \"*\":\n    mode: off\n", service, v+4)},
		{"an older version", fmt.Appendf(nil, "service: %s\nversion: %d\nhedgers:\n  \"*\":\n    mode: off\n", service, v-1)},
		{"not YAML nor JSON", []byte("service: [unclosed\n")},
	}
}

// quantile is the nearest-rank q-quantile of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
