package fleetbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configures Run. Defaults gives the full run's values.
type Options struct {
	// Watchers is how many watchers run, each with its own store client,
	// its own Hedger and its own traffic.
	Watchers int `json:"watchers"`
	// Procs is how many worker processes share the watchers.
	Procs int `json:"procs"`
	// Rate is the calls per second of each watcher's Hedger.
	Rate float64 `json:"rate"`
	// Pushes is how many pushes each scenario with a push makes.
	Pushes int `json:"pushes"`
	// Jitter is each watcher's fleet.Options.Jitter: the bound of its
	// random delay before it applies a document.
	Jitter time.Duration `json:"jitter"`
	// Hold is how long the traffic runs after every watcher applied the
	// kill switch before its hedges are counted, and before it, to count
	// the hedges sent while hedging is on.
	Hold time.Duration `json:"hold"`
	// Bound is how long a push may take to reach every watcher. A
	// watcher that has not applied it by then is a miss; the run goes on.
	// It is a bound for a broken system, not a goal.
	Bound time.Duration `json:"bound"`
	// Attempt is how long one push may wait for the store's answer
	// before it is sent again. Zero waits as long as the store takes,
	// within Bound.
	Attempt time.Duration `json:"attempt,omitempty"`
	// Sources are the sources measured: SourceEtcd, SourceFile.
	Sources []string `json:"sources"`
	// Seed seeds the traffic.
	Seed uint64 `json:"seed"`
	// Command makes the command of a worker process: the running binary,
	// with arguments that lead it to call MaybeRunWorker. Run adds
	// WorkerEnv to its environment.
	Command func() *exec.Cmd `json:"-"`
	// Progress receives a line for each step. Nil discards them.
	Progress io.Writer `json:"-"`
}

// Defaults returns the full run's options: 200 watchers in 4 processes,
// 5 pushes a scenario, both sources.
func (Options) Defaults() Options {
	return Options{
		Watchers: 200,
		Procs:    4,
		Rate:     10,
		Pushes:   5,
		Hold:     3 * time.Second,
		Bound:    30 * time.Second,
		Sources:  []string{SourceEtcd, SourceFile},
		Seed:     1,
	}
}

// Quick returns o with the quick form's values: one push a scenario and a
// shorter hold, for a run under two minutes.
func (o Options) Quick() Options {
	o.Pushes = 1
	o.Hold = time.Second
	return o
}

// Validate reports every mistake in o.
func (o Options) Validate() error {
	var errs []error
	if o.Watchers < 1 {
		errs = append(errs, fmt.Errorf("watchers = %d: run at least one", o.Watchers))
	}
	if o.Procs < 1 || o.Procs > o.Watchers {
		errs = append(errs, fmt.Errorf("procs = %d: use 1 to the number of watchers (%d)", o.Procs, o.Watchers))
	}
	if o.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate = %v: use 0 (no traffic) or more", o.Rate))
	}
	if o.Pushes < 1 {
		errs = append(errs, fmt.Errorf("pushes = %d: use 1 or more", o.Pushes))
	}
	if o.Jitter < 0 || o.Hold < 0 || o.Bound <= 0 || o.Attempt < 0 {
		errs = append(errs, fmt.Errorf("jitter %v, hold %v, bound %v, attempt %v: none may be negative, and bound must be positive", o.Jitter, o.Hold, o.Bound, o.Attempt))
	}
	if len(o.Sources) == 0 {
		errs = append(errs, errors.New("no source: name etcd, file or both"))
	}
	for _, s := range o.Sources {
		if s != SourceEtcd && s != SourceFile {
			errs = append(errs, fmt.Errorf("source %q: use etcd or file", s))
		}
	}
	if o.Command == nil {
		errs = append(errs, errors.New("no command to start workers with"))
	}
	return errors.Join(errs...)
}

// proc is a running worker process.
type proc struct {
	cfg    WorkerConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	stderr strings.Builder
	done   chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stderr.Len() < 64<<10 {
		p.stderr.Write(b)
	}
	return len(b), nil
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.stderr.String())
}

// pods is the parent's view of the watchers: what each applied and
// refused, from their messages.
type pods struct {
	n     int
	procs []*proc

	mu      sync.Mutex
	changed chan struct{} // a message arrived; buffered, one slot
	applied []map[int64]message
	latest  []int64 // the version each watcher applied last
	refused []int
	stats   []message
	ready   int // ready messages
	done    int // statsdone messages since the last stats request
	applies int // applied messages, in total
	failed  error
}

func newPods(n int) *pods {
	f := &pods{
		n:       n,
		changed: make(chan struct{}, 1),
		applied: make([]map[int64]message, n),
		latest:  make([]int64, n),
		refused: make([]int, n),
		stats:   make([]message, n),
	}
	for i := range f.applied {
		f.applied[i] = map[int64]message{}
	}
	return f
}

func (f *pods) record(m message) {
	f.mu.Lock()
	switch m.Kind {
	case kindApplied:
		if m.W >= 0 && m.W < f.n {
			if _, ok := f.applied[m.W][m.Version]; !ok {
				f.applied[m.W][m.Version] = m
			}
			f.latest[m.W] = m.Version
			f.applies++
		}
	case kindRefused:
		if m.W >= 0 && m.W < f.n {
			f.refused[m.W]++
		}
	case kindStats:
		if m.W >= 0 && m.W < f.n {
			f.stats[m.W] = m
		}
	case kindReady:
		f.ready++
	case kindStatsDone:
		f.done++
	case kindError:
		if f.failed == nil {
			f.failed = fmt.Errorf("a worker failed: %s", m.Reason)
		}
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *pods) fail(err error) {
	f.mu.Lock()
	if f.failed == nil {
		f.failed = err
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// wait calls cond under the lock until it returns true, a worker fails,
// ctx ends or the deadline passes; it reports whether cond held.
func (f *pods) wait(ctx context.Context, deadline time.Time, cond func() bool) (bool, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		f.mu.Lock()
		ok, failed := cond(), f.failed
		f.mu.Unlock()
		if ok {
			return true, nil
		}
		if failed != nil {
			return false, failed
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
			f.mu.Lock()
			ok = cond()
			f.mu.Unlock()
			return ok, nil
		case <-f.changed:
		}
	}
}

// start starts the worker processes and returns once every watcher runs.
func start(ctx context.Context, o Options, base WorkerConfig) (*pods, error) {
	f := newPods(o.Watchers)
	per, extra := o.Watchers/o.Procs, o.Watchers%o.Procs
	first := 0
	for i := range o.Procs {
		cfg := base
		cfg.Proc, cfg.First, cfg.Count = i, first, per
		if i < extra {
			cfg.Count++
		}
		first += cfg.Count
		js, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		cmd := o.Command()
		cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
		cmd.SysProcAttr = sysProcAttr()
		p := &proc{cfg: cfg, cmd: cmd, done: make(chan struct{})}
		cmd.Stderr = p
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			f.stop()
			return nil, fmt.Errorf("starting worker %d: %w", i, err)
		}
		f.procs = append(f.procs, p)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				var m message
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					f.fail(fmt.Errorf("worker %d wrote %q: %v", i, sc.Text(), err))
					continue
				}
				f.record(m)
			}
			err := cmd.Wait()
			close(p.done)
			if ctx.Err() == nil {
				f.fail(fmt.Errorf("worker %d exited (%v): %s", i, err, p.log()))
			}
		}()
	}
	ok, err := f.wait(ctx, time.Now().Add(2*time.Minute), func() bool { return f.ready >= o.Procs })
	if err == nil && !ok {
		err = fmt.Errorf("the workers did not start within 2 minutes")
	}
	if err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// stop ends every worker: it closes their stdin, then kills those still
// running after ten seconds, and waits until they were reaped.
func (f *pods) stop() {
	f.mu.Lock()
	if f.failed == nil {
		f.failed = errStopped
	}
	f.mu.Unlock()
	for _, p := range f.procs {
		_ = p.stdin.Close()
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	for _, p := range f.procs {
		select {
		case <-p.done:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

var errStopped = errors.New("the workers were stopped")

// snapshot asks every worker for its watchers' counts and returns them.
func (f *pods) snapshot(ctx context.Context) ([]message, error) {
	f.mu.Lock()
	f.done = 0
	f.mu.Unlock()
	for _, p := range f.procs {
		if _, err := io.WriteString(p.stdin, cmdStats+"\n"); err != nil {
			return nil, fmt.Errorf("asking worker %d for its counts: %w", p.cfg.Proc, err)
		}
	}
	ok, err := f.wait(ctx, time.Now().Add(time.Minute), func() bool { return f.done >= len(f.procs) })
	if err == nil && !ok {
		err = errors.New("the workers did not send their counts within a minute")
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stats), nil
}

// appliedTimes returns, for each watcher that applied version v, the time
// from t0 until it did, and how many have not.
func (f *pods) appliedTimes(v int64, t0 time.Time) (times []time.Duration, missing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.n {
		m, ok := f.applied[w][v]
		if !ok {
			missing++
			continue
		}
		times = append(times, time.Duration(m.At-t0.UnixNano()))
	}
	return times, missing
}

// allApplied reports whether every watcher applied v; call it under f.mu.
func (f *pods) allApplied(v int64) bool {
	for w := range f.n {
		if _, ok := f.applied[w][v]; !ok {
			return false
		}
	}
	return true
}

// behind counts the watchers whose last applied version is not v.
func (f *pods) behind(v int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.latest {
		if l != v {
			n++
		}
	}
	return n
}

// workDir makes a directory for a run's files.
func workDir() (string, error) {
	return os.MkdirTemp("", "hedge-fleetbench-")
}

// policyFile is the file name the file source watches in the
// ConfigMap-style directory.
const policyFile = "policy.yaml"

func filePath(dir string) string { return filepath.Join(dir, "policy", policyFile) }
