package fleetbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
)

// WorkerEnv is the environment variable that turns a process into a
// worker: it holds the WorkerConfig as JSON. The hedge command, or a test
// binary, calls MaybeRunWorker (or RunWorkerFromEnv) first thing.
const WorkerEnv = "HEDGE_FLEETBENCH_WORKER"

// WorkerConfig configures one worker process: the watchers it runs and
// where they read the policy.
type WorkerConfig struct {
	// Proc numbers the worker process (0, 1, ...).
	Proc int `json:"proc"`
	// First and Count are the watchers it runs: First, First+1, ...
	First int `json:"first"`
	Count int `json:"count"`
	// Source is SourceEtcd or SourceFile.
	Source string `json:"source"`
	// Endpoints are the etcd members' client URLs.
	Endpoints []string `json:"endpoints,omitempty"`
	// File is the policy file, for the file source.
	File string `json:"file,omitempty"`
	// Service is the service whose policy the watchers follow.
	Service string `json:"service"`
	// Rate is the calls per second of each watcher's Hedger.
	Rate float64 `json:"rate"`
	// Jitter is each watcher's fleet.Options.Jitter.
	Jitter time.Duration `json:"jitter"`
	// Seed seeds the traffic.
	Seed uint64 `json:"seed"`
}

// The sources a run can watch.
const (
	SourceEtcd = "etcd"
	SourceFile = "file"
)

// hedgerName is the name each watcher registers its Hedger under.
const hedgerName = "backend"

// message is one line a worker writes to its stdout. Times are read from
// the wall clock (CLOCK_REALTIME), which every process on the machine
// shares, so that a worker's apply time and the parent's push time can be
// subtracted.
type message struct {
	// Kind is one of the kind constants.
	Kind string `json:"k"`
	// W is the watcher's number, across every worker.
	W int `json:"w"`
	// Version is the policy version applied (applied, stats).
	Version int64 `json:"v,omitempty"`
	// At is the event's time, Unix nanoseconds.
	At int64 `json:"t,omitempty"`
	// Hedges and Requests are the Hedger's counts (Stats) at the event.
	Hedges   int64 `json:"h,omitempty"`
	Requests int64 `json:"r,omitempty"`
	// Late counts the hedges of calls that began after the watcher
	// applied "off" (stats).
	Late int64 `json:"late,omitempty"`
	// Mode is the Hedger's mode after the event.
	Mode string `json:"m,omitempty"`
	// Reason says why a document was refused, or what failed.
	Reason string `json:"why,omitempty"`
}

// Message kinds.
const (
	kindReady     = "ready"     // every watcher of the worker runs
	kindApplied   = "applied"   // a watcher applied a document
	kindRefused   = "refused"   // a watcher refused a document
	kindStats     = "stats"     // a watcher's counts, asked for by the parent
	kindStatsDone = "statsdone" // every watcher's counts were sent
	kindError     = "error"     // the worker cannot go on
)

// Commands the parent writes to a worker's stdin, one a line. The worker
// ends when its stdin is closed.
const cmdStats = "stats"

// MaybeRunWorker runs a worker if WorkerEnv is set, and exits the process
// when it ends (status 0 when its stdin closes, 1 on failure); otherwise
// it returns at once.
func MaybeRunWorker(ctx context.Context) {
	if os.Getenv(WorkerEnv) == "" {
		return
	}
	if err := RunWorkerFromEnv(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbench worker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunWorkerFromEnv runs the worker WorkerEnv describes, reading commands
// from stdin and writing messages to stdout, until stdin closes or ctx
// ends.
func RunWorkerFromEnv(ctx context.Context) error {
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(WorkerEnv)), &cfg); err != nil {
		return fmt.Errorf("%s: %v", WorkerEnv, err)
	}
	return RunWorker(ctx, cfg, os.Stdin, os.Stdout)
}

// emitter writes messages, one a line, flushed at once.
type emitter struct {
	mu sync.Mutex
	w  *bufio.Writer
	e  *json.Encoder
}

func newEmitter(w io.Writer) *emitter {
	bw := bufio.NewWriter(w)
	return &emitter{w: bw, e: json.NewEncoder(bw)}
}

func (e *emitter) emit(m message) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.e.Encode(m)
	_ = e.w.Flush()
}

// member is one watcher of a worker, with its Hedger and its traffic.
type member struct {
	n       int
	h       *hedge.Hedger
	watcher fleetWatcher
	// offAt is when the watcher applied a document that turned its
	// Hedger off, Unix nanoseconds, or 0 while it is not off.
	offAt atomic.Int64
	// late counts the hedges of calls that began after offAt.
	late atomic.Int64
}

func (m *member) counts() (hedges, requests int64) {
	for _, s := range m.h.Stats() {
		hedges += s.Hedges
		requests += s.Requests
	}
	return hedges, requests
}

// RunWorker runs cfg's watchers, each with a Hedger under traffic, until
// commands ends or ctx ends. It writes a ready message once every watcher
// runs, and a message for each document applied or refused.
func RunWorker(ctx context.Context, cfg WorkerConfig, commands io.Reader, out io.Writer) error {
	if cfg.Count <= 0 {
		return errors.New("no watchers to run")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	em := newEmitter(out)
	var (
		wg      sync.WaitGroup
		members = make([]*member, cfg.Count)
		errs    = make(chan error, cfg.Count)
		cleanup []func()
	)
	defer func() {
		cancel()
		wg.Wait()
		for _, f := range cleanup {
			f()
		}
	}()
	for i := range members {
		n := cfg.First + i
		// The default Config, but for a warm-up delay, so that the
		// traffic hedges before the window holds 100 latencies.
		h, err := hedge.New(hedge.Config{Replicas: 2, Delay: hedge.Percentile{Warmup: 5 * time.Millisecond}})
		if err != nil {
			return err
		}
		m := &member{n: n, h: h}
		members[i] = m
		onEvent := func(e watchEvent) {
			hs, rs := m.counts()
			msg := message{W: n, At: e.at.UnixNano(), Version: e.version, Hedges: hs, Requests: rs, Mode: effectiveMode(h).String(), Reason: e.reason}
			switch {
			case e.applied:
				msg.Kind = kindApplied
				if effectiveMode(h) == hedge.Off {
					m.offAt.CompareAndSwap(0, msg.At)
				} else {
					m.offAt.Store(0)
				}
			case e.refused:
				msg.Kind = kindRefused
			default:
				return
			}
			em.emit(msg)
		}
		w, closeW, err := newWatcher(ctx, cfg, n, map[string]*hedge.Hedger{hedgerName: h}, onEvent)
		if err != nil {
			return fmt.Errorf("watcher %d: %w", n, err)
		}
		cleanup = append(cleanup, closeW)
		m.watcher = w
		wg.Go(func() {
			if err := w.Run(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("watcher %d: %w", n, err)
			}
		})
		wg.Go(func() { traffic(ctx, m, cfg.Rate, rand.New(rand.NewPCG(cfg.Seed, uint64(n)))) })
	}
	em.emit(message{Kind: kindReady, W: cfg.First})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(commands)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			em.emit(message{Kind: kindError, Reason: err.Error()})
			return err
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if line == cmdStats {
				for _, m := range members {
					hs, rs := m.counts()
					em.emit(message{Kind: kindStats, W: m.n, Version: m.watcher.Version(), At: time.Now().UnixNano(), Hedges: hs, Requests: rs, Late: m.late.Load(), Mode: effectiveMode(m.h).String()})
				}
				em.emit(message{Kind: kindStatsDone, W: cfg.First})
			}
		}
	}
}

// traffic calls m's Hedger at rate calls a second, as a Poisson process,
// until ctx ends, and waits for its calls. Each call waits a synthetic
// latency: 97% of them 0.5 to 1.5 ms, the others 30 to 50 ms, so that
// hedges fire. A hedge of a call that began after the watcher applied
// "off" is counted in m.late.
func traffic(ctx context.Context, m *member, rate float64, r *rand.Rand) {
	if rate <= 0 {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTimer(0)
	defer t.Stop()
	var mu sync.Mutex // r is not safe for concurrent use
	draw := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if r.Float64() < 0.03 {
			return 30*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond)))
		}
		return 500*time.Microsecond + time.Duration(r.Int64N(int64(time.Millisecond)))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wg.Go(func() {
			began := time.Now().UnixNano()
			_, _ = hedge.Do(ctx, m.h, "get", func(ctx context.Context, a hedge.Attempt) (struct{}, error) {
				if off := m.offAt.Load(); a.Index > 0 && off != 0 && began >= off {
					m.late.Add(1)
				}
				w := time.NewTimer(draw())
				defer w.Stop()
				select {
				case <-w.C:
					return struct{}{}, nil
				case <-ctx.Done():
					return struct{}{}, ctx.Err()
				}
			})
		})
		mu.Lock()
		gap := time.Duration(r.ExpFloat64() / rate * float64(time.Second))
		mu.Unlock()
		t.Reset(gap)
	}
}
