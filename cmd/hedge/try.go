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

	"github.com/tailcut/hedge/internal/try"
)

func init() { register(tryCommand) }

var tryCommand = &command{
	name:    "try",
	summary: "A/B test hedging against your own HTTP, gRPC or Redis replicas with real traffic, and give a verdict",
	run:     runTry,
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// tryFlags are the flags of hedge try that become Options by tryInputs.
type tryFlags struct {
	headers, headerEnvs                         listFlag
	targets, format, tmpl, values, method, arms string
	latencies                                   bool
	out                                         string

	grpc, redis                 bool
	requests, data, protoset    string
	idempotent, tls             bool
	keys                        string
	mget                        int
	redisUser, redisPasswordEnv string
	set                         func(name string) bool // the flag was given
}

// Flags that belong to one protocol.
var (
	tryHTTPFlags  = []string{"targets", "targets-format", "url", "values", "allow-writes", "idempotency-header"}
	tryGRPCFlags  = []string{"requests", "data", "protoset", "idempotent", "tls"}
	tryRedisFlags = []string{"keys", "mget", "redis-user", "redis-password-env"}
)

func runTry(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("try", "--replica URL --replica URL [--replica URL...] (--targets FILE | --url /path/{key} --values FILE) [flags]\n"+
		"   or: hedge try --grpc --replica HOST:PORT --replica HOST:PORT [...] --method package.Service/Method (--requests FILE | --data JSON) --idempotent [--protoset FILE] [flags]\n"+
		"   or: hedge try --redis --replica redis://HOST:PORT --replica redis://HOST:PORT [...] --keys FILE [--mget N] [flags]\n\n"+
		"HTTP: each request is a target; only GET and HEAD unless --allow-writes with --idempotency-header.\n"+
		"gRPC: each request is a call of one unary method, its messages in JSON; the method's descriptors come from\n"+
		"the first replica's server reflection, or --protoset. Hedging calls a method twice, and gRPC does not say which\n"+
		"methods are safe to call twice: --idempotent is your word that they are; without it try refuses to run.\n"+
		"Redis: each request is a GET of a key (or MGET of --mget keys), hedged across the replicas; try never writes.", stderr)
	var replicas listFlag
	var f tryFlags
	d := try.Options{}.Defaults()
	o := try.Options{}
	fs.Var(&replicas, "replica", "one replica (repeat for each; at least 2): a base URL such as http://10.0.0.1:8080; with --grpc, host:port; with --redis, redis://host:port[/db], rediss://host:port[/db] or host:port. REAL traffic goes to these, and nowhere else")
	fs.BoolVar(&f.grpc, "grpc", false, "the replicas are gRPC servers: send calls of --method with the messages of --requests or --data")
	fs.BoolVar(&f.redis, "redis", false, "the replicas are Redis servers holding the same data: send GET (or MGET) of the keys of --keys")
	fs.StringVar(&f.targets, "targets", "", "targets file in vegeta's HTTP format (\"GET /path\", header lines, blank line between targets) or JSON lines ({\"method\",\"url\",\"header\"}); urls are paths or full URLs of a replica")
	fs.StringVar(&f.format, "targets-format", "auto", "format of --targets: http, json, or auto (json when the first target starts with {)")
	fs.StringVar(&f.tmpl, "url", "", "path template with {key}, such as /items/{key}, filled with each value of --values (URL-escaped)")
	fs.StringVar(&f.values, "values", "", "file of values for --url, one per line")
	fs.StringVar(&f.method, "method", "", "method of the --url requests: GET (the default) or HEAD (others need --allow-writes); with --grpc, the full gRPC method name, package.Service/Method")
	fs.Var(&f.headers, "header", "header sent with every request, 'Name: value' (repeatable; with --grpc, metadata); the outputs name it, its value only with --show-header-values")
	fs.BoolVar(&o.ShowHeaderValues, "show-header-values", false, "write the values of --header into the report and results.json, not only the names; even then values of names like Authorization, Cookie or *-Key, and values shaped like credentials (Bearer or Basic tokens, JWTs, long random strings), are redacted")
	fs.Var(&f.headerEnvs, "header-env", "header (with --grpc, metadata) whose value is read from an environment variable, Name=ENVVAR (repeatable): for credentials, never echoed or written anywhere")
	fs.StringVar(&f.requests, "requests", "", "--grpc: file of request messages in JSON (protobuf's JSON mapping), one a line, sent in turn")
	fs.StringVar(&f.data, "data", "", "--grpc: one request message in JSON, such as '{\"id\": 42}'")
	fs.StringVar(&f.protoset, "protoset", "", "--grpc: descriptor set holding the method (protoc --include_imports -o FILE your.proto); without it, the first replica is asked by server reflection")
	fs.BoolVar(&f.idempotent, "idempotent", false, "--grpc: your word that calling the method twice has the effect of calling it once (a read, or a write the service deduplicates); required, since a hedge calls it twice")
	fs.BoolVar(&f.tls, "tls", false, "--grpc: dial the replicas with TLS (the system's roots); plaintext without it")
	fs.StringVar(&f.keys, "keys", "", "--redis: file of keys, one per line, read in turn")
	fs.IntVar(&f.mget, "mget", 0, fmt.Sprintf("--redis: read this many keys a request with one MGET (up to %d); 0 or 1: GET of one key", try.MaxMGet))
	fs.StringVar(&f.redisUser, "redis-user", "", "--redis: user name for AUTH (with --redis-password-env)")
	fs.StringVar(&f.redisPasswordEnv, "redis-password-env", "", "--redis: environment variable holding the password for AUTH, never echoed or written anywhere")
	fs.StringVar(&f.arms, "arms", "none,default", "arms to compare, comma-separated: none (no hedging), default (the zero hedge.Config), fixed:DURATION, pNN (the default with its delay at the live NNth percentile), plain-pNN (plain hedging at the live NNth percentile with the budget, without the default's other rules: plain-p95), or a hedge bench configuration name")
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
	fs.StringVar(&o.Objective, "objective", d.Objective, "the percentile the verdicts judge by: p50, p90, p99 or p99.9 (stalls may show at the p99.9 alone, which needs 2,000 requests an arm)")
	fs.Float64Var(&o.MinCut, "min-cut", d.MinCut, "smallest cut of the objective percentile that counts as a TAIL CUT (0.1: 10%)")
	fs.Float64Var(&o.LoadLimit, "load-limit", d.LoadLimit, "extra requests per request above which an arm is EXCESS LOAD")
	fs.StringVar(&f.out, "out", "./try-out", "directory for report.md, results.json and the plots (empty: print only)")
	fs.BoolVar(&f.latencies, "latencies", false, "also write the unhedged arm's latencies to --out, for hedge advise --in")
	fs.DurationVar(&o.ProgressEvery, "progress", time.Second, "interval of the progress line on stderr (0: none)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	f.set = func(name string) bool { return flagSet(fs, name) }
	o.Replicas = replicas
	if err := tryInputs(&o, &f); err != nil {
		return usageError(stderr, "try", err)
	}
	if err := o.Defaults().Validate(); err != nil {
		return usageError(stderr, "try", err)
	}
	if f.out != "" {
		if fi, err := os.Stat(f.out); err == nil && !fi.IsDir() {
			return usageError(stderr, "try", fmt.Errorf("--out %s is a file: choose a directory", f.out))
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
		strings.Join(o.Replicas, ", "), o2.Rate, o.Ramp, o.Warmup, o2.Duration, f.arms)
	res, err := try.Run(ctx, o)
	if res == nil {
		fmt.Fprintf(stderr, "hedge try: %v\n", err)
		for _, usage := range []error{try.ErrInvalid, try.ErrTargets, try.ErrNotIdempotent, try.ErrStreaming, try.ErrDescriptors} {
			if errors.Is(err, usage) {
				return exitUsage
			}
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
	if f.out != "" {
		files, werr := res.WriteFiles(f.out, f.latencies)
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

// tryInputs reads the targets (or the gRPC messages, or the Redis keys),
// headers and arms the flags name into o.
func tryInputs(o *try.Options, f *tryFlags) error {
	var errs []error
	mode := ""
	switch {
	case f.grpc && f.redis:
		return errors.New("--grpc and --redis: give one (a run tries one protocol)")
	case f.grpc:
		mode = "--grpc"
	case f.redis:
		mode = "--redis"
	}
	for _, g := range []struct {
		mode  string // the mode the flags belong to
		flags []string
		fix   string
	}{
		{"", tryHTTPFlags, "is for HTTP replicas, not with " + mode},
		{"--grpc", tryGRPCFlags, "is for gRPC replicas: add --grpc (and --replica HOST:PORT)"},
		{"--redis", tryRedisFlags, "is for Redis replicas: add --redis (and --replica redis://HOST:PORT)"},
	} {
		if g.mode == mode {
			continue
		}
		for _, name := range g.flags {
			if f.set(name) {
				errs = append(errs, fmt.Errorf("--%s %s", name, g.fix))
			}
		}
	}
	if f.redis && (len(f.headers) > 0 || len(f.headerEnvs) > 0) {
		errs = append(errs, errors.New("--header and --header-env are for HTTP and gRPC: a Redis run sends none (give a password with --redis-password-env)"))
	}
	o.Header = http.Header{}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			// Never echo the value: it may be a credential.
			errs = append(errs, fmt.Errorf("--header: write 'Name: value' (the header %q has no colon after its name)", redactedName(h)))
			continue
		}
		o.Header.Add(name, strings.TrimSpace(value))
	}
	for _, h := range f.headerEnvs {
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
	if a, err := try.ParseArms(f.arms); err != nil {
		errs = append(errs, fmt.Errorf("--arms: %w", err))
	} else {
		o.Arms = a
	}
	switch {
	case f.grpc:
		errs = append(errs, grpcInputs(o, f)...)
	case f.redis:
		errs = append(errs, redisInputs(o, f)...)
	default:
		errs = append(errs, httpInputs(o, f)...)
	}
	if f.latencies && f.out == "" {
		errs = append(errs, errors.New("--latencies writes into --out: give a directory"))
	}
	return errors.Join(errs...)
}

// httpInputs reads the HTTP targets.
func httpInputs(o *try.Options, f *tryFlags) []error {
	var errs []error
	if strings.Contains(f.method, "/") {
		errs = append(errs, fmt.Errorf("--method %q names a gRPC method: add --grpc (and --replica HOST:PORT)", f.method))
	}
	switch {
	case f.targets != "" && f.tmpl != "":
		errs = append(errs, errors.New("--targets and --url: give one or the other"))
	case f.targets != "":
		ts, err := readTargets(f.targets, f.format, o.Replicas)
		if err != nil {
			errs = append(errs, fmt.Errorf("--targets %s: %w", f.targets, err))
		}
		o.Targets = ts
	case f.tmpl != "":
		if f.values == "" {
			errs = append(errs, errors.New("--url needs --values FILE, one value per line for {key}"))
			break
		}
		vs, err := readLines("--values", f.values)
		if err == nil {
			method := f.method
			if method == "" {
				method = http.MethodGet
			}
			o.Targets, err = try.TemplateTargets(strings.ToUpper(method), f.tmpl, vs)
		}
		if err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, errors.New("no targets: give --targets FILE, or --url /path/{key} with --values FILE"))
	}
	return errs
}

// grpcInputs reads the gRPC method, messages and descriptor set.
func grpcInputs(o *try.Options, f *tryFlags) []error {
	var errs []error
	g := &try.GRPCOptions{Method: f.method, Idempotent: f.idempotent, TLS: f.tls}
	o.GRPC = g
	if f.method == "" {
		errs = append(errs, errors.New("--grpc needs --method package.Service/Method, the unary method to call"))
	}
	switch {
	case f.requests != "" && f.data != "":
		errs = append(errs, errors.New("--requests and --data: give one or the other"))
	case f.requests != "":
		lines, err := readLines("--requests", f.requests)
		if err != nil {
			errs = append(errs, err)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				g.Requests = append(g.Requests, l)
			}
		}
		if err == nil && len(g.Requests) == 0 {
			errs = append(errs, fmt.Errorf("--requests %s holds no message: write one JSON message a line", f.requests))
		}
	case f.data != "":
		g.Requests = []string{f.data}
	default:
		errs = append(errs, errors.New("--grpc needs request messages: give --requests FILE (one JSON message a line) or --data '{...}' (use --data '{}' for an empty message)"))
	}
	if f.protoset != "" {
		b, err := os.ReadFile(f.protoset)
		if err != nil {
			errs = append(errs, fmt.Errorf("--protoset: %v", err))
		}
		g.Protoset = b
	}
	return errs
}

// redisInputs reads the Redis keys and password.
func redisInputs(o *try.Options, f *tryFlags) []error {
	var errs []error
	ro := &try.RedisOptions{MGet: f.mget, Username: f.redisUser}
	o.Redis = ro
	if f.keys == "" {
		errs = append(errs, errors.New("--redis needs --keys FILE, one key per line"))
	} else {
		keys, err := readLines("--keys", f.keys)
		if err != nil {
			errs = append(errs, err)
		} else if len(keys) == 0 {
			errs = append(errs, fmt.Errorf("--keys %s holds no key", f.keys))
		}
		ro.Keys = keys
	}
	if f.redisPasswordEnv != "" {
		v, set := os.LookupEnv(f.redisPasswordEnv)
		if !set || v == "" {
			errs = append(errs, fmt.Errorf("--redis-password-env: the environment variable %s is unset or empty: export it first", f.redisPasswordEnv))
		}
		ro.Password = v
	} else if f.redisUser != "" {
		errs = append(errs, errors.New("--redis-user needs --redis-password-env VAR"))
	}
	return errs
}

// readLines reads a file of values, one per line (try.ReadValues).
func readLines(flagName, path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flagName, err)
	}
	defer fh.Close()
	vs, err := try.ReadValues(fh)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	return vs, nil
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
