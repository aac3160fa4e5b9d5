package exactlyonce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/dedup"
)

// ReplicaEnv is the environment variable that turns a process into a
// replica: it holds the ReplicaConfig as JSON. A test binary's TestMain,
// or the hedge command, calls MaybeRunReplica first thing.
const ReplicaEnv = "HEDGE_EXACTLYONCE_REPLICA"

// ReplicaConfig configures one replica process.
type ReplicaConfig struct {
	// Target is the shared store.
	Target Target
	// Index numbers the replica (0, 1, ...), for its answers.
	Index int
	// Addr is the loopback address to listen on.
	Addr string
	// Lease and PollInterval configure the middleware.
	Lease, PollInterval time.Duration
	// StallBefore is the probability that a request stalls before it
	// reaches the middleware (queued behind a slow neighbour), and
	// StallInside that it stalls inside the handler, holding the claim.
	StallBefore, StallInside float64
	// StallMin and StallMax bound a stall's length, drawn uniformly.
	StallMin, StallMax time.Duration
}

// MaybeRunReplica runs a replica if ReplicaEnv is set, and exits the
// process when the replica ends (status 0 after SIGINT or SIGTERM, 1 on
// failure); otherwise it returns at once.
func MaybeRunReplica(ctx context.Context) {
	v := os.Getenv(ReplicaEnv)
	if v == "" {
		return
	}
	var cfg ReplicaConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "exactlyonce replica: %s: %v\n", ReplicaEnv, err)
		os.Exit(1)
	}
	if err := RunReplica(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "exactlyonce replica %d: %v\n", cfg.Index, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Stats is what a replica reports at GET /stats.
type Stats struct {
	// Requests counts the keyed writes that reached the replica.
	Requests int64
	// Replays counts the answers the middleware replayed.
	Replays int64
	// Commits counts the order lines this replica committed.
	Commits int64
	// LostClaims counts commits refused because the claim was lost.
	LostClaims int64
}

// RunReplica serves the order service on cfg.Addr until ctx ends, and
// writes "ready" on a line of its own to ready once it listens:
//
//	POST /orders  append an order line, through the dedup middleware,
//	              committed with the store's fenced Commit
//	POST /plain   the same write, without the middleware (a baseline)
//	GET  /stats   Stats as JSON
func RunReplica(ctx context.Context, cfg ReplicaConfig, ready io.Writer) error {
	b, err := open(ctx, cfg.Target)
	if err != nil {
		return err
	}
	defer b.close()
	h, _, err := newReplicaHandler(b, cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintln(ready, "ready")
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	return err
}

// replicaStats are the counters behind Stats.
type replicaStats struct {
	requests, replays, commits, lost atomic.Int64
}

func newReplicaHandler(b *backend, cfg ReplicaConfig) (http.Handler, *replicaStats, error) {
	st := &replicaStats{}
	stall := func(p float64, ctx context.Context) {
		if p <= 0 || rand.Float64() >= p {
			return
		}
		d := cfg.StallMin
		if span := cfg.StallMax - cfg.StallMin; span > 0 {
			d += rand.N(span)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cl, ok := dedup.ClaimFromContext(r.Context())
		if !ok {
			http.Error(w, "an Idempotency-Key header is required", http.StatusBadRequest)
			return
		}
		stall(cfg.StallInside, r.Context())
		// The order line is the client's key; cl.Key is that key in its
		// scope (a hash of the request's credentials).
		key, _ := dedup.KeyFromHeader(r.Header, 0)
		line := fmt.Sprintf("order line %s committed by replica %d", key, cfg.Index)
		// Once it holds the claim, the write finishes even if this copy's
		// client leaves: a commit cut short only makes the next copy wait.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		out, err := b.commit(cctx, cl, key, line, dedup.DefaultTTL)
		cancel()
		switch {
		case errors.Is(err, dedup.ErrLostClaim):
			st.lost.Add(1)
			// The middleware finds the claim lost too, discards this
			// answer, and replays the committed one.
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		st.commits.Add(1)
		for k, vs := range out.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(out.Status)
		w.Write(out.Body)
	})
	mw, err := dedup.New(orders, dedup.Config{
		Store:   b.store,
		Options: dedup.Options{Lease: cfg.Lease, PollInterval: cfg.PollInterval},
	})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		st.requests.Add(1)
		stall(cfg.StallBefore, r.Context())
		mw.ServeHTTP(w, r)
		if w.Header().Get(dedup.HeaderReplayed) == "true" {
			st.replays.Add(1)
		}
	})
	mux.HandleFunc("POST /plain", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(dedup.HeaderKey)
		line := fmt.Sprintf("order line %s committed by replica %d", key, cfg.Index)
		if err := b.plain(r.Context(), key, line); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		io.WriteString(w, line)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(Stats{
			Requests: st.requests.Load(), Replays: st.replays.Load(),
			Commits: st.commits.Load(), LostClaims: st.lost.Load(),
		})
	})
	return mux, st, nil
}
