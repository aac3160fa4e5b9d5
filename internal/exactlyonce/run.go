package exactlyonce

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/hedgehttp"
)

// Config configures Run. Zero fields take the defaults given.
type Config struct {
	// Target is the store the replicas share.
	Target Target
	// Writes is how many keyed writes are sent. Zero means 10,000.
	Writes int
	// Replicas is how many replica processes serve them. Zero means 3.
	Replicas int
	// Workers is how many writes are in flight at once. Zero means 16.
	Workers int
	// Lease is the middleware's lease. Zero means one second.
	Lease time.Duration
	// HedgeDelay is when the next copy of a write goes. Zero means one
	// millisecond: copies go almost at once.
	HedgeDelay time.Duration
	// NoKill turns off killing a replica mid-run.
	NoKill bool
	// NoStalls turns off the replicas' stalls.
	NoStalls bool
	// Command returns the command that starts a replica: a program that
	// calls MaybeRunReplica first thing. Run adds ReplicaEnv to its
	// environment.
	Command func() *exec.Cmd
	// Progress, when set, is told how the run goes, about every tenth
	// of it.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if c.Writes == 0 {
		c.Writes = 10_000
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.Lease == 0 {
		c.Lease = time.Second
	}
	if c.HedgeDelay == 0 {
		c.HedgeDelay = time.Millisecond
	}
	return c
}

// Result is what Run found.
type Result struct {
	// Writes is how many keyed writes were sent; Committed how many keys
	// have exactly one order line.
	Writes, Committed int
	// Duplicates counts order lines beyond the first of a key; it must
	// be zero.
	Duplicates int
	// Missing counts keys with no order line; Mismatched keys whose
	// client got an answer other than the committed outcome; Unfinished
	// keys whose record is not a stored outcome (a claim left behind).
	// Each must be zero.
	Missing, Mismatched, Unfinished int
	// Failed counts writes that got no committed outcome even after
	// retries (each also counted in Missing or Mismatched).
	Failed int
	// Retries counts attempts that failed and were retried with the
	// same key (a refused copy, a killed replica, a lost claim).
	Retries int
	// ClientReplays counts writes whose winning answer was a replay.
	ClientReplays int
	// Hedges counts the hedge copies sent.
	Hedges int
	// Stats sums the replicas' counters (those of a killed replica's
	// first life are lost).
	Stats Stats
	// Killed reports that a replica was killed with SIGKILL and
	// restarted.
	Killed bool
	// Latency is the client-observed latency of the writes, retries
	// included.
	Latency Percentiles
	// Elapsed is the wall-clock time of the writes.
	Elapsed time.Duration
}

// OK reports whether every write committed exactly once and every client
// got the committed outcome.
func (r Result) OK() bool {
	return r.Duplicates == 0 && r.Missing == 0 && r.Mismatched == 0 && r.Unfinished == 0 && r.Failed == 0 && r.Committed == r.Writes
}

// String gives every count on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d writes: %d committed once, %d duplicates, %d missing, %d mismatched, %d unfinished, %d failed; %d retries, %d hedges, %d client replays, replicas: %d requests, %d replays served, %d commits, %d lost claims; killed a replica: %v; latency %v; %v",
		r.Writes, r.Committed, r.Duplicates, r.Missing, r.Mismatched, r.Unfinished, r.Failed, r.Retries, r.Hedges, r.ClientReplays,
		r.Stats.Requests, r.Stats.Replays, r.Stats.Commits, r.Stats.LostClaims, r.Killed, r.Latency, r.Elapsed.Round(time.Millisecond))
}

// Percentiles summarises latencies.
type Percentiles struct {
	P50, P99 time.Duration
}

// String gives both percentiles.
func (p Percentiles) String() string {
	return fmt.Sprintf("p50 %v p99 %v", p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond))
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return Percentiles{P50: at(0.50), P99: at(0.99)}
}

// replica is a running replica process.
type replica struct {
	cfg    ReplicaConfig
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *strings.Builder
	mu     sync.Mutex
}

func startReplica(ctx context.Context, command func() *exec.Cmd, cfg ReplicaConfig) (*replica, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := command()
	cmd.Env = append(os.Environ(), ReplicaEnv+"="+string(js))
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r := &replica{cfg: cfg, cmd: cmd, exited: make(chan struct{}), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{mu: &r.mu, w: r.stderr}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exactlyonce: starting replica %d: %w", cfg.Index, err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.OnceFunc(func() { close(ready) })
		for sc.Scan() {
			if sc.Text() == "ready" {
				once()
			}
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(r.exited)
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case <-ready:
		return r, nil
	case <-r.exited:
		return nil, fmt.Errorf("exactlyonce: replica %d exited before it was ready: %s", cfg.Index, r.log())
	case <-t.C:
	case <-ctx.Done():
	}
	r.kill()
	return nil, fmt.Errorf("exactlyonce: replica %d was not ready within a minute: %s", cfg.Index, r.log())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *replica) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.TrimSpace(r.stderr.String())
}

// kill sends SIGKILL and waits until the process was reaped.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// stop asks the replica to shut down, and kills it after ten seconds.
func (r *replica) stop() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-r.exited:
	case <-t.C:
		r.kill()
	}
}

func (r *replica) stats(ctx context.Context, c *http.Client) (Stats, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+r.cfg.Addr+"/stats", nil)
	resp, err := c.Do(req)
	if err != nil {
		return Stats{}, err
	}
	defer resp.Body.Close()
	var s Stats
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Run sends cfg.Writes hedged keyed writes (append an order line, not
// idempotent) through hedgehttp, with copies going after HedgeDelay and no
// budget, to cfg.Replicas replica processes sharing one store, while the
// replicas stall at random and, unless NoKill, one is killed with SIGKILL
// a third of the way through and restarted at half way. A write whose
// answer is not the committed outcome (a refused copy, all copies failed)
// is retried with the same key, as a client does. Afterwards it counts
// the order lines per key in the store and compares each key's stored
// outcome with what its client got.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Command == nil {
		return Result{}, errors.New("exactlyonce: Config.Command is nil: give the command that starts a replica")
	}
	b, err := open(ctx, cfg.Target)
	if err != nil {
		return Result{}, err
	}
	defer b.close()
	if err := b.reset(ctx); err != nil {
		return Result{}, fmt.Errorf("exactlyonce: clearing the store: %w", err)
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}

	rcfgs := make([]ReplicaConfig, cfg.Replicas)
	urls := make([]string, cfg.Replicas)
	for i := range rcfgs {
		addr, err := freeAddr()
		if err != nil {
			return Result{}, err
		}
		rcfgs[i] = ReplicaConfig{Target: cfg.Target, Index: i, Addr: addr, Lease: cfg.Lease, PollInterval: 10 * time.Millisecond}
		if !cfg.NoStalls {
			rcfgs[i].StallBefore, rcfgs[i].StallInside = 0.02, 0.01
			rcfgs[i].StallMin, rcfgs[i].StallMax = 5*time.Millisecond, 50*time.Millisecond
		}
		urls[i] = "http://" + addr
	}
	var mu sync.Mutex // guards replicas
	replicas := make([]*replica, cfg.Replicas)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range replicas {
			if r != nil {
				r.stop()
			}
		}
	}()
	for i := range replicas {
		r, err := startReplica(ctx, cfg.Command, rcfgs[i])
		if err != nil {
			return Result{}, err
		}
		mu.Lock()
		replicas[i] = r
		mu.Unlock()
	}
	progress("%s: %d replicas ready at %s", cfg.Target.Kind, cfg.Replicas, strings.Join(urls, " "))

	h, err := hedge.New(hedge.Config{
		Replicas:    cfg.Replicas,
		Delay:       hedge.Fixed(cfg.HedgeDelay),
		NoBudget:    true,
		MaxAttempts: min(cfg.Replicas, 3),
		// Copies go to busy replicas too: the point is overlapping
		// copies of every write.
		MaxReplicaLoad: hedge.AnyReplicaLoad,
		// Nor do hedges stop for not winning: with deduplication a hedge
		// that arrives second waits for the first copy's outcome.
		PayoffWinRate: -1,
	})
	if err != nil {
		return Result{}, err
	}
	base := &http.Transport{MaxIdleConnsPerHost: 4 * cfg.Workers, IdleConnTimeout: time.Minute}
	defer base.CloseIdleConnections()
	tr, err := hedgehttp.New(base, h, hedgehttp.Config{
		Replicas:         urls,
		HedgeKeyedWrites: true,
		Route:            func(*http.Request) string { return "/orders" },
	})
	if err != nil {
		return Result{}, err
	}
	client := &http.Client{Transport: tr}

	res := Result{Writes: cfg.Writes}
	keys := make([]string, cfg.Writes)
	bodies := make([]string, cfg.Writes)
	failed := make([]bool, cfg.Writes)
	lat := make([]time.Duration, cfg.Writes)
	var retries, replays, done atomic.Int64
	next := make(chan int)
	killErr := make(chan error, 1)
	killCtx, stopKiller := context.WithCancel(ctx)
	var killer sync.WaitGroup
	if !cfg.NoKill && cfg.Replicas > 1 {
		killer.Go(func() {
			killErr <- killAndRestart(killCtx, cfg, &done, &mu, replicas, rcfgs, progress)
		})
	} else {
		killErr <- nil
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for i := range next {
				keys[i] = hedge.NewIdempotencyKey()
				t0 := time.Now()
				body, replayed, n, ok := write(ctx, client, urls[0], keys[i], i)
				lat[i] = time.Since(t0)
				bodies[i], failed[i] = body, !ok
				retries.Add(int64(n))
				if replayed {
					replays.Add(1)
				}
				if d := done.Add(1); cfg.Progress != nil && d%int64(max(cfg.Writes/10, 1)) == 0 {
					progress("%s: %d/%d writes, %d retries, %v", cfg.Target.Kind, d, cfg.Writes, retries.Load(), time.Since(start).Round(time.Millisecond))
				}
			}
		})
	}
	for i := range cfg.Writes {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopKiller()
	killer.Wait()
	if err := <-killErr; err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res.Killed = !cfg.NoKill && cfg.Replicas > 1
	res.Retries, res.ClientReplays = int(retries.Load()), int(replays.Load())
	res.Latency = percentiles(lat)
	for _, st := range h.Stats() {
		res.Hedges += int(st.Hedges)
	}

	statsClient := &http.Client{Timeout: 10 * time.Second}
	mu.Lock()
	for _, r := range replicas {
		s, err := r.stats(ctx, statsClient)
		if err != nil {
			mu.Unlock()
			return Result{}, fmt.Errorf("exactlyonce: stats of replica %d: %w", r.cfg.Index, err)
		}
		res.Stats.Requests += s.Requests
		res.Stats.Replays += s.Replays
		res.Stats.Commits += s.Commits
		res.Stats.LostClaims += s.LostClaims
	}
	mu.Unlock()
	statsClient.CloseIdleConnections()

	lines, err := b.lines(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("exactlyonce: counting order lines: %w", err)
	}
	for i, k := range keys {
		if failed[i] {
			res.Failed++
		}
		switch n := lines[k]; {
		case n == 0:
			res.Missing++
		case n == 1:
			res.Committed++
		default:
			res.Duplicates += n - 1
		}
		delete(lines, k)
		// The clients send no credentials: the records are under the
		// default scope of such requests.
		rec, err := b.store.Get(ctx, dedup.ScopedKey(dedup.CredentialScope(nil, nil, nil), k))
		switch {
		case errors.Is(err, dedup.ErrNotFound):
			res.Unfinished++
			continue
		case err != nil:
			return Result{}, fmt.Errorf("exactlyonce: reading the record of %s: %w", k, err)
		case !rec.Done:
			res.Unfinished++
			continue
		}
		if string(rec.Outcome.Body) != bodies[i] {
			res.Mismatched++
		}
	}
	for _, n := range lines {
		res.Duplicates += n // lines of keys no client sent
	}
	progress("%s: %v", cfg.Target.Kind, res)
	return res, nil
}

// write sends one keyed write until it gets the committed outcome (201),
// retrying with the same key; it gives up after a minute. It returns the
// answer's body, whether it was a replay, and how many attempts failed.
func write(ctx context.Context, client *http.Client, url, key string, i int) (body string, replayed bool, retries int, ok bool) {
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(actx, "POST", url+"/orders", strings.NewReader(fmt.Sprintf(`{"item":%d,"qty":1}`, i)))
		req.Header.Set(dedup.HeaderKey, key)
		resp, err := client.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusCreated {
				cancel()
				return string(b), resp.Header.Get(dedup.HeaderReplayed) == "true", attempt, true
			}
		}
		cancel()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", false, attempt + 1, false
		}
		pause := time.NewTimer(min(time.Duration(attempt+1)*5*time.Millisecond, 100*time.Millisecond))
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
		}
	}
}

// killAndRestart kills replica 1 with SIGKILL once a third of the writes
// are done, and restarts it on the same address at half way.
func killAndRestart(ctx context.Context, cfg Config, done *atomic.Int64, mu *sync.Mutex, replicas []*replica, rcfgs []ReplicaConfig, progress func(string, ...any)) error {
	waitFor := func(n int) bool {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for done.Load() < int64(n) {
			select {
			case <-t.C:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	if !waitFor(cfg.Writes / 3) {
		return nil
	}
	mu.Lock()
	victim := replicas[1]
	victim.kill()
	replicas[1] = nil
	mu.Unlock()
	progress("%s: replica 1 (pid %d) killed with SIGKILL after %d writes", cfg.Target.Kind, victim.cmd.Process.Pid, done.Load())
	waitFor(cfg.Writes / 2) // if the writes end first, restart it anyway
	r, err := startReplica(context.WithoutCancel(ctx), cfg.Command, rcfgs[1])
	if err != nil {
		return err
	}
	mu.Lock()
	replicas[1] = r
	mu.Unlock()
	progress("%s: replica 1 restarted (pid %d) after %d writes", cfg.Target.Kind, r.cmd.Process.Pid, done.Load())
	return nil
}

// Overhead is the latency the middleware adds to the same handler.
type Overhead struct {
	// Plain is the handler's write without the middleware; Dedup the
	// same write through the middleware, committed with the store's
	// fenced Commit.
	Plain, Dedup Percentiles
}

// String gives both distributions and the difference.
func (o Overhead) String() string {
	return fmt.Sprintf("without middleware %v; with middleware %v; added p50 %v, p99 %v",
		o.Plain, o.Dedup, (o.Dedup.P50 - o.Plain.P50).Round(time.Microsecond), (o.Dedup.P99 - o.Plain.P99).Round(time.Microsecond))
}

// MeasureOverhead sends n sequential writes to the order handler without
// the middleware and n with it, alternating, in this process, against the
// target's store, and returns their latencies.
func MeasureOverhead(ctx context.Context, t Target, n int) (Overhead, error) {
	b, err := open(ctx, t)
	if err != nil {
		return Overhead{}, err
	}
	defer b.close()
	h, _, err := newReplicaHandler(b, ReplicaConfig{Target: t, Lease: 10 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return Overhead{}, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()
	send := func(path, key string) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(`{"item":1,"qty":1}`))
		req.Header.Set(dedup.HeaderKey, key)
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("exactlyonce: %s answered %s", path, resp.Status)
		}
		return d, nil
	}
	var plain, dd []time.Duration
	for i := range n {
		for _, path := range []string{"/plain", "/orders"} {
			d, err := send(path, hedge.NewIdempotencyKey())
			if err != nil {
				return Overhead{}, err
			}
			if i < n/10 {
				continue // warm-up
			}
			if path == "/plain" {
				plain = append(plain, d)
			} else {
				dd = append(dd, d)
			}
		}
	}
	return Overhead{Plain: percentiles(plain), Dedup: percentiles(dd)}, nil
}
