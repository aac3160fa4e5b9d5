package hedgegrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tailcut/hedge"
)

// ServiceConfig is the part of a gRPC service config that hedgegrpc uses:
// the hedging policy of each methodConfig entry and the channel's
// retryThrottling. Every other field of the JSON (loadBalancingConfig,
// timeout, waitForReady, retryPolicy, ...) is left to gRPC, so the same
// JSON can also be given to grpc.WithDefaultServiceConfig.
//
// ParseServiceConfig returns a valid one; a ServiceConfig built by hand is
// checked by NewFromServiceConfig.
type ServiceConfig struct {
	// MethodConfigs are the methodConfig entries, in their order in the
	// JSON.
	MethodConfigs []MethodConfig
	// RetryThrottling is the channel's throttle, or nil when the config
	// has none.
	RetryThrottling *RetryThrottling
}

// MethodConfig is one methodConfig entry: the methods it names and their
// hedging policy.
type MethodConfig struct {
	// Names are the methods the entry applies to (see Lookup for the
	// precedence between method-specific, service-wide and default
	// entries). An entry with no names applies to no method, as in gRPC.
	Names []MethodName
	// Hedging is the entry's hedgingPolicy, or nil: the named methods are
	// then not hedged, even if a service-wide or default entry hedges.
	Hedging *HedgingPolicy
}

// MethodName is one element of a methodConfig's name list. Service and
// Method both set name one method; Service alone names every method of the
// service; both empty is the default entry, for every method the config
// does not name otherwise. Method without Service is invalid.
type MethodName struct {
	Service string // fully qualified, e.g. "grpc.testing.TestService"
	Method  string // e.g. "UnaryCall"
}

// HedgingPolicy is a parsed hedgingPolicy. HedgingPolicy.Config maps it
// onto a hedge.Config.
type HedgingPolicy struct {
	// MaxAttempts is the most copies of a call, the primary included:
	// 2 to hedge.HardMaxAttempts (5). ParseServiceConfig caps larger
	// values at 5, as gRPC does.
	MaxAttempts int
	// Delay is hedgingDelay: the wait before each further copy. Zero
	// sends every copy at once.
	Delay time.Duration
	// NonFatalCodes are nonFatalStatusCodes: a copy failing with one of
	// them sends the next copy at once; any other code ends the call.
	// Empty means every failure ends the call.
	NonFatalCodes []codes.Code
}

// RetryThrottling is a parsed retryThrottling: gRPC's token bucket that
// stops hedges while too many requests fail. It maps onto hedge.NewThrottle.
type RetryThrottling struct {
	MaxTokens  float64 // in (0, 1000]
	TokenRatio float64 // > 0; hedge.NewThrottle needs at least 0.001 and at most MaxTokens
}

// ConfigError is one mistake in a service config. Field is its path in the
// JSON, such as "methodConfig[0].hedgingPolicy.maxAttempts" ("" for the
// document as a whole). ParseServiceConfig and NewFromServiceConfig return
// every mistake found, joined with errors.Join; errors.As finds the first.
type ConfigError struct {
	Field string
	Msg   string // what is wrong and what to do
}

// Error returns "hedgegrpc: service config: <field>: <msg>".
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "hedgegrpc: service config: " + e.Msg
	}
	return "hedgegrpc: service config: " + e.Field + ": " + e.Msg
}

// ParseServiceConfig parses a gRPC service config in JSON and checks its
// hedging policies and retryThrottling. Field names match as in gRPC-Go
// (encoding/json, case-insensitively); unknown fields are ignored.
//
// The checks, each reported as a *ConfigError naming its field:
// hedgingPolicy.maxAttempts is required, an integer and at least 2 (above 5
// is capped at 5); hedgingDelay, if present, is a proto Duration string
// such as "0.010s" or ".5s", not negative (absent means "0s": every copy at
// once); nonFatalStatusCodes, if present, lists code names such as
// "UNAVAILABLE" or numbers 1 to 16; an entry may not set both retryPolicy
// and hedgingPolicy; a name needs a service if it has a method, and no name
// may appear twice; retryThrottling needs maxTokens in (0, 1000] and
// tokenRatio > 0, within what hedge.NewThrottle accepts.
func ParseServiceConfig(js string) (*ServiceConfig, error) {
	var p parser
	sc := p.parse([]byte(js))
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return sc, nil
}

type parser struct{ errs []error }

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) add(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

// present reports whether a field was given a value other than null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func (p *parser) parse(data []byte) *ServiceConfig {
	var top struct {
		MethodConfig    json.RawMessage `json:"methodConfig"`
		RetryThrottling json.RawMessage `json:"retryThrottling"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		p.fail("", "not a JSON object (%v): give the service config as JSON, e.g. {\"methodConfig\": [...]}", err)
		return nil
	}
	sc := &ServiceConfig{}
	if present(top.MethodConfig) {
		var entries []json.RawMessage
		if err := json.Unmarshal(top.MethodConfig, &entries); err != nil {
			p.fail("methodConfig", "not a list: give a JSON list of method configs")
		}
		for i, raw := range entries {
			sc.MethodConfigs = append(sc.MethodConfigs, p.methodConfig(fmt.Sprintf("methodConfig[%d]", i), raw))
		}
		p.errs = append(p.errs, checkNames(sc.MethodConfigs)...)
	}
	if present(top.RetryThrottling) {
		sc.RetryThrottling = p.throttling("retryThrottling", top.RetryThrottling)
	}
	return sc
}

func (p *parser) methodConfig(path string, raw json.RawMessage) MethodConfig {
	var mc MethodConfig
	var in struct {
		Name          json.RawMessage `json:"name"`
		RetryPolicy   json.RawMessage `json:"retryPolicy"`
		HedgingPolicy json.RawMessage `json:"hedgingPolicy"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		p.fail(path, "not an object: give each method config as a JSON object with a name list")
		return mc
	}
	if present(in.Name) {
		var names []json.RawMessage
		if err := json.Unmarshal(in.Name, &names); err != nil {
			p.fail(path+".name", "not a list: give a list of {\"service\": ..., \"method\": ...} objects")
		}
		for j, rn := range names {
			var n struct {
				Service string `json:"service"`
				Method  string `json:"method"`
			}
			if err := json.Unmarshal(rn, &n); err != nil {
				p.fail(fmt.Sprintf("%s.name[%d]", path, j), "not an object of strings: give {\"service\": \"pkg.Service\", \"method\": \"Method\"}")
				continue
			}
			mc.Names = append(mc.Names, MethodName{Service: n.Service, Method: n.Method})
		}
	}
	if present(in.HedgingPolicy) {
		if present(in.RetryPolicy) {
			p.fail(path, "sets both retryPolicy and hedgingPolicy: gRPC allows one per method config, keep one")
		}
		mc.Hedging = p.hedgingPolicy(path+".hedgingPolicy", in.HedgingPolicy)
	}
	return mc
}

func (p *parser) hedgingPolicy(path string, raw json.RawMessage) *HedgingPolicy {
	var in struct {
		MaxAttempts         json.RawMessage `json:"maxAttempts"`
		HedgingDelay        json.RawMessage `json:"hedgingDelay"`
		NonFatalStatusCodes json.RawMessage `json:"nonFatalStatusCodes"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		p.fail(path, "not an object: give {\"maxAttempts\": 2, \"hedgingDelay\": \"0.010s\", \"nonFatalStatusCodes\": [\"UNAVAILABLE\"]}")
		return nil
	}
	hp := &HedgingPolicy{}
	ok := true
	field := path + ".maxAttempts"
	switch n, err := number(in.MaxAttempts); {
	case !present(in.MaxAttempts):
		p.fail(field, "missing: it is required; use 2 for one hedge per call")
		ok = false
	case err != nil:
		p.fail(field, "%s", err)
		ok = false
	case n != math.Trunc(n):
		p.fail(field, "%v is not an integer: use 2 to %d", n, hedge.HardMaxAttempts)
		ok = false
	case n < 2:
		p.add(belowTwo(field, n))
		ok = false
	default:
		// gRPC treats values above its limit as the limit.
		hp.MaxAttempts = int(min(n, hedge.HardMaxAttempts))
	}
	if field := path + ".hedgingDelay"; present(in.HedgingDelay) {
		var s string
		if err := json.Unmarshal(in.HedgingDelay, &s); err != nil {
			p.fail(field, "not a string: give a proto Duration string such as \"0.010s\"")
			ok = false
		} else if d, err := parseDuration(s); err != nil {
			p.fail(field, "%s", err)
			ok = false
		} else {
			hp.Delay = d
		}
	}
	if field := path + ".nonFatalStatusCodes"; present(in.NonFatalStatusCodes) {
		var list []json.RawMessage
		if err := json.Unmarshal(in.NonFatalStatusCodes, &list); err != nil {
			p.fail(field, "not a list: give a list of status codes such as [\"UNAVAILABLE\"]")
			ok = false
		}
		for k, rc := range list {
			c, err := statusCode(rc)
			if err == nil {
				err = checkCode(c)
			}
			if err != nil {
				p.fail(fmt.Sprintf("%s[%d]", field, k), "%s", err)
				ok = false
				continue
			}
			hp.NonFatalCodes = append(hp.NonFatalCodes, c)
		}
	}
	if !ok {
		return nil
	}
	return hp
}

func (p *parser) throttling(path string, raw json.RawMessage) *RetryThrottling {
	var in struct {
		MaxTokens  json.RawMessage `json:"maxTokens"`
		TokenRatio json.RawMessage `json:"tokenRatio"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		p.fail(path, "not an object: give {\"maxTokens\": 10, \"tokenRatio\": 0.1}")
		return nil
	}
	rt := &RetryThrottling{}
	ok := true
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *float64
	}{{"maxTokens", in.MaxTokens, &rt.MaxTokens}, {"tokenRatio", in.TokenRatio, &rt.TokenRatio}} {
		n, err := number(f.raw)
		switch {
		case !present(f.raw):
			p.fail(path+"."+f.name, "missing: it is required (e.g. {\"maxTokens\": 10, \"tokenRatio\": 0.1})")
			ok = false
		case err != nil:
			p.fail(path+"."+f.name, "%s", err)
			ok = false
		default:
			*f.dst = n
		}
	}
	if !ok {
		return nil
	}
	if errs := rt.check(path); len(errs) > 0 {
		p.errs = append(p.errs, errs...)
		return nil
	}
	return rt
}

// number decodes a JSON number.
func number(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("%s is not a number in range", raw)
	}
	return n, nil
}

// maxSeconds is the most whole seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// parseDuration parses the JSON form of a google.protobuf.Duration: a
// decimal number of seconds with at most nine fractional digits and an "s"
// suffix ("0.010s", ".5s", "3s"). Negative values are refused.
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration: give seconds with an \"s\" suffix, such as \"0.010s\" for 10ms", s)
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0, bad
	}
	neg := strings.HasPrefix(num, "-")
	if neg {
		num = num[1:]
	}
	whole, frac, dot := strings.Cut(num, ".")
	if (whole == "" && frac == "") || (dot && frac == "") || !digits(whole) || !digits(frac) {
		return 0, bad
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("%q has more than 9 fractional digits: nanoseconds are the finest unit", s)
	}
	var secs int64
	if whole != "" {
		var err error
		if secs, err = strconv.ParseInt(whole, 10, 64); err != nil || secs > maxSeconds {
			return 0, fmt.Errorf("%q is too long: use at most %ds", s, maxSeconds)
		}
	}
	var nanos int64
	if frac != "" {
		nanos, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	if secs == maxSeconds && nanos > math.MaxInt64%int64(time.Second) {
		return 0, fmt.Errorf("%q is too long: use at most %ds", s, maxSeconds)
	}
	d := time.Duration(secs)*time.Second + time.Duration(nanos)
	if neg && d != 0 {
		return 0, fmt.Errorf("%q is negative: use \"0s\" to send every copy at once, or a positive delay", s)
	}
	return d, nil
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// codeNames are the canonical names of gRPC status codes, as used in
// service configs.
var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// codeName returns c's canonical name, such as "UNAVAILABLE".
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return strconv.FormatUint(uint64(c), 10)
}

// statusCode decodes a status code given as a name or a number.
func statusCode(raw json.RawMessage) (codes.Code, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		for c, n := range codeNames {
			if n == name {
				return codes.Code(c), nil
			}
		}
		for c, n := range codeNames {
			if strings.EqualFold(n, name) || strings.EqualFold(strings.ReplaceAll(n, "_", ""), name) {
				return 0, fmt.Errorf("%q is not a status code name: write it %s", name, codeNames[c])
			}
		}
		return 0, fmt.Errorf("%q is not a status code name: use a name such as UNAVAILABLE, or a number 1 to 16", name)
	}
	n, err := number(raw)
	if err != nil || n != math.Trunc(n) || n < 0 || n >= float64(len(codeNames)) {
		return 0, fmt.Errorf("%s is not a status code: use a name such as UNAVAILABLE, or a number 1 to 16", raw)
	}
	return codes.Code(n), nil
}

func checkCode(c codes.Code) error {
	switch {
	case c == codes.OK:
		return errors.New("OK is not a failure: list failure codes, such as UNAVAILABLE")
	case int(c) >= len(codeNames):
		return fmt.Errorf("%d is not a status code: use 1 to 16", c)
	}
	return nil
}

func belowTwo(field string, n float64) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf("%v is below 2: hedging needs the primary and at least one hedge; use 2", n)}
}

func checkMaxAttempts(field string, n int) error {
	switch {
	case n < 2:
		return belowTwo(field, float64(n))
	case n > hedge.HardMaxAttempts:
		return &ConfigError{Field: field, Msg: fmt.Sprintf("%d is above %d, gRPC's limit: use 2 to %d", n, hedge.HardMaxAttempts, hedge.HardMaxAttempts)}
	}
	return nil
}

// check reports the mistakes in a throttle, including the engine's own
// limits.
func (rt *RetryThrottling) check(path string) []error {
	var errs []error
	if math.IsNaN(rt.MaxTokens) || rt.MaxTokens <= 0 || rt.MaxTokens > 1000 {
		errs = append(errs, &ConfigError{Field: path + ".maxTokens", Msg: fmt.Sprintf("%v is outside (0, 1000]: use e.g. 10", rt.MaxTokens)})
	}
	if math.IsNaN(rt.TokenRatio) || rt.TokenRatio <= 0 {
		errs = append(errs, &ConfigError{Field: path + ".tokenRatio", Msg: fmt.Sprintf("%v is not above 0: use e.g. 0.1", rt.TokenRatio)})
	}
	if len(errs) == 0 {
		if _, err := hedge.NewThrottle(rt.MaxTokens, rt.TokenRatio); err != nil {
			errs = append(errs, &ConfigError{Field: path + ".tokenRatio", Msg: err.Error()})
		}
	}
	return errs
}

// Budget returns a fresh hedge.NewThrottle(MaxTokens, TokenRatio).
func (rt *RetryThrottling) Budget() (*hedge.Budget, error) {
	return hedge.NewThrottle(rt.MaxTokens, rt.TokenRatio)
}

// String formats rt as in the JSON.
func (rt *RetryThrottling) String() string {
	if rt == nil {
		return "no retryThrottling"
	}
	return fmt.Sprintf("retryThrottling{maxTokens: %g, tokenRatio: %g}", rt.MaxTokens, rt.TokenRatio)
}

// key is the lookup key of a name: "/service/method", "/service/" or "".
func (n MethodName) key() string {
	switch {
	case n.Service == "" && n.Method == "":
		return ""
	case n.Method == "":
		return "/" + n.Service + "/"
	}
	return "/" + n.Service + "/" + n.Method
}

// checkNames reports invalid and duplicate names.
func checkNames(mcs []MethodConfig) []error {
	var errs []error
	seen := map[string]string{}
	for i, mc := range mcs {
		for j, n := range mc.Names {
			field := fmt.Sprintf("methodConfig[%d].name[%d]", i, j)
			if n.Service == "" && n.Method != "" {
				errs = append(errs, &ConfigError{Field: field + ".service", Msg: fmt.Sprintf("empty with method %q: name the service too, or leave both empty for the default entry", n.Method)})
				continue
			}
			k := n.key()
			if prev, dup := seen[k]; dup {
				errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf("%s is already named by %s: name each method once", n, prev)})
				continue
			}
			seen[k] = field
		}
	}
	return errs
}

// Validate reports every mistake in sc, as ParseServiceConfig would have.
// NewFromServiceConfig calls it; a parsed config is always valid.
func (sc *ServiceConfig) Validate() error {
	errs := checkNames(sc.MethodConfigs)
	for i, mc := range sc.MethodConfigs {
		if mc.Hedging == nil {
			continue
		}
		path := fmt.Sprintf("methodConfig[%d].hedgingPolicy", i)
		if err := checkMaxAttempts(path+".maxAttempts", mc.Hedging.MaxAttempts); err != nil {
			errs = append(errs, err)
		}
		if mc.Hedging.Delay < 0 {
			errs = append(errs, &ConfigError{Field: path + ".hedgingDelay", Msg: fmt.Sprintf("%v is negative: use 0 to send every copy at once, or a positive delay", mc.Hedging.Delay)})
		}
		for k, c := range mc.Hedging.NonFatalCodes {
			if err := checkCode(c); err != nil {
				errs = append(errs, &ConfigError{Field: fmt.Sprintf("%s.nonFatalStatusCodes[%d]", path, k), Msg: err.Error()})
			}
		}
	}
	if sc.RetryThrottling != nil {
		errs = append(errs, sc.RetryThrottling.check("retryThrottling")...)
	}
	return errors.Join(errs...)
}

// Lookup returns the hedging policy for a full method name
// ("/package.Service/Method"), or nil if the method is not hedged. As in
// gRPC, an entry naming the method wins over one naming its service, which
// wins over the default entry (a name with neither service nor method); the
// winning entry decides even if it has no hedgingPolicy.
func (sc *ServiceConfig) Lookup(fullMethod string) *HedgingPolicy {
	if i := sc.match(fullMethod); i >= 0 {
		return sc.MethodConfigs[i].Hedging
	}
	return nil
}

// match returns the index of the entry that governs fullMethod, or -1.
func (sc *ServiceConfig) match(fullMethod string) int {
	if !strings.HasPrefix(fullMethod, "/") {
		fullMethod = "/" + fullMethod
	}
	svc := ""
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		svc = fullMethod[:i+1]
	}
	best, rank := -1, 0
	for i, mc := range sc.MethodConfigs {
		for _, n := range mc.Names {
			k := n.key()
			r := 0
			switch {
			case k == fullMethod:
				r = 3
			case svc != "" && k == svc:
				r = 2
			case k == "":
				r = 1
			}
			if r > rank {
				best, rank = i, r
			}
		}
	}
	return best
}

// String formats n as "service/method", "service/*" or "*" (the default).
func (n MethodName) String() string {
	switch {
	case n.Service == "" && n.Method == "":
		return "*"
	case n.Method == "":
		return n.Service + "/*"
	}
	return n.Service + "/" + n.Method
}

// Config returns base with the policy applied: MaxAttempts, Delay as
// hedge.Fixed, and Retryable as NonFatal(NonFatalCodes...). Every other
// field of base is kept.
func (p *HedgingPolicy) Config(base hedge.Config) hedge.Config {
	base.MaxAttempts = p.MaxAttempts
	base.Delay = hedge.Fixed(p.Delay)
	base.Retryable = NonFatal(p.NonFatalCodes...)
	return base
}

// String formats p with gRPC's field names, e.g.
// "hedgingPolicy{maxAttempts: 3, hedgingDelay: 10ms, nonFatalStatusCodes: [UNAVAILABLE]}".
func (p *HedgingPolicy) String() string {
	if p == nil {
		return "not hedged"
	}
	names := make([]string, len(p.NonFatalCodes))
	for i, c := range p.NonFatalCodes {
		names[i] = codeName(c)
	}
	return fmt.Sprintf("hedgingPolicy{maxAttempts: %d, hedgingDelay: %v, nonFatalStatusCodes: [%s]}", p.MaxAttempts, p.Delay, strings.Join(names, " "))
}
