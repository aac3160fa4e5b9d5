// Command fleetpod is the sample service of the README's "Run a fleet"
// section: a small HTTP service whose client Hedger is steered by a
// fleet.Watcher over etcd, with its metrics on /metrics (hedgeprom).
//
//	go run ./examples/fleetpod --etcd http://127.0.0.1:2379 --addr 127.0.0.1:9101 --instance pod-1
//
// GET /item reads from the service's dependency, "inventory", through
// hedgehttp and a Hedger named "inventory". The inventory is two replicas
// in the same process, each stalling 50 ms on one request in thirty. The
// pod calls its own /item --rate times a second, so that its metrics move
// without a load generator.
//
// The pod follows the policy document of --service in etcd, applies it
// to its Hedger, and keeps a key with what it runs, bound to a lease:
// `hedge policy status` lists the pods. Without etcd it runs on the
// Config in its code and says so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/hedgeprom"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "fleetpod:", err)
		os.Exit(1)
	}
}

// run runs the pod until ctx ends. It sends the address it serves on to
// ready, if not nil, once it serves.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("fleetpod", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:9101", "address to serve /item and /metrics on")
	endpoints := fs.String("etcd", "http://127.0.0.1:2379", "etcd client URLs, comma-separated")
	service := fs.String("service", "checkout", "the service whose policy this pod follows")
	instance := fs.String("instance", "", "this pod's name, unique in the fleet (default: pod-PORT)")
	rate := fs.Float64("rate", 50, "calls a second the pod makes to its own /item")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *instance == "" {
		_, port, _ := net.SplitHostPort(*addr)
		*instance = "pod-" + port
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	// The dependency: two replicas in this process.
	replicas, closeReplicas, err := startInventory()
	if err != nil {
		return err
	}
	defer closeReplicas()

	// The client: a Hedger, the Config in code, steered by the fleet.
	h, err := hedge.New(hedge.Config{Replicas: len(replicas)})
	if err != nil {
		return err
	}
	tr, err := hedgehttp.New(nil, h, hedgehttp.Config{
		Replicas: replicas,
		Route:    func(*http.Request) string { return "/item" },
	})
	if err != nil {
		return err
	}
	inventory := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	hedgers := map[string]*hedge.Hedger{"inventory": h}

	// The fleet: the policy of --service in etcd, applied to the
	// Hedger; the pod's status at its own key, under a lease.
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            strings.Split(*endpoints, ","),
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	store := fleetetcd.Store{Client: cli}
	ann := store.Announcer(*service, *instance)
	defer ann.Close()
	w, err := fleet.NewWatcher(fleet.Options{
		Service:   *service,
		Instance:  *instance,
		Source:    store.Source(*service),
		Announcer: ann,
		Hedgers:   hedgers,
		Jitter:    time.Second,
		LostAfter: 10 * time.Minute,
		Fallback:  fleet.FallbackCode,
		Logger:    log,
	})
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	col, err := hedgeprom.New("hedge", hedgers)
	if err != nil {
		return err
	}
	fc, err := hedgeprom.NewFleet("hedge", w)
	if err != nil {
		return err
	}
	reg.MustRegister(col, fc)

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /item", func(rw http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, replicas[0]+"/item", nil)
		resp, err := inventory.Do(req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		rw.WriteHeader(resp.StatusCode)
		fmt.Fprintln(rw, "item")
	})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving", "err", err)
		}
	})
	log.Info("serving", "instance", *instance, "addr", l.Addr().String(), "service", *service)
	if ready != nil {
		ready <- l.Addr().String()
	}
	wg.Go(func() { load(ctx, "http://"+l.Addr().String()+"/item", *rate) })
	wg.Go(func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("fleet watcher stopped", "err", err)
		}
	})
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	return nil
}

// startInventory starts the two inventory replicas and returns their
// base URLs.
func startInventory() ([]string, func(), error) {
	var (
		urls []string
		srvs []*http.Server
	)
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		s := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			d := time.Millisecond + rand.N(time.Millisecond)
			if rand.N(30) == 0 {
				d = 50 * time.Millisecond // a stall
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				fmt.Fprintln(rw, "item")
			case <-r.Context().Done():
			}
		})}
		go s.Serve(l)
		srvs = append(srvs, s)
		urls = append(urls, "http://"+l.Addr().String())
	}
	return urls, func() {
		for _, s := range srvs {
			s.Close()
		}
	}, nil
}

// load calls url rate times a second until ctx ends.
func load(ctx context.Context, url string, rate float64) {
	if rate <= 0 {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
}
