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
	// Warnings are the near misses ParseServiceConfig found but did not
	// refuse, each naming its field and what to write instead: a key that
	// differs from a gRPC field name only in case (hedgegrpc and gRPC-Go
	// read it, other gRPC implementations do not), an unknown key close to
	// a gRPC field name in an object that gRPC leaves open to other fields
	// ("hedgingPolicey" in a methodConfig entry is ignored, by gRPC too, so
	// the entry does not hedge), a gRPC field hedgegrpc does not read
	// spelled in snake_case, a field that belongs in another object, and a
	// hedgingPolicy in an entry without names. Log them, or fail on them in
	// a test of your configs; NewFromServiceConfig ignores them.
	Warnings []*ConfigError
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
	// 2 to hedge.HardMaxAttempts, which is gRPC's limit too.
	// ParseServiceConfig caps larger values at it, as gRPC does.
	MaxAttempts int
	// Delay is hedgingDelay: the wait before each further copy. Zero
	// sends every copy at once; hedge.Never sends none on the timer (a
	// failure with a non-fatal code still sends the next copy at once).
	// ParseServiceConfig gives hedge.Never for any hedgingDelay from
	// "9223372036.854775807s", the longest time.Duration, up to the proto
	// maximum, "315576000000.999999999s".
	Delay time.Duration
	// NonFatalCodes are nonFatalStatusCodes: a copy failing with one of
	// them sends the next copy at once; any other code ends the call.
	// Empty means every failure ends the call.
	NonFatalCodes []codes.Code
}

// RetryThrottling is a parsed retryThrottling: gRPC's token bucket that
// stops hedges while too many requests fail. It maps onto hedge.NewThrottle:
// MaxTokens and TokenRatio are its arguments, and its doc says which values
// it accepts.
type RetryThrottling struct {
	MaxTokens  float64
	TokenRatio float64
}

// ConfigError is one mistake in a service config, or one warning (see
// ServiceConfig.Warnings). Field is its path in the JSON, such as
// "methodConfig[0].hedgingPolicy.maxAttempts" ("" for the document as a
// whole); for a misspelt key it ends with the key as written, such as
// "methodConfig[0].hedging_policy". ParseServiceConfig and
// NewFromServiceConfig return every mistake found, joined with
// errors.Join; errors.As finds the first.
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
// hedging policies and retryThrottling. It returns every mistake at once,
// each a *ConfigError naming its field and saying what to do.
//
// The checks: hedgingPolicy.maxAttempts is required, an integer and at
// least 2 (above 5 is capped at 5, as in gRPC); hedgingDelay, if present,
// is a proto Duration string such as "0.010s" or ".5s", not negative,
// at most "315576000000.999999999s" (absent means "0s": every copy at
// once; from the longest time.Duration up it is hedge.Never); nonFatalStatusCodes,
// if present, lists code names such as "UNAVAILABLE" or numbers 1 to 16;
// an entry may not set both retryPolicy and hedgingPolicy; a name needs a
// service if it has a method, and no name may appear twice; retryThrottling
// needs maxTokens and tokenRatio that hedge.NewThrottle accepts.
//
// Field names: gRPC ignores keys it does not know, so a misspelt key
// silently turns hedging off. ParseServiceConfig therefore refuses a key
// that is certainly wrong: another spelling of a field it reads, which
// neither it nor gRPC would read ("hedging_policy", "max-attempts"), a key
// in hedgingPolicy, retryThrottling or a name that is not one of their
// fields (gRPC defines exactly those), and a field given twice. Keys that
// are probably wrong are accepted and reported in ServiceConfig.Warnings
// (see there). Keys that differ only in case are read, as gRPC-Go reads
// them (encoding/json matches case-insensitively). Any other key, such as
// timeout or loadBalancingConfig, is left to gRPC.
func ParseServiceConfig(js string) (*ServiceConfig, error) {
	var p parser
	sc := p.parse([]byte(js))
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	sc.Warnings = p.warns
	return sc, nil
}

type parser struct {
	errs  []error
	warns []*ConfigError
}

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) warn(field, format string, args ...any) {
	p.warns = append(p.warns, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
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
	p.keys("", data, &topFields)
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
	p.keys(path, raw, &methodFields)
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
			field := fmt.Sprintf("%s.name[%d]", path, j)
			if err := json.Unmarshal(rn, &n); err != nil {
				p.fail(field, "not an object of strings: give {\"service\": \"pkg.Service\", \"method\": \"Method\"}")
				continue
			}
			p.keys(field, rn, &nameFields)
			mc.Names = append(mc.Names, MethodName{Service: n.Service, Method: n.Method})
		}
	}
	if present(in.HedgingPolicy) {
		if present(in.RetryPolicy) {
			p.fail(path, "sets both retryPolicy and hedgingPolicy: gRPC allows one per method config, keep one")
		}
		if !present(in.Name) {
			p.warn(path+".name", "missing: an entry without names applies to no method, so its hedgingPolicy is never used; add \"name\": [{}] for every method, or name the services and methods")
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
	p.keys(path, raw, &hedgingFields)
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
			c, err := parseCode(rc)
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
	p.keys(path, raw, &throttlingFields)
	// Each field is checked on its own, so that every mistake is reported
	// even when the other field is missing or wrong.
	var vals [2]*float64
	for i, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"maxTokens", in.MaxTokens}, {"tokenRatio", in.TokenRatio}} {
		n, err := number(f.raw)
		switch {
		case !present(f.raw):
			p.fail(path+"."+f.name, "missing: it is required (e.g. {\"maxTokens\": 10, \"tokenRatio\": 0.1})")
		case err != nil:
			p.fail(path+"."+f.name, "%s", err)
		default:
			vals[i] = &n
		}
	}
	errs := checkThrottle(path, vals[0], vals[1])
	p.errs = append(p.errs, errs...)
	if vals[0] == nil || vals[1] == nil || len(errs) > 0 {
		return nil
	}
	return &RetryThrottling{MaxTokens: *vals[0], TokenRatio: *vals[1]}
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

// maxProtoSeconds is the most whole seconds a google.protobuf.Duration
// holds.
const maxProtoSeconds = 315_576_000_000

// parseDuration parses the JSON form of a google.protobuf.Duration: a
// decimal number of seconds with at most nine fractional digits and an "s"
// suffix ("0.010s", ".5s", "3s"), at most "315576000000.999999999s", the
// proto maximum. Negative values are refused ("-0s" is zero). A value from
// "9223372036.854775807s", the longest time.Duration, on is hedge.Never: no
// call outlives it.
func parseDuration(s string) (time.Duration, error) {
	num, ok := strings.CutSuffix(s, "s")
	num, neg := strings.CutPrefix(num, "-")
	whole, frac, dot := strings.Cut(num, ".")
	if !ok || (whole == "" && frac == "") || (dot && frac == "") || !digits(whole) || !digits(frac) {
		return 0, badDuration(s)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("%q has more than 9 fractional digits: nanoseconds are the finest unit", s)
	}
	if neg && strings.Trim(whole+frac, "0") != "" {
		return 0, fmt.Errorf("%q is negative: use \"0s\" to send every copy at once, or a positive delay", s)
	}
	var secs int64
	if whole = strings.TrimLeft(whole, "0"); whole != "" {
		var err error
		if secs, err = strconv.ParseInt(whole, 10, 64); err != nil || secs > maxProtoSeconds {
			return 0, fmt.Errorf("%q is above the proto Duration maximum, \"%d.999999999s\": use at most that (every delay from \"%s\" up means no hedge on the timer)", s, int64(maxProtoSeconds), formatDuration(hedge.Never))
		}
	}
	var nanos int64
	if frac != "" {
		nanos, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	if secs > maxSeconds || (secs == maxSeconds && nanos > math.MaxInt64%int64(time.Second)) {
		return hedge.Never, nil
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos), nil
}

// badDuration explains why s is not a proto Duration, with the right
// spelling when s is a Go duration ("10ms", "1.s", "+1s") or a bare number.
func badDuration(s string) error {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return fmt.Errorf("%q is not a duration: a service config gives seconds with an \"s\" suffix; write %q", s, formatDuration(d))
	}
	// A bare number: s+"s" has the right form, so this does not recurse.
	if s != "" && digits(s) {
		if _, err := parseDuration(s + "s"); err == nil {
			return fmt.Errorf("%q is not a duration: it has no unit; write %q for seconds", s, s+"s")
		}
	}
	return fmt.Errorf("%q is not a duration: give seconds with an \"s\" suffix, such as \"0.010s\" for 10ms", s)
}

// formatDuration formats d (not negative) as the JSON form of a
// google.protobuf.Duration, with 0, 3, 6 or 9 fractional digits:
// "0.010s", "3s", "9223372036.854775807s".
func formatDuration(d time.Duration) string {
	secs := strconv.FormatInt(int64(d/time.Second), 10)
	ns := int64(d % time.Second)
	if ns == 0 {
		return secs + "s"
	}
	frac := fmt.Sprintf("%09d", ns)
	switch {
	case ns%1e6 == 0:
		frac = frac[:3]
	case ns%1e3 == 0:
		frac = frac[:6]
	}
	return secs + "." + frac + "s"
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

// parseCode decodes one element of nonFatalStatusCodes: a failure code
// given by its canonical name ("UNAVAILABLE") or its number (14).
func parseCode(raw json.RawMessage) (codes.Code, error) {
	c, err := statusCode(raw)
	if err == nil {
		err = checkCode(c)
	}
	return c, err
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
		trimmed := strings.TrimSpace(name)
		if n, err := strconv.ParseUint(trimmed, 10, 8); err == nil && n < uint64(len(codeNames)) {
			if n == 0 {
				return 0, fmt.Errorf("%q is OK, which is not a failure: list failure codes, such as UNAVAILABLE", name)
			}
			return 0, fmt.Errorf("%q is a number in a string: write %d without quotes, or the name %s", name, n, codeNames[n])
		}
		if strings.EqualFold(trimmed, "canceled") {
			return 0, fmt.Errorf("%q is not a status code name: write it CANCELLED", name)
		}
		for c, n := range codeNames {
			if strings.EqualFold(n, trimmed) || strings.EqualFold(strings.ReplaceAll(n, "_", ""), trimmed) {
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

// check reports the mistakes in a throttle.
func (rt *RetryThrottling) check(path string) []error {
	return checkThrottle(path, &rt.MaxTokens, &rt.TokenRatio)
}

// throttleFields are the fields of retryThrottling in the order of
// hedge.NewThrottle's arguments.
var throttleFields = [...]string{"maxTokens", "tokenRatio"}

// checkThrottle reports the mistakes in a throttle's fields as
// hedge.NewThrottle finds them, so that its rules are written once: each
// mistake is a *ConfigError on the field it concerns, with NewThrottle's
// message. nil is a field that is missing or not a number (reported
// already): NaN stands in for it, and what NewThrottle says about it is
// dropped. NewThrottle judges tokenRatio against maxTokens only when
// maxTokens is valid, so one mistake is not reported twice.
func checkThrottle(path string, maxTokens, tokenRatio *float64) []error {
	vals := [...]*float64{maxTokens, tokenRatio}
	if vals[0] == nil && vals[1] == nil {
		return nil
	}
	args := [...]float64{math.NaN(), math.NaN()}
	for i, v := range vals {
		if v != nil {
			args[i] = *v
		}
	}
	_, err := hedge.NewThrottle(args[0], args[1])
	if err == nil {
		return nil
	}
	all := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	}
	var errs []error
	for _, e := range all {
		ce := &ConfigError{Field: path, Msg: e.Error()}
		for i, name := range throttleFields {
			// NewThrottle names the field it refuses: "hedge: throttle
			// maxTokens 0 is outside ...". A message that names none
			// stays on the throttle as a whole.
			if msg, ok := strings.CutPrefix(e.Error(), "hedge: throttle "+name+" "); ok {
				if vals[i] == nil {
					ce = nil
				} else {
					ce.Field, ce.Msg = path+"."+name, msg
				}
				break
			}
		}
		if ce != nil {
			errs = append(errs, ce)
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
// "hedgingPolicy{maxAttempts: 3, hedgingDelay: 10ms, nonFatalStatusCodes: [UNAVAILABLE]}";
// a delay of hedge.Never reads "never".
func (p *HedgingPolicy) String() string {
	if p == nil {
		return "not hedged"
	}
	names := make([]string, len(p.NonFatalCodes))
	for i, c := range p.NonFatalCodes {
		names[i] = codeName(c)
	}
	delay := p.Delay.String()
	if p.Delay == hedge.Never {
		delay = "never"
	}
	return fmt.Sprintf("hedgingPolicy{maxAttempts: %d, hedgingDelay: %s, nonFatalStatusCodes: [%s]}", p.MaxAttempts, delay, strings.Join(names, " "))
}
