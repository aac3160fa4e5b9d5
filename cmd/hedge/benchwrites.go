package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/exactlyonce"
	"github.com/tailcut/hedge/internal/pgtest"
	"github.com/tailcut/hedge/internal/redistest"
)

func init() { register(benchWritesCommand) }

var benchWritesCommand = &command{
	name:    "bench-writes",
	summary: "prove hedged keyed writes commit exactly once (dedup) against SQLite, PostgreSQL and Redis, and time the middleware",
	run:     runBenchWrites,
}

// benchWriteStores are the stores --store accepts, in the order "all"
// runs them.
var benchWriteStores = []string{exactlyonce.SQLite, exactlyonce.Postgres, exactlyonce.Redis}

func runBenchWrites(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A replica started by a run below: serve until told to stop.
	exactlyonce.MaybeRunReplica(ctx)

	fs := newFlags("bench-writes", "[--store sqlite|postgres|redis|all] [flags]", stderr)
	store := fs.String("store", "all", "stores to run, comma-separated: sqlite, postgres, redis, or all")
	writes := fs.Int("writes", 10_000, "hedged keyed writes per store")
	replicas := fs.Int("replicas", 3, "replica processes sharing the store")
	workers := fs.Int("workers", 16, "writes in flight at once")
	lease := fs.Duration("lease", time.Second, "the middleware's lease")
	delay := fs.Duration("delay", time.Millisecond, "hedge delay: the next copy of a write goes after this")
	noKill := fs.Bool("no-kill", false, "do not kill a replica mid-run")
	overhead := fs.Int("overhead-writes", 2000, "sequential writes with and without the middleware, to time what it adds (0: skip)")
	pgDSN := fs.String("postgres-dsn", "", "an existing PostgreSQL database to use (empty: start a throwaway cluster with initdb); its tables exactlyonce_orders and dedup_keys are emptied")
	redisAddr := fs.String("redis-addr", "", "an existing Redis to use (empty: start a redis-server); its keys dedup:* and exactlyonce:orders are deleted")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	var stores []string
	for _, s := range strings.Split(*store, ",") {
		switch s = strings.TrimSpace(s); s {
		case "all":
			stores = append(stores, benchWriteStores...)
		case exactlyonce.SQLite, exactlyonce.Postgres, exactlyonce.Redis:
			stores = append(stores, s)
		default:
			return usageError(stderr, "bench-writes", fmt.Errorf("--store %q: want sqlite, postgres, redis or all", s))
		}
	}
	if *writes < 1 || *replicas < 2 || *workers < 1 || *lease <= 0 || *delay <= 0 || *overhead < 0 {
		return usageError(stderr, "bench-writes", errors.New("--writes, --workers must be positive, --replicas at least 2, --lease and --delay positive, --overhead-writes not negative"))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "hedge bench-writes: %v\n", err)
		return exitFailure
	}
	type row struct {
		store string
		res   exactlyonce.Result
		ovh   exactlyonce.Overhead
	}
	var rows []row
	failed := false
	for _, s := range stores {
		target, cleanup, err := benchWritesTarget(s, *pgDSN, *redisAddr)
		if err != nil {
			fmt.Fprintf(stderr, "hedge bench-writes: %s: %v\n", s, err)
			return exitFailure
		}
		res, err := exactlyonce.Run(ctx, exactlyonce.Config{
			Target:     target,
			Writes:     *writes,
			Replicas:   *replicas,
			Workers:    *workers,
			Lease:      *lease,
			HedgeDelay: *delay,
			NoKill:     *noKill,
			Command:    func() *exec.Cmd { return exec.Command(self, "bench-writes") },
			Progress:   stderr,
		})
		var ovh exactlyonce.Overhead
		if err == nil && *overhead > 0 {
			fmt.Fprintf(stderr, "%s: timing %d writes with and without the middleware\n", s, *overhead)
			ovh, err = exactlyonce.MeasureOverhead(ctx, target, *overhead)
		}
		cleanup()
		if ctx.Err() != nil {
			return exitInterrupted
		}
		if err != nil {
			fmt.Fprintf(stderr, "hedge bench-writes: %s: %v\n", s, err)
			return exitFailure
		}
		failed = failed || !res.OK()
		rows = append(rows, row{s, res, ovh})
	}
	fmt.Fprintf(stdout, "%-9s %7s %10s %7s %7s %7s %8s %8s %8s  %-28s %s\n", "store", "writes", "duplicates", "missing", "hedges", "retries", "replays", "lost", "seconds", "client latency", "middleware overhead (added p50, p99)")
	for _, r := range rows {
		ovh := "-"
		if *overhead > 0 {
			ovh = fmt.Sprintf("%v, %v (plain %v; dedup %v)",
				(r.ovh.Dedup.P50 - r.ovh.Plain.P50).Round(time.Microsecond), (r.ovh.Dedup.P99 - r.ovh.Plain.P99).Round(time.Microsecond), r.ovh.Plain, r.ovh.Dedup)
		}
		fmt.Fprintf(stdout, "%-9s %7d %10d %7d %7d %7d %8d %8d %8.1f  %-28s %s\n", r.store, r.res.Writes, r.res.Duplicates, r.res.Missing,
			r.res.Hedges, r.res.Retries, r.res.Stats.Replays, r.res.Stats.LostClaims, r.res.Elapsed.Seconds(), r.res.Latency, ovh)
	}
	fmt.Fprintln(stdout, "replays: answers replayed by the replicas (a killed replica's first life not counted); lost: commits refused because the claim's lease had ended")
	if failed {
		fmt.Fprintln(stderr, "hedge bench-writes: NOT exactly once: see the counts above")
		return exitFailure
	}
	return exitOK
}

// benchWritesTarget returns the store to run against, starting a
// throwaway server when none was given, and the function that stops it.
func benchWritesTarget(kind, pgDSN, redisAddr string) (exactlyonce.Target, func(), error) {
	switch kind {
	case exactlyonce.SQLite:
		dir, err := os.MkdirTemp("", "hedge-bench-writes-")
		if err != nil {
			return exactlyonce.Target{}, nil, err
		}
		return exactlyonce.Target{Kind: kind, SQLitePath: filepath.Join(dir, "orders.db")}, func() { os.RemoveAll(dir) }, nil
	case exactlyonce.Postgres:
		if pgDSN != "" {
			return exactlyonce.Target{Kind: kind, PostgresDSN: pgDSN}, func() {}, nil
		}
		c, err := pgtest.StartCluster(pgtest.Options{})
		if err != nil {
			return exactlyonce.Target{}, nil, err
		}
		return exactlyonce.Target{Kind: kind, PostgresDSN: c.DSN("")}, func() { c.Stop() }, nil
	default:
		if redisAddr != "" {
			return exactlyonce.Target{Kind: kind, RedisAddr: redisAddr}, func() {}, nil
		}
		srv, err := redistest.StartN(1, redistest.Options{})
		if err != nil {
			return exactlyonce.Target{}, nil, err
		}
		return exactlyonce.Target{Kind: kind, RedisAddr: srv[0].Addr}, func() { redistest.StopAll(srv) }, nil
	}
}
