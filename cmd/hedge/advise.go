package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/advise"
)

func init() { register(adviseCommand) }

var adviseCommand = &command{
	name:    "advise",
	summary: "predict what hedging at each delay would buy, from your own latencies",
	run:     runAdvise,
}

// adviseExamples are shown by "hedge advise --help": one per input format.
const adviseExamples = `Examples, one per input:

  # One duration per line, with units (12.5ms, 850us, 1.2s); '#' lines are skipped.
  hedge advise latencies.txt

  # CSV with a header row: name the latency column; bare numbers need --unit.
  hedge advise --in requests.csv --field latency_ms --unit ms --replica-field host

  # JSON lines: latency field, and optionally the replica and the send time.
  hedge advise --in access.jsonl --field duration --unit ms --replica-field upstream --time-field ts

  # A Prometheus scrape holding a histogram's _bucket series (bounds in seconds).
  curl -s http://app:9090/metrics > scrape.txt
  hedge advise --in scrape.txt --metric http_request_duration_seconds --load 0.4

  # A Prometheus HTTP API query result, saved as JSON.
  curl -s 'http://prom:9090/api/v1/query' --data-urlencode \
    'query=sum by (le) (increase(http_request_duration_seconds_bucket{route="/item"}[1h]))' > buckets.json
  hedge advise --in buckets.json --load 0.4

  # A live probe: read-only GETs (or HEADs) at 5 per second in all, over the resolved addresses.
  hedge advise --probe https://api.example.com/health --probe-rate 5 --probe-count 1000

  # Fixed delays as well as the percentiles, and the queueing estimate at load 0.6
  # on 3 replicas serving 4 requests at once each (12 single-slot servers).
  hedge advise latencies.txt --delays 20ms,50ms --load 0.6 --replicas 3 --concurrency 4

  # Judge by the p99.9 rather than the p99, for slowness too rare to reach the p99.
  hedge advise latencies.txt --objective p99.9

The terminal gets the headline (what the library's default will do, then
the recommendation as the library runs it, or to keep the default) and a
summary: the sample, where its slowness lives, and the predicted hedge rate
and tail of no hedging, the default and the recommendation. The details
(every delay under each prediction, what each assumes, the configuration as
Go and as a gRPC service config) are in report.txt (--out), or printed with
--verbose.

The probe sends only GET or HEAD requests (never anything else), at most
50 per second and 100,000 in all, for at most an hour.
`

// adviseFlags are the flags of "hedge advise".
type adviseFlags struct {
	in, format, field, replicaField, timeField, unit, metric string
	probe, probeMethod                                       string
	probeRate                                                float64
	probeCount                                               int
	probeDuration, probeTimeout, sendLag, sendLagP99         time.Duration
	percentiles, delays, sizes, out                          string
	grpcService, grpcMethod                                  string
	objective                                                string
	load                                                     float64
	servers, replicas, concurrency, simRequests              int
	inOrder, plainHedging, verbose                           bool
	seed                                                     uint64
}

func runAdvise(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("advise", "FILE [flags] | --in FILE [flags] | --probe URL [flags]", stderr)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(stderr, "\n%s", adviseExamples)
	}
	var f adviseFlags
	fs.StringVar(&f.in, "in", "", "recorded latencies of one operation (- for standard input), as the argument FILE gives them")
	fs.StringVar(&f.format, "format", "auto", "input format: auto, durations, csv, jsonl, prom (text scrape), prom-json (HTTP API result)")
	fs.StringVar(&f.field, "field", "latency", "CSV column (name or number from 1) or JSON field of the latency; dots reach into nested JSON objects")
	fs.StringVar(&f.replicaField, "replica-field", "", "CSV column or JSON field naming the replica (host) that served each request")
	fs.StringVar(&f.timeField, "time-field", "", "CSV column or JSON field with each request's send time (RFC 3339, or Unix seconds)")
	fs.StringVar(&f.unit, "unit", "", "unit of latencies given as bare numbers: ns, us, ms, s (a histogram's bounds default to seconds)")
	fs.StringVar(&f.metric, "metric", "", "Prometheus histogram name, with or without _bucket (needed when the input has several)")
	fs.StringVar(&f.probe, "probe", "", "probe this http(s) URL live with read-only GET (or HEAD) requests instead of reading --in")
	fs.StringVar(&f.probeMethod, "probe-method", "GET", "probe method: GET or HEAD (nothing else is ever sent)")
	fs.Float64Var(&f.probeRate, "probe-rate", 5, fmt.Sprintf("probe requests per second, open loop (at most %d)", advise.MaxProbeRate))
	fs.IntVar(&f.probeCount, "probe-count", advise.MinSample, fmt.Sprintf("latencies to record (at most %d)", advise.MaxProbeCount))
	fs.DurationVar(&f.probeDuration, "probe-duration", 0, "longest the probe may run (0: what --probe-count and a warm-up request per address need at --probe-rate, plus a tenth; at most 1h)")
	fs.DurationVar(&f.probeTimeout, "probe-timeout", 10*time.Second, "timeout of each probe request")
	fs.StringVar(&f.percentiles, "percentiles", "50,60,70,80,90,95,99,99.9", "sample percentiles to try as hedge delays, comma-separated (empty: none)")
	fs.StringVar(&f.delays, "delays", "", "fixed hedge delays to try as well, comma-separated, such as 20ms,50ms")
	fs.Float64Var(&f.load, "load", 0, "servers' utilisation without hedging, in (0, 1), for the queueing estimate (0: inferred from send times, or no queueing estimate)")
	fs.IntVar(&f.replicas, "replicas", 0, "replicas the requests were spread over: the moment-local default line replays the default's decision on them, and the queueing estimate simulates replicas x concurrency servers (0: the replicas in the sample, or 10 for the queueing estimate)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "requests each replica serves at once: the queueing estimate's servers have one slot each (0: 1)")
	fs.IntVar(&f.servers, "servers", 0, "the queueing estimate's single-slot servers as one number, replicas x concurrency; refused with --replicas or --concurrency, or on a sample with send times and no --replica-field, where it could also be the replicas: use --replicas and --concurrency")
	fs.StringVar(&f.objective, "objective", "p99", "the tail percentile the verdicts and the recommendation are judged by: p99, or p99.9 for slowness too rare to reach the p99")
	fs.BoolVar(&f.plainHedging, "plain-hedging", false, "recommend plain hedging as predicted, with the library's spare-capacity and payoff rules turned off (MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1); by default the recommendation keeps them")

	fs.IntVar(&f.simRequests, "sim-requests", 200_000, "simulated requests per run of the queueing estimate")
	fs.StringVar(&f.sizes, "sizes", "all", "queueing estimates, comma-separated: fresh (each copy draws its own service time), shared (copies share the request's), stalls (servers stop now and then, as fitted to the sample's slow latencies; only when it shows stalls); both (fresh and shared) or all")
	fs.BoolVar(&f.inOrder, "in-order", false, "the input lists requests in the order they were sent (the budget meets them in that order); without it and without send times, a random order")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the random order and the simulation")
	fs.StringVar(&f.out, "out", "./advise-out", "directory for report.txt (the full report) and advise.svg (empty: print only)")
	fs.BoolVar(&f.verbose, "verbose", false, "print the full report, as report.txt has it: every delay under each prediction, what each assumes, the replicas, and the configuration as Go and as a gRPC service config (without it: the headline and a summary)")
	fs.StringVar(&f.grpcService, "grpc-service", "", "fully qualified gRPC service for the service-config snippet, such as pkg.Items")
	fs.StringVar(&f.grpcMethod, "grpc-method", "", "gRPC method for the snippet, such as GetItem (needs --grpc-service)")
	fs.DurationVar(&f.sendLag, "send-lag", 0, "how long after its delay a hedge leaves your client (timer lateness, up to about 1ms with the Go runtime's timers under load; a new connection's dial over HTTP/1.1): predictions hedge at delay + send-lag; with --send-lag-p99, the lag's median (hedge.Stats.TimerLag.P50)")
	fs.DurationVar(&f.sendLagP99, "send-lag-p99", 0, "the send lag's 99th percentile (hedge.Stats.TimerLag.P99; hedge bench reports it as timer lag p99): the lag is then random, log-normal with median --send-lag, and the independent estimate weighs all of it")
	files, code := parseArgs(fs, args, stderr)
	if code >= 0 {
		return code
	}
	opts, format, fields, err := f.validate(files)
	if err != nil {
		return usageError(stderr, "advise", err)
	}

	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var s *advise.Sample
	if f.probe != "" {
		s, err = advise.Probe(ctx, advise.ProbeOptions{
			URL: f.probe, Method: strings.ToUpper(f.probeMethod), Rate: f.probeRate, Count: f.probeCount,
			Duration: f.probeDuration, Timeout: f.probeTimeout, Progress: stderr,
		})
	} else {
		s, err = readSample(f.in, format, fields)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "hedge advise: interrupted\n")
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "hedge advise: %v\n", err)
		return exitFailure
	}
	rep, err := advise.Advise(ctx, s, opts)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "hedge advise: interrupted\n")
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "hedge advise: %v\n", err)
		return exitFailure
	}
	write := rep.WriteSummary
	if f.verbose {
		write = rep.WriteText
	}
	if err := write(stdout); err != nil {
		fmt.Fprintf(stderr, "hedge advise: %v\n", err)
		return exitFailure
	}
	var wrote []string
	if f.out != "" {
		wrote, err = writeAdvice(f.out, rep)
		if err != nil {
			fmt.Fprintf(stderr, "hedge advise: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stderr, "hedge advise: wrote %s\n", strings.Join(wrote, ", "))
	}
	if !f.verbose {
		where := "--verbose"
		if len(wrote) > 0 {
			where = wrote[0] + ", or --verbose"
		}
		fmt.Fprintf(stdout, "\nDetails (every delay, what each prediction assumes, the configuration as Go and as a gRPC service config): %s.\n", where)
	}
	return exitOK
}

// notifyContext is signal.NotifyContext; tests wrap it to send the
// signal once the command listens for it.
var notifyContext = signal.NotifyContext

// validate checks the flags before any work.
// validate checks the flags, and the files given as arguments, before any
// work; the argument becomes f.in.
func (f *adviseFlags) validate(files []string) (advise.Options, advise.Format, advise.Fields, error) {
	var errs []error
	o := advise.Options{Load: f.load, Servers: f.servers, Replicas: f.replicas, Concurrency: f.concurrency, Requests: f.simRequests, InOrder: f.inOrder, Seed: f.seed,
		GRPCService: f.grpcService, GRPCMethod: f.grpcMethod, SendLag: f.sendLag, SendLagP99: f.sendLagP99, PlainHedging: f.plainHedging}
	switch {
	case len(files) > 1:
		errs = append(errs, fmt.Errorf("%d files given (%s): give one file of latencies of one operation", len(files), strings.Join(files, " ")))
	case len(files) == 1 && f.in != "":
		errs = append(errs, errors.New("give the file as an argument or with --in, not both"))
	case len(files) == 1:
		f.in = files[0]
	}
	switch {
	case f.in == "" && f.probe == "":
		errs = append(errs, errors.New("give the latencies as a FILE argument or with --in FILE (- for standard input), or probe a URL with --probe"))
	case f.in != "" && f.probe != "":
		errs = append(errs, errors.New("give a file or --probe, not both"))
	}
	obj, err := advise.ParseObjective(f.objective)
	if err != nil {
		errs = append(errs, fmt.Errorf("--objective %q: use p99 or p99.9", f.objective))
	}
	o.Objective = obj
	switch {
	case f.replicas < 0 || f.replicas == 1:
		errs = append(errs, fmt.Errorf("--replicas %d: use 2 or more (a copy needs another replica), or 0 for the replicas the sample names", f.replicas))
	case f.concurrency < 0:
		errs = append(errs, fmt.Errorf("--concurrency %d: use 1 or more, or 0 for 1", f.concurrency))
	case f.servers > 0 && (f.replicas > 0 || f.concurrency > 0):
		errs = append(errs, errors.New("--servers with --replicas or --concurrency: give --replicas and --concurrency (the queueing estimate simulates replicas x concurrency servers), not --servers"))
	case f.servers > 0 && f.timeField != "" && f.replicaField == "":
		errs = append(errs, fmt.Errorf("--servers %d with send times (--time-field) and no --replica-field is ambiguous: give --replicas (the replicas the requests were spread over, which the default line replays) and, if each serves several requests at once, --concurrency (the queueing estimate simulates replicas x concurrency servers)", f.servers))
	}
	format, err := advise.ParseFormat(f.format)
	if err != nil {
		errs = append(errs, fmt.Errorf("--format: %w", err))
	}
	fields := advise.Fields{Latency: f.field, Replica: f.replicaField, Time: f.timeField, Metric: f.metric}
	if f.unit != "" {
		u, err := advise.ParseUnit(f.unit)
		if err != nil {
			errs = append(errs, fmt.Errorf("--unit: %w", err))
		}
		fields.Unit = u
	}
	var bad []error
	o.Percentiles, bad = advise.ParsePercentiles(f.percentiles)
	for _, err := range bad {
		errs = append(errs, fmt.Errorf("--percentiles: %w", err))
	}
	o.Delays, bad = advise.ParseDelays(f.delays)
	for _, err := range bad {
		errs = append(errs, fmt.Errorf("--delays: %w", err))
	}
	if len(o.Percentiles) == 0 && len(o.Delays) == 0 {
		errs = append(errs, errors.New("--percentiles and --delays are both empty: give at least one delay to try"))
	}
	if f.sizes != "all" {
		o.Sizes = []advise.Sizes{}
		for _, x := range advise.SplitList(f.sizes) {
			switch x {
			case "both":
				o.Sizes = append(o.Sizes, advise.Fresh, advise.Shared)
			case "fresh":
				o.Sizes = append(o.Sizes, advise.Fresh)
			case "shared":
				o.Sizes = append(o.Sizes, advise.Shared)
			case "stalls":
				o.Sizes = append(o.Sizes, advise.Stalled)
			default:
				errs = append(errs, fmt.Errorf("--sizes %q: use fresh, shared, stalls (comma-separated), both or all", x))
			}
		}
	}
	if f.grpcMethod != "" && f.grpcService == "" {
		errs = append(errs, errors.New("--grpc-method needs --grpc-service: a gRPC method is named within its service"))
	}
	if f.probe != "" {
		po := advise.ProbeOptions{URL: f.probe, Method: strings.ToUpper(f.probeMethod), Rate: f.probeRate, Count: f.probeCount, Duration: f.probeDuration, Timeout: f.probeTimeout}.Defaults()
		if err := po.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--probe: %w", err))
		}
	}
	return o, format, fields, errors.Join(errs...)
}

// parseArgs parses the flags, which may come before and after the file
// arguments (everything after "--" is a file), and returns the files, and
// the exit code to stop with or -1 to go on.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, int) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK
			}
			return nil, exitUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return files, -1
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(files, rest...), -1
		}
		files, args = append(files, rest[0]), rest[1:]
	}
}

// readSample reads the sample from path ("-": standard input). Without an
// explicit format, a file's extension may decide it.
func readSample(path string, format advise.Format, fields advise.Fields) (*advise.Sample, error) {
	var r io.Reader = os.Stdin
	name := "standard input"
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading the latencies: %w", err)
		}
		defer fh.Close()
		r, name = fh, path
		if format == advise.Auto {
			switch strings.ToLower(filepath.Ext(path)) {
			case ".csv":
				format = advise.CSV
			case ".jsonl", ".ndjson":
				format = advise.JSONLines
			}
		}
	}
	s, err := advise.Parse(r, format, fields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.Source = name + ", " + s.Source
	return s, nil
}

// writeAdvice writes report.txt and advise.svg into dir.
func writeAdvice(dir string, rep *advise.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating --out %s: %w", dir, err)
	}
	var files []string
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.txt", rep.WriteText}, {"advise.svg", rep.WriteSVG}} {
		p := filepath.Join(dir, f.name)
		fh, err := os.Create(p)
		if err != nil {
			return files, fmt.Errorf("writing %s: %w", p, err)
		}
		err = f.write(fh)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, fmt.Errorf("writing %s: %w", p, err)
		}
		files = append(files, p)
	}
	return files, nil
}
