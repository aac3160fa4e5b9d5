package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/tied"
)

// TiedHTTPBackend is a TiedBackend of net/http servers on loopback, each
// behind tied.Server's middleware, serving GET /work?us=N: the handler
// holds its worker for N microseconds (returning early if its request is
// cancelled, as a loser does), and waits out the replica's stalls before
// and after. Claims between the servers reach the middleware, not the
// stalled handler.
type TiedHTTPBackend struct {
	urls     []string
	servers  []*http.Server
	tieds    []*tied.Server
	limiters []*spare.Limiter // with TiedBackendOptions.Spare
	gates    []*Gate
	received atomic.Int64
	wg       sync.WaitGroup
	once     sync.Once
	err      error
}

// StartTiedHTTP starts the replicas of o on free loopback ports.
func StartTiedHTTP(o TiedBackendOptions) (TiedBackend, error) {
	b := &TiedHTTPBackend{}
	var lns []net.Listener
	for range o.Replicas {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("bench: tied HTTP replica: %w", err)
		}
		lns = append(lns, l)
		b.urls = append(b.urls, "http://"+l.Addr().String())
	}
	for i, l := range lns {
		var peers []string
		for j, u := range b.urls {
			if j != i {
				peers = append(peers, u)
			}
		}
		ts, err := tied.NewServer(tied.Config{Workers: o.TiedWorkers(), MaxQueue: o.MaxQueue, Secret: o.Secret, Peers: peers, ClaimAhead: o.ClaimAhead})
		var lim *spare.Limiter
		if err == nil {
			lim, err = o.NewLimiter()
		}
		if err != nil {
			for _, l := range lns[i:] {
				l.Close()
			}
			_ = b.Close()
			return nil, err
		}
		g := &Gate{}
		mw := ts.Handler(workHandler(g))
		if lim != nil {
			b.limiters = append(b.limiters, lim)
			mw = spare.Handler(lim, mw)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !ts.ServesClaims(r.URL.Path) { // claims (at either path name) are not requests
					b.received.Add(1)
				}
				mw.ServeHTTP(w, r)
			}),
			ReadHeaderTimeout: 10 * time.Second,
		}
		b.tieds = append(b.tieds, ts)
		b.gates = append(b.gates, g)
		b.servers = append(b.servers, srv)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			_ = srv.Serve(l)
		}()
	}
	return b, nil
}

// workHandler holds its worker for the request's "us" microseconds.
func workHandler(g *Gate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		us, err := strconv.Atoi(r.URL.Query().Get("us"))
		if err != nil || us < 0 {
			http.Error(w, "us must be a number of microseconds", http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		g.Wait(ctx)
		Work(ctx, g.Scale(time.Duration(us)*time.Microsecond))
		g.Wait(ctx)
		w.Write([]byte("ok"))
	})
}

// Work holds the caller for d, or until ctx ends.
func Work(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Name returns "http".
func (b *TiedHTTPBackend) Name() string { return "http" }

// Servers returns the replicas' tied.Servers.
func (b *TiedHTTPBackend) Servers() []*tied.Server { return b.tieds }

// Limiters returns the replicas' spare.Limiters, with
// TiedBackendOptions.Spare.
func (b *TiedHTTPBackend) Limiters() []*spare.Limiter { return b.limiters }

// Received counts the requests that reached the replicas.
func (b *TiedHTTPBackend) Received() int64 { return b.received.Load() }

// Stall stalls replica i for d.
func (b *TiedHTTPBackend) Stall(ctx context.Context, i int, d time.Duration) error {
	return b.gates[i].Stall(ctx, d)
}

// NewCaller returns a caller for config "none", DefaultStrategy,
// SpareConfig, "tied" or TiedSymmetricConfig.
func (b *TiedHTTPBackend) NewCaller(config string, gap time.Duration) (func(context.Context, int, time.Duration) error, func(), error) {
	hc, form, err := tiedClientConfig(config, len(b.urls))
	if err != nil {
		return nil, nil, err
	}
	h, err := hedge.New(hc)
	if err != nil {
		return nil, nil, err
	}
	cfg := hedgehttp.Config{Replicas: b.urls}
	if form != nil {
		cfg.Tied = &hedgehttp.TiedConfig{Gap: gap, Form: *form}
	}
	base, _ := NewCountingTransport()
	t, err := hedgehttp.New(base, h, cfg)
	if err != nil {
		return nil, nil, err
	}
	call := func(ctx context.Context, i int, size time.Duration) error {
		return HTTPGet(ctx, t, b.urls[0]+"/work?us="+strconv.FormatInt(size.Microseconds(), 10))
	}
	return call, t.CloseIdleConnections, nil
}

// TiedSymmetricConfig is the tied comparison's configuration of tied
// requests in their symmetric form (tied.FormSymmetric); "tied" is the
// default form, tied.FormSpare.
const TiedSymmetricConfig = "tied-symmetric"

// tiedClientConfig returns the hedge.Config of a tied comparison's
// configuration, and its tied form (nil: not tied).
func tiedClientConfig(config string, replicas int) (hedge.Config, *tied.Form, error) {
	form := func(f tied.Form) *tied.Form { return &f }
	switch config {
	case "none":
		return hedge.Config{Replicas: replicas, MaxAttempts: 1}, nil, nil
	case DefaultStrategy, SpareConfig:
		return hedge.Config{Replicas: replicas}, nil, nil
	case "tied":
		return hedge.Config{Replicas: replicas, MaxAttempts: 1}, form(tied.FormSpare), nil
	case TiedSymmetricConfig:
		return hedge.Config{Replicas: replicas, MaxAttempts: 1}, form(tied.FormSymmetric), nil
	}
	return hedge.Config{}, nil, fmt.Errorf("bench: tied comparison: unknown configuration %q: use none, %s, %s, tied or %s", config, DefaultStrategy, SpareConfig, TiedSymmetricConfig)
}

// TiedClientConfig is tiedClientConfig for other packages' backends.
func TiedClientConfig(config string, replicas int) (hedge.Config, *tied.Form, error) {
	return tiedClientConfig(config, replicas)
}

// Close ends stalls, stops the servers and their tied.Servers, and waits
// for their goroutines.
func (b *TiedHTTPBackend) Close() error {
	b.once.Do(func() {
		for _, g := range b.gates {
			g.Close()
		}
		var errs []error
		for _, s := range b.servers {
			errs = append(errs, s.Close())
		}
		b.wg.Wait()
		for _, t := range b.tieds {
			errs = append(errs, t.Close())
		}
		b.err = errors.Join(errs...)
	})
	return b.err
}
