package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/lab"
)

func init() { register(labCommand) }

var labCommand = &command{
	name:    "lab",
	summary: "serve the interactive lab (explorer, study plots, drill) on a local web page",
	run: func(args []string, stdout, stderr io.Writer) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serveLab(ctx, args, stdout, stderr, nil)
	},
}

// labMemoryHeadroom is the memory the lab process needs beyond its
// simulations and cache (lab.Server.MemoryBudget): the runtime, the HTTP
// server, the embedded page and the study data.
const labMemoryHeadroom = 64 << 20

// labGCPercent is the lab's garbage collection target (GOGC). The
// simulator's large arrays hold no pointers, so a collection costs little,
// and collecting at 50% growth rather than 100% cut the peak of a burst of
// unstable simulations by a third.
const labGCPercent = 50

// serveLab runs "hedge lab" until ctx is done (Ctrl-C), then shuts the
// server down, letting running requests finish. ready, if not nil, is
// called with the listening address once the server accepts connections.
// A clean shutdown exits 0: stopping is the normal way to end the lab.
//
// While it serves, the process's soft memory limit (debug.SetMemoryLimit)
// is the lab's memory budget plus labMemoryHeadroom and its GC target is
// labGCPercent, so that the garbage collector keeps the heap near what the
// simulations hold instead of letting it reach twice that; GOMEMLIMIT and
// GOGC in the environment win. Both are restored on return.
func serveLab(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
	fs := newFlags("lab", "[--addr 127.0.0.1:8080] [--study results.json]", stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	study := fs.String("study", "", "results.json of \"hedge study\" for the Study view (default: the copy built into the binary)")
	maxSims := fs.Int("max-sims", lab.DefaultMaxConcurrent, "simulations allowed to run at once; more get 503 busy")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *maxSims < 1 {
		return usageError(stderr, "lab", fmt.Errorf("--max-sims %d: use 1 or more", *maxSims))
	}
	opts := lab.Options{MaxConcurrent: *maxSims}
	if *study != "" {
		b, err := os.ReadFile(*study)
		if err != nil {
			return usageError(stderr, "lab", fmt.Errorf("--study: %w", err))
		}
		opts.Study = b
	}
	s, err := lab.New(opts)
	if err != nil {
		return usageError(stderr, "lab", fmt.Errorf("--study %s: %w", *study, err))
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(s.MemoryBudget() + labMemoryHeadroom))
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(labGCPercent))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "hedge lab: %s is already in use (another hedge lab?): choose a free address with --addr, e.g. --addr 127.0.0.1:8081, or --addr 127.0.0.1:0 for any free port\n", *addr)
		} else {
			fmt.Fprintf(stderr, "hedge lab: cannot listen on %s: %v: choose another address with --addr host:port\n", *addr, err)
		}
		return exitFailure
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      lab.DefaultTimeout + 20*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "hedge lab: serving on %s (Ctrl-C to stop)\n", labURL(ln.Addr()))
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "hedge lab: %v\n", err)
		return exitFailure
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "hedge lab: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "hedge lab: requests still running after 5s were cut off: %v\n", err)
	}
	<-errc // http.ErrServerClosed
	fmt.Fprintln(stderr, "hedge lab: stopped")
	return exitOK
}

// labURL is the address to open in a browser: an unspecified host
// (0.0.0.0, ::) becomes localhost.
func labURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ta.Port)) + "/"
}
