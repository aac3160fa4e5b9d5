package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/try"
)

func init() { register(tryCommand) }

var tryCommand = &command{
	name:    "try",
	summary: "A/B test hedging against your own HTTP replicas with real traffic, and give a verdict",
	run:     runTry,
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func runTry(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("try", "--replica URL --replica URL [--replica URL...] (--targets FILE | --url /path/{key} --values FILE) [flags]", stderr)
	var replicas, headers, headerEnvs listFlag
	d := try.Options{}.Defaults()
	o := try.Options{}
	fs.Var(&replicas, "replica", "base URL of one replica, such as http://10.0.0.1:8080 (repeat for each; at least 2). REAL traffic goes to these, and nowhere else")
	targets := fs.String("targets", "", "targets file in vegeta's HTTP format (\"GET /path\", header lines, blank line between targets) or JSON lines ({\"method\",\"url\",\"header\"}); urls are paths or full URLs of a replica")
	format := fs.String("targets-format", "auto", "format of --targets: http, json, or auto (json when the first target starts with {)")
	tmpl := fs.String("url", "", "path template with {key}, such as /items/{key}, filled with each value of --values (URL-escaped)")
	values := fs.String("values", "", "file of values for --url, one per line")
	method := fs.String("method", http.MethodGet, "method of the --url requests: GET or HEAD (others need --allow-writes)")
	fs.Var(&headers, "header", "header sent with every request, 'Name: value' (repeatable); values of names like Authorization, Cookie or *-Key are never echoed")
	fs.Var(&headerEnvs, "header-env", "header whose value is read from an environment variable, Name=ENVVAR (repeatable): for credentials, never echoed or written anywhere")
	armsFlag := fs.String("arms", "none,default", "arms to compare, comma-separated: none (no hedging), default (the zero hedge.Config), fixed:DURATION, pNN (delay at the live NNth percentile), or a hedge bench configuration name")
	fs.Float64Var(&o.Rate, "rate", d.Rate, "requests per second over all arms once ramped up (hedges come on top)")
	fs.Float64Var(&o.MaxRate, "max-rate", d.MaxRate, fmt.Sprintf("ceiling on --rate; above %d it needs --allow-high-rate", try.DefaultMaxRate))
	fs.BoolVar(&o.AllowHighRate, "allow-high-rate", false, fmt.Sprintf("confirm that a --max-rate above %d requests/s of real traffic to these replicas is intended", try.DefaultMaxRate))
	fs.DurationVar(&o.Ramp, "ramp", 5*time.Second, "time the rate climbs linearly from 0 to --rate (not measured)")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "time at full rate before measuring (not measured): the default delay needs 100 latencies of its arm first")
	fs.DurationVar(&o.Duration, "duration", d.Duration, "measured span")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", d.MaxInFlight, "most requests in flight; beyond it a request waits, its latency still timed from its intended start")
	fs.DurationVar(&o.Timeout, "timeout", d.Timeout, "timeout of each request, from its intended start")
	fs.BoolVar(&o.AllowWrites, "allow-writes", false, "allow methods other than GET and HEAD in the targets (needs --idempotency-header)")
	fs.StringVar(&o.IdempotencyHeader, "idempotency-header", "", "header carrying a fresh key on each write, the same on its copies: Idempotency-Key or X-Idempotency-Key (your service must deduplicate by it)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the arm assignment and the bootstrap")
	fs.Float64Var(&o.MinCut, "min-cut", d.MinCut, "smallest cut of the p99 that counts as a TAIL CUT (0.1: 10%)")
	fs.Float64Var(&o.LoadLimit, "load-limit", d.LoadLimit, "extra requests per request above which an arm is EXCESS LOAD")
	out := fs.String("out", "./try-out", "directory for report.md, results.json and the plots (empty: print only)")
	latencies := fs.Bool("latencies", false, "also write the unhedged arm's latencies to --out, for hedge advise --in")
	fs.DurationVar(&o.ProgressEvery, "progress", time.Second, "interval of the progress line on stderr (0: none)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	o.Replicas = replicas
	if err := tryInputs(&o, headers, headerEnvs, *targets, *format, *tmpl, *values, *method, *armsFlag, *latencies, *out); err != nil {
		return usageError(stderr, "try", err)
	}
	if err := o.Defaults().Validate(); err != nil {
		return usageError(stderr, "try", err)
	}
	if *out != "" {
		if fi, err := os.Stat(*out); err == nil && !fi.IsDir() {
			return usageError(stderr, "try", fmt.Errorf("--out %s is a file: choose a directory", *out))
		}
	}
	if o.ProgressEvery > 0 {
		o.Progress = stderr
	}
	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal kills at once
	o2 := o.Defaults()
	fmt.Fprintf(stderr, "hedge try: REAL traffic to %s: %g requests/s (ramp %v, warm-up %v, measured %v), arms %s\n",
		strings.Join(o.Replicas, ", "), o2.Rate, o.Ramp, o.Warmup, o2.Duration, *armsFlag)
	res, err := try.Run(ctx, o)
	if res == nil {
		fmt.Fprintf(stderr, "hedge try: %v\n", err)
		if errors.Is(err, try.ErrInvalid) {
			return exitUsage
		}
		return exitFailure
	}
	code := exitOK
	switch {
	case ctx.Err() != nil:
		code = exitInterrupted
		fmt.Fprintf(stderr, "hedge try: interrupted after %v; writing what was measured\n", res.Elapsed.Round(time.Millisecond))
	case err != nil:
		code = exitFailure
		fmt.Fprintf(stderr, "hedge try: %v\n", err)
	}
	if werr := res.WriteSummary(stdout); werr != nil && code == exitOK {
		code = exitFailure
	}
	if *out != "" {
		files, werr := res.WriteFiles(*out, *latencies)
		if werr != nil {
			fmt.Fprintf(stderr, "hedge try: writing the report: %v\n", werr)
			if code == exitOK {
				code = exitFailure
			}
		}
		fmt.Fprintf(stdout, "wrote %s\n", strings.Join(files, ", "))
	}
	return code
}

// tryInputs reads the targets, headers and arms the flags name into o.
func tryInputs(o *try.Options, headers, headerEnvs []string, targets, format, tmpl, values, method, arms string, latencies bool, out string) error {
	var errs []error
	o.Header = http.Header{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			// Never echo the value: it may be a credential.
			errs = append(errs, fmt.Errorf("--header: write 'Name: value' (the header %q has no colon after its name)", redactedName(h)))
			continue
		}
		o.Header.Add(name, strings.TrimSpace(value))
	}
	for _, h := range headerEnvs {
		name, env, ok := strings.Cut(h, "=")
		if !ok || name == "" || env == "" || strings.ContainsAny(name, " \t:") {
			errs = append(errs, fmt.Errorf("--header-env %q: write Name=ENVVAR, such as Authorization=API_TOKEN", h))
			continue
		}
		v, set := os.LookupEnv(env)
		if !set || v == "" {
			errs = append(errs, fmt.Errorf("--header-env %s: the environment variable %s is unset or empty: export it first", name, env))
			continue
		}
		o.Header.Add(name, v)
		o.SecretHeaders = append(o.SecretHeaders, name)
	}
	if a, err := try.ParseArms(arms); err != nil {
		errs = append(errs, fmt.Errorf("--arms: %w", err))
	} else {
		o.Arms = a
	}
	switch {
	case targets != "" && tmpl != "":
		errs = append(errs, errors.New("--targets and --url: give one or the other"))
	case targets != "":
		ts, err := readTargets(targets, format, o.Replicas)
		if err != nil {
			errs = append(errs, fmt.Errorf("--targets %s: %w", targets, err))
		}
		o.Targets = ts
	case tmpl != "":
		if values == "" {
			errs = append(errs, errors.New("--url needs --values FILE, one value per line for {key}"))
			break
		}
		f, err := os.Open(values)
		if err != nil {
			errs = append(errs, fmt.Errorf("--values: %v", err))
			break
		}
		vs, err := try.ReadValues(f)
		f.Close()
		if err == nil {
			o.Targets, err = try.TemplateTargets(strings.ToUpper(method), tmpl, vs)
		}
		if err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, errors.New("no targets: give --targets FILE, or --url /path/{key} with --values FILE"))
	}
	if latencies && out == "" {
		errs = append(errs, errors.New("--latencies writes into --out: give a directory"))
	}
	return errors.Join(errs...)
}

// redactedName returns the part of a header flag before any colon or
// space, so that a value is never echoed.
func redactedName(h string) string {
	if i := strings.IndexAny(h, ": \t"); i >= 0 {
		return h[:i] + " <redacted>"
	}
	if len(h) > 40 {
		return h[:0] + "<redacted>"
	}
	return h
}

// readTargets reads a targets file in the format given, or guessed.
func readTargets(path, format string, replicas []string) ([]try.Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if format == "auto" {
		format = "http"
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(line, "{") {
				format = "json"
			}
			break
		}
	}
	switch format {
	case "http":
		return try.ParseHTTPTargets(strings.NewReader(string(b)), filepath.Dir(path), replicas)
	case "json":
		return try.ParseJSONTargets(strings.NewReader(string(b)), replicas)
	}
	return nil, fmt.Errorf("--targets-format %q: use http, json or auto", format)
}
