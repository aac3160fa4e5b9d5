package try

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Errors of the package, matchable with errors.Is.
var (
	// ErrInvalid marks a mistake in Options (or in a flag that becomes
	// one): nothing was sent.
	ErrInvalid = errors.New("invalid options")
	// ErrTargets marks a mistake in the targets or values given.
	ErrTargets = errors.New("invalid targets")
	// ErrWritesRefused marks a target whose method is neither GET nor
	// HEAD while writes were not allowed (Options.AllowWrites and an
	// Options.IdempotencyHeader both set).
	ErrWritesRefused = errors.New("writes refused")
	// ErrForeignHost marks a URL whose host is not one of the replicas.
	ErrForeignHost = errors.New("host is not one of the replicas")
	// ErrRateCeiling marks a rate above Options.MaxRate, or a MaxRate
	// above DefaultMaxRate without Options.AllowHighRate.
	ErrRateCeiling = errors.New("rate above the ceiling")
	// ErrRedirectRefused is the error of a request redirected to a host
	// other than the replicas: the redirect is not followed.
	ErrRedirectRefused = errors.New("redirect to a host outside the replicas refused")
	// ErrNotIdempotent marks a gRPC run whose method was not declared
	// idempotent (GRPCOptions.Idempotent): gRPC carries no mark of a
	// method's safety, so try hedges a method only on the user's word.
	ErrNotIdempotent = errors.New("gRPC method not declared idempotent")
	// ErrStreaming marks a gRPC method that streams: try sends unary
	// calls only.
	ErrStreaming = errors.New("streaming gRPC method refused")
	// ErrDescriptors marks a gRPC method whose descriptors could not be
	// had: no such service or method, a descriptor set that lacks it, or
	// a replica without server reflection.
	ErrDescriptors = errors.New("gRPC method descriptors not found")
	// ErrServiceFailing ends a run whose requests kept failing (or being
	// pushed back) at the lowest rate the back-off reaches: try stops
	// rather than push through.
	ErrServiceFailing = errors.New("the service keeps failing at the lowest rate; stopped")
)

// Limits.
const (
	// DefaultMaxRate is the rate ceiling without Options.AllowHighRate, in
	// requests per second (hedges come on top).
	DefaultMaxRate = 200
	// MaxDuration bounds Options.Duration.
	MaxDuration = time.Hour
	// MaxInFlightLimit bounds Options.MaxInFlight.
	MaxInFlightLimit = 10000
	// MaxReplicas bounds the replicas.
	MaxReplicas = 64
)

// Options configures Run. Fields left zero take the defaults of
// Defaults.
type Options struct {
	// Replicas are the replicas, at least two: base URLs
	// ("http://10.0.0.1:8080"); with GRPC, host:port; with Redis,
	// redis://host:port[/db], rediss://host:port[/db] or host:port.
	// Every request, and every copy, goes to one of them.
	Replicas []string
	// Targets are the HTTP requests, sent in turn (round robin). Empty
	// with GRPC or Redis.
	Targets []Target
	// GRPC, if set, makes the run a gRPC one: the replicas are gRPC
	// servers, and the requests calls of one unary method.
	GRPC *GRPCOptions
	// Redis, if set, makes the run a Redis one: the replicas are Redis
	// servers holding the same data, and the requests reads of keys.
	Redis *RedisOptions
	// Header holds headers sent with every request; with GRPC, metadata
	// sent with every call (the names in lower case). None with Redis.
	Header http.Header
	// SecretHeaders names headers (in Header) whose values are secret
	// whatever their name, such as those read from the environment:
	// never echoed. Headers named like credentials (see Sensitive) are
	// never echoed either.
	SecretHeaders []string
	// ShowHeaderValues writes the values of Header into the outputs
	// (Result.Headers), not only their names. Even then a value is
	// replaced by "<redacted>" when its header is in SecretHeaders or
	// named like a credential (Sensitive), or when the value is shaped
	// like one: an authentication scheme and its token ("Bearer ...",
	// "Basic ..."), a JWT, or a long random-looking string.
	ShowHeaderValues bool

	// Arms are the configurations compared, at least two. The baseline
	// of the verdicts is the first arm that does not hedge, or the first
	// arm.
	Arms []Arm

	// Rate is the arrival rate at full load, requests per second.
	Rate float64
	// MaxRate is the ceiling on Rate; above DefaultMaxRate it needs
	// AllowHighRate. Zero means DefaultMaxRate.
	MaxRate float64
	// AllowHighRate lets MaxRate exceed DefaultMaxRate.
	AllowHighRate bool
	// Ramp is how long the rate climbs, linearly, to Rate; Warmup is how
	// long it then stays there before measuring starts. Neither is
	// measured; both let the hedged arms' delays learn.
	Ramp, Warmup time.Duration
	// Duration is the measured span.
	Duration time.Duration
	// MaxInFlight bounds the requests in flight (copies not counted);
	// when it is reached the next request waits for a slot, its latency
	// still timed from its intended start, but no longer than the gap to
	// the arrival after it: then it is dropped, and counted
	// (Result.DroppedInFlight), so that the arrivals of a stall never
	// leave together when it ends.
	MaxInFlight int
	// Timeout bounds each request, from its intended start.
	Timeout time.Duration

	// AllowWrites lets targets use methods other than GET and HEAD; it
	// needs IdempotencyHeader.
	AllowWrites bool
	// IdempotencyHeader is the header that carries a fresh random key on
	// each write request, every copy of it carrying the same key:
	// Idempotency-Key or X-Idempotency-Key, the names hedgehttp hedges
	// writes by.
	IdempotencyHeader string

	// Seed seeds the arm assignment.
	Seed uint64
	// Blocks is how many time blocks the measured span is cut into for
	// the block bootstrap. Zero means one per second, 10 to 60.
	Blocks int
	// Resamples is the number of bootstrap resamples. Zero means 2000.
	Resamples int
	// MinCut is the smallest relative cut of the p99 that counts as a
	// TAIL CUT (0.1: 10%). Zero means 0.1.
	MinCut float64
	// LoadLimit is the extra load (hedge copies per request) above which
	// an arm is EXCESS LOAD. Zero means 0.25, the drill's limit.
	LoadLimit float64
	// Objective is the percentile the verdicts judge by: "p50", "p90",
	// "p99" or "p99.9". Empty means DefaultObjective, "p99". Stalls may
	// show at the p99.9 alone; a p99.9 needs 2,000 requests an arm.
	Objective string

	// Progress, if not nil, receives a progress line, beginning
	// "hedge try: ", every ProgressEvery (zero means a second).
	Progress      io.Writer
	ProgressEvery time.Duration

	hooks testHooks
}

// testHooks let the package's tests run Run in a synctest bubble, on an
// in-memory network: the bubble's clock moves only while every goroutine
// in it is blocked, so the Pacer's spin and a socket's read would stall it.
type testHooks struct {
	// timerPacing paces the arrivals on the runtime timer alone.
	timerPacing bool
	// dial, if set, dials the HTTP replicas.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Defaults returns o with its zero fields set to their defaults.
func (o Options) Defaults() Options {
	if o.MaxRate == 0 {
		o.MaxRate = DefaultMaxRate
	}
	if o.Rate == 0 {
		o.Rate = 50
	}
	if o.Duration == 0 {
		o.Duration = 30 * time.Second
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 256
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Resamples == 0 {
		o.Resamples = 2000
	}
	if o.MinCut == 0 {
		o.MinCut = 0.1
	}
	if o.LoadLimit == 0 {
		o.LoadLimit = 0.25
	}
	if o.Objective == "" {
		o.Objective = DefaultObjective
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = time.Second
	}
	return o
}

// Validate returns every mistake in o (after Defaults), each wrapping
// ErrInvalid or a more precise error of the package, and saying what to
// do.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...))
	}
	switch n := len(o.Replicas); {
	case n < 2:
		bad("%d replicas: give at least two --replica base URLs (a hedge needs another replica to go to)", n)
	case n > MaxReplicas:
		bad("%d replicas: give at most %d", n, MaxReplicas)
	}
	switch {
	case o.GRPC != nil && o.Redis != nil:
		bad("gRPC and Redis at once: choose one (--grpc or --redis)")
	case o.GRPC != nil || o.Redis != nil:
		errs = append(errs, o.validateOther()...)
	default:
		seen := map[origin]string{}
		for _, r := range o.Replicas {
			or, err := parseOrigin(r)
			if err != nil {
				bad("--replica %v", err)
				continue
			}
			if prev, dup := seen[or]; dup {
				bad("--replica %q repeats %q: list each replica once", r, prev)
			}
			seen[or] = r
		}
		if len(o.Targets) == 0 {
			bad("no targets: give --targets FILE, or --url TEMPLATE with --values FILE")
		}
	}
	if len(o.Arms) < 2 {
		bad("%d arms: compare at least two, such as --arms none,default", len(o.Arms))
	}
	switch {
	case o.MaxRate < 0:
		bad("--max-rate %g: use a positive rate", o.MaxRate)
	case o.MaxRate > DefaultMaxRate && !o.AllowHighRate:
		errs = append(errs, fmt.Errorf("%w: --max-rate %g is above the default ceiling of %d requests/s: this is real traffic to your service; to send it, add --allow-high-rate", ErrRateCeiling, o.MaxRate, DefaultMaxRate))
	}
	switch {
	case o.Rate <= 0:
		bad("--rate %g: use a positive rate, in requests per second", o.Rate)
	case o.Rate > o.MaxRate && o.MaxRate > 0:
		errs = append(errs, fmt.Errorf("%w: --rate %g is above --max-rate %g: lower --rate, or raise --max-rate (above %d also needs --allow-high-rate)", ErrRateCeiling, o.Rate, o.MaxRate, DefaultMaxRate))
	}
	if o.Duration <= 0 || o.Duration > MaxDuration {
		bad("--duration %v: use a span above 0 and at most %v", o.Duration, MaxDuration)
	}
	if o.Ramp < 0 || o.Ramp > MaxDuration || o.Warmup < 0 || o.Warmup > MaxDuration {
		bad("--ramp %v, --warmup %v: use 0 to %v each", o.Ramp, o.Warmup, MaxDuration)
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > MaxInFlightLimit {
		bad("--max-in-flight %d: use 1 to %d", o.MaxInFlight, MaxInFlightLimit)
	}
	if o.Timeout <= 0 {
		bad("--timeout %v: use a positive timeout", o.Timeout)
	}
	if o.Resamples < 100 || o.Blocks < 0 || o.Blocks > 1000 {
		bad("resamples %d, blocks %d: use at least 100 resamples and 0 to 1000 blocks", o.Resamples, o.Blocks)
	}
	if o.MinCut <= 0 || o.MinCut >= 1 || o.LoadLimit <= 0 {
		bad("min cut %g, load limit %g: use a min cut in (0, 1) and a positive load limit", o.MinCut, o.LoadLimit)
	}
	if o.Objective != "" && objectiveOf(o.Objective).name != o.Objective {
		var names []string
		for _, ob := range objectives {
			names = append(names, ob.name)
		}
		bad("--objective %q: judge by %s (the percentiles the report estimates)", o.Objective, strings.Join(names, ", "))
	}
	if o.IdempotencyHeader != "" {
		switch strings.ToLower(o.IdempotencyHeader) {
		case "idempotency-key", "x-idempotency-key":
		default:
			bad("--idempotency-header %q: hedgehttp hedges writes by Idempotency-Key or X-Idempotency-Key only; name one of them (your service must deduplicate by it)", o.IdempotencyHeader)
		}
	}
	var writes []string
	for _, t := range o.Targets {
		if !safeMethod(t.method()) && !contains(writes, t.method()) {
			writes = append(writes, t.method())
		}
	}
	if len(writes) > 0 && (!o.AllowWrites || o.IdempotencyHeader == "") {
		errs = append(errs, fmt.Errorf("%w: the targets use %s: try sends GET and HEAD only, unless you pass both --allow-writes and --idempotency-header NAME (every request then carries a fresh key in that header, the same on each of its copies, which your service must deduplicate by)", ErrWritesRefused, strings.Join(writes, ", ")))
	}
	if o.AllowWrites && o.IdempotencyHeader == "" {
		bad("--allow-writes needs --idempotency-header NAME: writes are hedged only with a key the service deduplicates by")
	}
	return errors.Join(errs...)
}

// validateOther checks the options of a gRPC or Redis run.
func (o Options) validateOther() []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...))
	}
	what, flag := "gRPC", "--grpc"
	if o.Redis != nil {
		what, flag = "Redis", "--redis"
	}
	if len(o.Targets) > 0 || o.AllowWrites || o.IdempotencyHeader != "" {
		bad("targets, --allow-writes and --idempotency-header are for HTTP: a %s run (%s) takes none", what, flag)
	}
	seen := map[string]string{}
	for _, r := range o.Replicas {
		var key string
		var err error
		if o.GRPC != nil {
			key, err = parseGRPCAddr(r)
		} else {
			var a redisAddr
			a, err = parseRedisAddr(r)
			key = a.addr
		}
		if err != nil {
			bad("--replica %v", err)
			continue
		}
		if prev, dup := seen[key]; dup {
			bad("--replica %q repeats %q: list each replica once", r, prev)
		}
		seen[key] = r
	}
	if o.GRPC != nil {
		errs = append(errs, o.GRPC.validate(o.Header)...)
	} else {
		if len(o.Header) > 0 {
			bad("headers are for HTTP and gRPC: a Redis run sends none (give a password with --redis-password-env)")
		}
		errs = append(errs, o.Redis.validate()...)
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
