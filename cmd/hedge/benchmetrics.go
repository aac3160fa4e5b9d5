package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tailcut/hedge/internal/bench"
)

// benchMetrics serves the live metrics of a running "hedge bench" on
// /metrics (--metrics-addr): every configuration's counters, labelled by
// configuration and backend (see bench.Metrics). A nil *benchMetrics is
// the flag unset: its methods do nothing.
type benchMetrics struct {
	m    *bench.Metrics
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// benchMetricsFlag defines --metrics-addr on fs.
func benchMetricsFlag(fs *flag.FlagSet) *string {
	return fs.String("metrics-addr", "", "serve the running comparison's metrics for Prometheus on http://ADDR/metrics (e.g. 127.0.0.1:9464; :0 picks a free port, printed on stderr); empty: none")
}

// benchMetricsReady, when set (by tests), is called with the metrics
// address once every backend's comparison has ended, before the server
// stops: the last moment a scrape sees the whole bench.
var benchMetricsReady func(addr string)

// startBenchMetrics listens on addr and serves the metrics until close.
// An empty addr returns nil.
func startBenchMetrics(addr string, stderr io.Writer) (*benchMetrics, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	bm := &benchMetrics{m: bench.NewMetrics(), ln: ln, done: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(bm.m)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	bm.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(bm.done)
		_ = bm.srv.Serve(ln)
	}()
	fmt.Fprintf(stderr, "hedge bench: metrics on http://%s/metrics\n", ln.Addr())
	return bm, nil
}

// contenders returns cs reported by the metrics under backend's name.
func (bm *benchMetrics) contenders(backend string, cs []bench.Contender) []bench.Contender {
	if bm == nil {
		return cs
	}
	return bm.m.Contenders(backend, cs)
}

// close stops the server after a scrape under way has been answered (up
// to a few seconds), and returns once it has stopped.
func (bm *benchMetrics) close() error {
	if bm == nil {
		return nil
	}
	if benchMetricsReady != nil {
		benchMetricsReady(bm.ln.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := bm.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = bm.srv.Close()
	}
	<-bm.done
	if err != nil {
		return fmt.Errorf("stopping the metrics server: %w", err)
	}
	return nil
}
