package hedgegrpc_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

func TestParseServiceConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name     string
		js       string
		lookups  map[string]string // full method -> HedgingPolicy.String()
		throttle string
		warnings []string // the fields of the expected warnings
	}{
		{
			name: "full",
			js: `{
				"loadBalancingConfig": [{"round_robin": {}}],
				"methodConfig": [{
					"name": [{"service": "pkg.Svc", "method": "Get"}],
					"timeout": "1s", "waitForReady": true,
					"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.010s", "nonFatalStatusCodes": ["UNAVAILABLE", 13]}
				}],
				"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
			}`,
			lookups: map[string]string{
				"/pkg.Svc/Get": "hedgingPolicy{maxAttempts: 3, hedgingDelay: 10ms, nonFatalStatusCodes: [UNAVAILABLE INTERNAL]}",
				"/pkg.Svc/Put": "not hedged",
			},
			throttle: "retryThrottling{maxTokens: 10, tokenRatio: 0.1}",
		},
		{
			name: "A6 example delay without a leading zero, no codes",
			js:   `{"methodConfig": [{"name": [{"service": "pkg.Svc"}], "hedgingPolicy": {"maxAttempts": 4, "hedgingDelay": ".5s"}}]}`,
			lookups: map[string]string{
				"/pkg.Svc/Get": "hedgingPolicy{maxAttempts: 4, hedgingDelay: 500ms, nonFatalStatusCodes: []}",
			},
			throttle: "no retryThrottling",
		},
		{
			name: "delay absent means every copy at once; maxAttempts above 5 is capped",
			js:   `{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 9}}]}`,
			lookups: map[string]string{
				"/any.Svc/Any": "hedgingPolicy{maxAttempts: 5, hedgingDelay: 0s, nonFatalStatusCodes: []}",
			},
			throttle: "no retryThrottling",
		},
		{
			name: "precedence: method over service over default; an entry without policy wins too",
			js: `{"methodConfig": [
				{"name": [{"service": ""}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "1s"}},
				{"name": [{"service": "pkg.Svc"}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "2s"}},
				{"name": [{"service": "pkg.Svc", "method": "Put"}], "retryPolicy": {"maxAttempts": 2}},
				{"name": [{"service": "pkg.Svc", "method": "Get"}, {"service": "other.Svc", "method": "Get"}],
				 "hedgingPolicy": {"maxAttempts": 4, "hedgingDelay": "3.000000001s"}}
			]}`,
			lookups: map[string]string{
				"/pkg.Svc/Get":   "hedgingPolicy{maxAttempts: 4, hedgingDelay: 3.000000001s, nonFatalStatusCodes: []}",
				"/other.Svc/Get": "hedgingPolicy{maxAttempts: 4, hedgingDelay: 3.000000001s, nonFatalStatusCodes: []}",
				"/pkg.Svc/List":  "hedgingPolicy{maxAttempts: 3, hedgingDelay: 2s, nonFatalStatusCodes: []}",
				"/pkg.Svc/Put":   "not hedged",
				"/other.Svc/Put": "hedgingPolicy{maxAttempts: 2, hedgingDelay: 1s, nonFatalStatusCodes: []}",
			},
			throttle: "no retryThrottling",
		},
		{
			name:     "empty",
			js:       `{}`,
			lookups:  map[string]string{"/pkg.Svc/Get": "not hedged"},
			throttle: "no retryThrottling",
		},
		{
			name:     "nulls are absent; an entry without names applies to nothing",
			js:       `{"methodConfig": [{"hedgingPolicy": {"maxAttempts": 2}}, {"name": null, "hedgingPolicy": null}], "retryThrottling": null}`,
			lookups:  map[string]string{"/pkg.Svc/Get": "not hedged"},
			throttle: "no retryThrottling",
			warnings: []string{"methodConfig[0].name"},
		},
		{
			name: "delays too long for a time.Duration, up to the proto maximum, are hedge.Never",
			js: `{"methodConfig": [
				{"name": [{"service": "a"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "9223372036s"}},
				{"name": [{"service": "b"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "9223372036.854775807s"}},
				{"name": [{"service": "c"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "9223372036.854775808s"}},
				{"name": [{"service": "d"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "315576000000s"}},
				{"name": [{"service": "e"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "315576000000.999999999s"}},
				{"name": [{"service": "f"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "-0s"}}
			]}`,
			lookups: map[string]string{
				"/a/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: 2562047h47m16s, nonFatalStatusCodes: []}",
				"/b/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: never, nonFatalStatusCodes: []}",
				"/c/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: never, nonFatalStatusCodes: []}",
				"/d/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: never, nonFatalStatusCodes: []}",
				"/e/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: never, nonFatalStatusCodes: []}",
				"/f/M": "hedgingPolicy{maxAttempts: 2, hedgingDelay: 0s, nonFatalStatusCodes: []}",
			},
			throttle: "no retryThrottling",
		},
		{
			name: "every gRPC field, spelled as gRPC spells it, draws no warning",
			js: `{
				"loadBalancingPolicy": "round_robin", "loadBalancingConfig": [{"round_robin": {}}],
				"healthCheckConfig": {"serviceName": ""}, "x-owner": "team",
				"methodConfig": [
					{"name": [{"service": "pkg.Svc"}], "timeout": "1s", "waitForReady": true,
					 "maxRequestMessageBytes": 1024, "maxResponseMessageBytes": 1024, "comment": "hedged",
					 "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.5s", "nonFatalStatusCodes": [14]}},
					{"name": [{"service": "pkg.Svc", "method": "Put"}],
					 "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}
				],
				"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
			}`,
			lookups:  map[string]string{"/pkg.Svc/Get": "hedgingPolicy{maxAttempts: 2, hedgingDelay: 500ms, nonFatalStatusCodes: [UNAVAILABLE]}", "/pkg.Svc/Put": "not hedged"},
			throttle: "retryThrottling{maxTokens: 10, tokenRatio: 0.1}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := hedgegrpc.ParseServiceConfig(tc.js)
			if err != nil {
				t.Fatal(err)
			}
			for m, want := range tc.lookups {
				if got := sc.Lookup(m).String(); got != want {
					t.Errorf("Lookup(%s) = %s, want %s", m, got, want)
				}
			}
			if got := sc.RetryThrottling.String(); got != tc.throttle {
				t.Errorf("throttling %s, want %s", got, tc.throttle)
			}
			var warned []string
			for _, w := range sc.Warnings {
				warned = append(warned, w.Field)
			}
			if fmt.Sprint(warned) != fmt.Sprint(tc.warnings) {
				t.Errorf("warnings %v, want them for %v", sc.Warnings, tc.warnings)
			}
			if err := sc.Validate(); err != nil {
				t.Errorf("a parsed config fails Validate: %v", err)
			}
			if _, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{}); err != nil {
				t.Errorf("NewFromServiceConfig: %v", err)
			}
		})
	}
}

func TestParseServiceConfigInvalid(t *testing.T) {
	hp := func(policy string) string {
		return `{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": ` + policy + `}]}`
	}
	for _, tc := range []struct {
		name, js, field, msg string
	}{
		{"bad JSON", `{"methodConfig": [`, "", "not a JSON object"},
		{"not an object", `[]`, "", "not a JSON object"},
		{"methodConfig not a list", `{"methodConfig": {}}`, "methodConfig", "not a list"},
		{"entry not an object", `{"methodConfig": [1]}`, "methodConfig[0]", "not an object"},
		{"name not a list", `{"methodConfig": [{"name": {"service": "s"}}]}`, "methodConfig[0].name", "not a list"},
		{"name not strings", `{"methodConfig": [{"name": [{"service": 1}]}]}`, "methodConfig[0].name[0]", "not an object of strings"},
		{"method without service", `{"methodConfig": [{"name": [{"method": "Get"}]}]}`, "methodConfig[0].name[0].service", "name the service"},
		{"duplicate name", `{"methodConfig": [{"name": [{"service": "s"}]}, {"name": [{"service": "s"}]}]}`, "methodConfig[1].name[0]", "already named by methodConfig[0].name[0]"},
		{"retry and hedging", `{"methodConfig": [{"name": [{}], "retryPolicy": {}, "hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0]", "both retryPolicy and hedgingPolicy"},
		{"policy not an object", hp(`[]`), "methodConfig[0].hedgingPolicy", "not an object"},
		{"maxAttempts 1", hp(`{"maxAttempts": 1}`), "methodConfig[0].hedgingPolicy.maxAttempts", "1 is below 2"},
		{"maxAttempts negative", hp(`{"maxAttempts": -3}`), "methodConfig[0].hedgingPolicy.maxAttempts", "-3 is below 2"},
		{"maxAttempts missing", hp(`{"hedgingDelay": "1s"}`), "methodConfig[0].hedgingPolicy.maxAttempts", "missing"},
		{"maxAttempts fraction", hp(`{"maxAttempts": 2.5}`), "methodConfig[0].hedgingPolicy.maxAttempts", "not an integer"},
		{"maxAttempts string", hp(`{"maxAttempts": "3"}`), "methodConfig[0].hedgingPolicy.maxAttempts", "not a number"},
		{"maxAttempts huge", hp(`{"maxAttempts": 1e999}`), "methodConfig[0].hedgingPolicy.maxAttempts", "not a number in range"},
		{"delay negative", hp(`{"maxAttempts": 2, "hedgingDelay": "-1s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "negative"},
		{"delay Go syntax", hp(`{"maxAttempts": 2, "hedgingDelay": "10ms"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", `"10ms" is not a duration`},
		{"delay no unit", hp(`{"maxAttempts": 2, "hedgingDelay": "1"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", `not a duration: it has no unit; write "1s"`},
		{"delay dot only", hp(`{"maxAttempts": 2, "hedgingDelay": ".s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay trailing dot", hp(`{"maxAttempts": 2, "hedgingDelay": "1.s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", `not a duration: a service config gives seconds with an "s" suffix; write "1s"`},
		{"delay sign", hp(`{"maxAttempts": 2, "hedgingDelay": "+1s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", `write "1s"`},
		{"delay exponent", hp(`{"maxAttempts": 2, "hedgingDelay": "1e3s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay too precise", hp(`{"maxAttempts": 2, "hedgingDelay": "0.0000000001s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "more than 9 fractional digits"},
		{"delay above the proto maximum", hp(`{"maxAttempts": 2, "hedgingDelay": "315576000001s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", `above the proto Duration maximum, "315576000000.999999999s"`},
		{"delay far above the proto maximum", hp(`{"maxAttempts": 2, "hedgingDelay": "99999999999999999999s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "above the proto Duration maximum"},
		{"delay negative huge", hp(`{"maxAttempts": 2, "hedgingDelay": "-99999999999999999999s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "negative"},
		{"delay number", hp(`{"maxAttempts": 2, "hedgingDelay": 0.01}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a string"},
		{"codes not a list", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": "UNAVAILABLE"}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes", "not a list"},
		{"code unknown", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["UNAVAILABLE", "NOPE"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[1]", `"NOPE" is not a status code name`},
		{"code spelling", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["Unavailable"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "write it UNAVAILABLE"},
		{"code Go spelling", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["Canceled"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "is not a status code name: write it CANCELLED"},
		{"code spaces", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": [" UNAVAILABLE "]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "write it UNAVAILABLE"},
		{"code number in a string", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["14"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "number in a string: write 14 without quotes, or the name UNAVAILABLE"},
		{"code negative", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": [-1]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "-1 is not a status code"},
		{"code zero", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": [0]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "OK is not a failure"},
		{"code number out of range", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": [17]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "17 is not a status code"},
		{"code OK", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["OK"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "OK is not a failure"},
		{"second entry", `{"methodConfig": [{"name": [{"service": "a"}], "hedgingPolicy": {"maxAttempts": 2}}, {"name": [{"service": "b"}], "hedgingPolicy": {"maxAttempts": 0}}]}`, "methodConfig[1].hedgingPolicy.maxAttempts", "0 is below 2"},
		{"throttling not an object", `{"retryThrottling": 3}`, "retryThrottling", "not an object"},
		{"maxTokens zero", `{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "outside (0, 1000]"},
		{"maxTokens above 1000", `{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "outside (0, 1000]"},
		{"maxTokens missing", `{"retryThrottling": {"tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "missing"},
		{"tokenRatio zero", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}`, "retryThrottling.tokenRatio", "0 is outside [0.001, maxTokens]"},
		{"tokenRatio negative", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": -1}}`, "retryThrottling.tokenRatio", "-1 is outside [0.001, maxTokens]"},
		{"tokenRatio below resolution", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0001}}`, "retryThrottling.tokenRatio", "outside [0.001, maxTokens]"},
		{"tokenRatio string", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": "0.1"}}`, "retryThrottling.tokenRatio", "not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := hedgegrpc.ParseServiceConfig(tc.js)
			if err == nil {
				t.Fatalf("accepted: %+v", sc)
			}
			var ce *hedgegrpc.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(ce.Msg, tc.msg) {
				t.Errorf("got field %q, message %q\nwant field %q, message containing %q", ce.Field, ce.Msg, tc.field, tc.msg)
			}
			if tc.field != "" && !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// Every mistake is reported, not only the first.
func TestParseServiceConfigReportsEveryMistake(t *testing.T) {
	_, err := hedgegrpc.ParseServiceConfig(`{
		"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 1, "hedgingDelay": "-2s", "nonFatalStatusCodes": ["NOPE"]}}],
		"retryThrottling": {"maxTokens": 0, "tokenRatio": 0}
	}`)
	want := []string{
		"methodConfig[0].hedgingPolicy.maxAttempts: 1 is below 2",
		"methodConfig[0].hedgingPolicy.hedgingDelay: \"-2s\" is negative",
		"methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]: \"NOPE\"",
		"retryThrottling.maxTokens: 0 is outside (0, 1000]",
		"retryThrottling.tokenRatio: 0 is outside [0.001, maxTokens]",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\ndoes not contain %q", err, w)
		}
	}
}

// A ServiceConfig built by hand is checked by NewFromServiceConfig, with the
// same field names.
func TestNewFromServiceConfigValidates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sc    hedgegrpc.ServiceConfig
		field string
	}{
		{"maxAttempts", hedgegrpc.ServiceConfig{MethodConfigs: []hedgegrpc.MethodConfig{{Hedging: &hedgegrpc.HedgingPolicy{MaxAttempts: 6}}}}, "methodConfig[0].hedgingPolicy.maxAttempts"},
		{"delay", hedgegrpc.ServiceConfig{MethodConfigs: []hedgegrpc.MethodConfig{{Hedging: &hedgegrpc.HedgingPolicy{MaxAttempts: 2, Delay: -time.Second}}}}, "methodConfig[0].hedgingPolicy.hedgingDelay"},
		{"code", hedgegrpc.ServiceConfig{MethodConfigs: []hedgegrpc.MethodConfig{{Hedging: &hedgegrpc.HedgingPolicy{MaxAttempts: 2, NonFatalCodes: []codes.Code{codes.Unavailable, 99}}}}}, "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[1]"},
		{"name", hedgegrpc.ServiceConfig{MethodConfigs: []hedgegrpc.MethodConfig{{Names: []hedgegrpc.MethodName{{Method: "Get"}}}}}, "methodConfig[0].name[0].service"},
		{"throttling", hedgegrpc.ServiceConfig{RetryThrottling: &hedgegrpc.RetryThrottling{MaxTokens: 10}}, "retryThrottling.tokenRatio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hedgegrpc.NewFromServiceConfig(&tc.sc, hedge.Config{})
			var ce *hedgegrpc.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("error %v, want a *ConfigError for %s", err, tc.field)
			}
		})
	}
}

// retryThrottling is checked by hedge.NewThrottle: ParseServiceConfig and
// Validate refuse what it refuses, each mistake a *ConfigError on its field
// with NewThrottle's message, and accept what it accepts.
func TestRetryThrottlingCheckedByNewThrottle(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name                  string
		maxTokens, tokenRatio float64
		fields                []string // the fields refused, none if valid
	}{
		{"valid", 10, 0.1, nil},
		{"largest bucket, finest ratio", 1000, 0.001, nil},
		{"ratio equal to maxTokens", 4, 4, nil},
		{"ratio with more than 3 decimals", 10, 0.1234, nil}, // rounded to thousandths
		{"maxTokens zero", 0, 0.1, []string{"maxTokens"}},
		{"maxTokens negative", -5, 0.1, []string{"maxTokens"}},
		{"maxTokens too large", 1001, 0.1, []string{"maxTokens"}},
		{"maxTokens NaN", nan, 0.1, []string{"maxTokens"}},
		{"maxTokens infinite", inf, 0.1, []string{"maxTokens"}},
		{"tokenRatio zero", 10, 0, []string{"tokenRatio"}},
		{"tokenRatio negative", 10, -0.5, []string{"tokenRatio"}},
		{"tokenRatio below a thousandth", 10, 0.0009, []string{"tokenRatio"}},
		{"tokenRatio NaN", 10, nan, []string{"tokenRatio"}},
		{"tokenRatio above maxTokens", 1, 2, []string{"tokenRatio"}},
		{"maxTokens below a thousandth", 0.0005, 0.001, []string{"maxTokens"}},
		{"both wrong", 0, 0, []string{"maxTokens", "tokenRatio"}},
		{"tokenRatio not judged against a wrong maxTokens", 2000, 1500, []string{"maxTokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, engineErr := hedge.NewThrottle(tc.maxTokens, tc.tokenRatio)
			check := func(how string, err error) {
				t.Helper()
				if (err == nil) != (engineErr == nil) {
					t.Fatalf("%s: error %v, hedge.NewThrottle's %v", how, err, engineErr)
				}
				if err == nil {
					return
				}
				var got []string
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var ce *hedgegrpc.ConfigError
					if !errors.As(e, &ce) {
						t.Fatalf("%s: %v is not a *ConfigError", how, e)
					}
					field, ok := strings.CutPrefix(ce.Field, "retryThrottling.")
					if !ok || !strings.Contains(engineErr.Error(), "hedge: throttle "+field+" "+ce.Msg) {
						t.Errorf("%s: %s: %s is not hedge.NewThrottle's %q", how, ce.Field, ce.Msg, engineErr)
					}
					if !strings.Contains(ce.Msg, "use e.g.") {
						t.Errorf("%s: %s: %q does not say what to use", how, ce.Field, ce.Msg)
					}
					got = append(got, field)
				}
				if !slices.Equal(got, tc.fields) {
					t.Errorf("%s: refused %v, want %v", how, got, tc.fields)
				}
			}
			sc := hedgegrpc.ServiceConfig{RetryThrottling: &hedgegrpc.RetryThrottling{MaxTokens: tc.maxTokens, TokenRatio: tc.tokenRatio}}
			check("Validate", sc.Validate())
			if math.IsNaN(tc.maxTokens) || math.IsNaN(tc.tokenRatio) || math.IsInf(tc.maxTokens, 0) {
				return // JSON has no such numbers
			}
			js := fmt.Sprintf(`{"retryThrottling": {"maxTokens": %v, "tokenRatio": %v}}`, tc.maxTokens, tc.tokenRatio)
			parsed, err := hedgegrpc.ParseServiceConfig(js)
			check("ParseServiceConfig", err)
			if err == nil {
				if b, err := parsed.RetryThrottling.Budget(); err != nil || b == nil {
					t.Errorf("Budget() = %v, %v after a valid parse", b, err)
				}
			}
		})
	}
}

// HedgingPolicy.Config maps the policy onto a hedge.Config and keeps the
// rest of base.
func TestHedgingPolicyConfig(t *testing.T) {
	p := &hedgegrpc.HedgingPolicy{MaxAttempts: 3, Delay: 20 * time.Millisecond, NonFatalCodes: []codes.Code{codes.Unavailable}}
	cfg := p.Config(hedge.Config{Replicas: 4, MaxHedgesInFlight: 7})
	if cfg.MaxAttempts != 3 || cfg.Delay != hedge.Fixed(20*time.Millisecond) || cfg.Replicas != 4 || cfg.MaxHedgesInFlight != 7 || cfg.Retryable == nil {
		t.Errorf("config %+v", cfg)
	}
}

// FuzzParseServiceConfig checks that the parser never panics, that every
// error is a *ConfigError, and that whatever it accepts is within bounds
// and builds an Interceptor.
func FuzzParseServiceConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"methodConfig": [{"name": [{"service": "s", "method": "m"}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.010s", "nonFatalStatusCodes": ["UNAVAILABLE", 13]}}], "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}`,
		`{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 9, "hedgingDelay": ".5s"}}]}`,
		`{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 1, "hedgingDelay": "-1s"}}]}`,
		`{"methodConfig": [{"name": [{"method": "m"}], "retryPolicy": {}, "hedgingPolicy": {"maxAttempts": 2}}]}`,
		`{"retryThrottling": {"maxTokens": 1000, "tokenRatio": 0.001}}`,
		`{"methodConfig": [{"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "9223372036.854775807s"}}]}`,
		`{"methodConfig": [{"name": [{}], "hedging_policy": {"maxAttempts": 2}, "HedgingPolicy": {"maxAttempts": 2}}]}`,
		`{"methodConfig": [{"names": [{"service": "s", "methods": "m"}], "hedgingPolicey": {}, "wait_for_ready": true}], "maxTokens": 1}`,
		`{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "315576000000s", "jitter": 1}}]}`,
		`{"retryThrottling": {"maxTokens": 0}}`,
		`[`, `null`, `""`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, js string) {
		sc, err := hedgegrpc.ParseServiceConfig(js)
		if err != nil {
			if sc != nil {
				t.Fatalf("both a config and an error: %v", err)
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ce *hedgegrpc.ConfigError
				if !errors.As(e, &ce) || ce.Msg == "" {
					t.Fatalf("error %v is not a *ConfigError with a message", e)
				}
			}
			return
		}
		for _, w := range sc.Warnings {
			if w == nil || w.Field == "" || w.Msg == "" {
				t.Fatalf("warning %#v without a field or a message", w)
			}
		}
		for _, mc := range sc.MethodConfigs {
			p := mc.Hedging
			if p == nil {
				continue
			}
			if p.MaxAttempts < 2 || p.MaxAttempts > hedge.HardMaxAttempts || p.Delay < 0 {
				t.Fatalf("accepted out of bounds: %v", p)
			}
			for _, c := range p.NonFatalCodes {
				if c == codes.OK || c > codes.Unauthenticated {
					t.Fatalf("accepted code %d", c)
				}
			}
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("accepted but invalid: %v", err)
		}
		if _, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{}); err != nil {
			t.Fatalf("accepted but does not build: %v", err)
		}
		_ = sc.Lookup("/s/m")
	})
}

// gRPC ignores keys it does not know, so a misspelt key turns hedging off
// without a word. Keys that are certainly wrong are refused: another
// spelling of a field hedgegrpc reads, an unknown key where gRPC defines
// every field (hedgingPolicy, retryThrottling, a name), a field set twice.
func TestParseServiceConfigRefusesMisspeltKeys(t *testing.T) {
	entry := func(body string) string {
		return `{"methodConfig": [{"name": [{"service": "s"}], ` + body + `}]}`
	}
	for _, tc := range []struct {
		name, js, field, msg string
	}{
		{"snake_case hedgingPolicy", entry(`"hedging_policy": {"maxAttempts": 2}`), "methodConfig[0].hedging_policy", `gRPC spells this field "hedgingPolicy"`},
		{"kebab-case hedgingPolicy", entry(`"hedging-policy": {"maxAttempts": 2}`), "methodConfig[0].hedging-policy", `write it "hedgingPolicy"`},
		{"snake_case methodConfig", `{"method_config": []}`, "method_config", `write it "methodConfig"`},
		{"snake_case retryThrottling", `{"retry_throttling": {"maxTokens": 10, "tokenRatio": 0.1}}`, "retry_throttling", `write it "retryThrottling"`},
		{"snake_case maxAttempts", entry(`"hedgingPolicy": {"max_attempts": 2}`), "methodConfig[0].hedgingPolicy.max_attempts", `write it "maxAttempts"`},
		{"snake_case nonFatalStatusCodes", entry(`"hedgingPolicy": {"maxAttempts": 2, "non_fatal_status_codes": [14]}`), "methodConfig[0].hedgingPolicy.non_fatal_status_codes", `write it "nonFatalStatusCodes"`},
		{"unknown in a name", `{"methodConfig": [{"name": [{"service_name": "s"}]}]}`, "methodConfig[0].name[0].service_name", "a name has only service and method"},
		{"typo in hedgingPolicy", entry(`"hedgingPolicy": {"maxAttempts": 2, "hedgingDelya": "1s"}`), "methodConfig[0].hedgingPolicy.hedgingDelya", `did you mean "hedgingDelay"?`},
		{"unknown in hedgingPolicy", entry(`"hedgingPolicy": {"maxAttempts": 2, "jitter": 0.1}`), "methodConfig[0].hedgingPolicy.jitter", "hedgingPolicy has only maxAttempts, hedgingDelay and nonFatalStatusCodes"},
		{"typo in retryThrottling", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1, "maxToken": 5}}`, "retryThrottling.maxToken", `did you mean "maxTokens"?`},
		{"typo in a name", `{"methodConfig": [{"name": [{"service": "s", "methods": "Get"}]}]}`, "methodConfig[0].name[0].methods", `did you mean "method"?`},
		{"misplaced in hedgingPolicy", entry(`"hedgingPolicy": {"maxAttempts": 2, "timeout": "1s"}`), "methodConfig[0].hedgingPolicy.timeout", "hedgingPolicy has only"},
		{"set twice", entry(`"hedgingPolicy": {"maxAttempts": 2, "MaxAttempts": 3}`), "methodConfig[0].hedgingPolicy.MaxAttempts", `sets maxAttempts a second time ("maxAttempts" set it already)`},
		{"set twice, same spelling", entry(`"hedgingPolicy": {"maxAttempts": 2}, "hedgingPolicy": {"maxAttempts": 3}`), "methodConfig[0].hedgingPolicy", "sets hedgingPolicy a second time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := hedgegrpc.ParseServiceConfig(tc.js)
			if err == nil {
				t.Fatalf("accepted: %+v", sc)
			}
			var ce *hedgegrpc.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(ce.Msg, tc.msg) {
				t.Errorf("got field %q, message %q\nwant field %q, message containing %q", ce.Field, ce.Msg, tc.field, tc.msg)
			}
		})
	}
}

// Keys that are probably wrong are accepted and reported in Warnings, each
// with its field and what to write; they change nothing else.
func TestParseServiceConfigWarnsOnNearMisses(t *testing.T) {
	for _, tc := range []struct {
		name, js, field, msg string
		hedged               bool // whether /s/M is hedged
	}{
		{"case", `{"methodConfig": [{"name": [{"service": "s"}], "HedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0].HedgingPolicy", `differs from "hedgingPolicy" only in case`, true},
		{"case inside hedgingPolicy", `{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": {"MAXATTEMPTS": 2}}]}`, "methodConfig[0].hedgingPolicy.MAXATTEMPTS", `write it "maxAttempts"`, true},
		{"typo", `{"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicey": {"maxAttempts": 2}}]}`, "methodConfig[0].hedgingPolicey", `unknown field, ignored by gRPC too: did you mean "hedgingPolicy"?`, false},
		{"typo in name", `{"methodConfig": [{"names": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0].names", `did you mean "name"?`, false},
		{"typo at the top", `{"methodConfigs": [{"name": [{"service": "s"}], "hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfigs", `did you mean "methodConfig"?`, false},
		{"gRPC field in snake_case", `{"methodConfig": [{"name": [{"service": "s"}], "wait_for_ready": true, "hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0].wait_for_ready", `ignored by gRPC, which spells this field "waitForReady"`, true},
		{"misplaced at the top", `{"hedgingPolicy": {"maxAttempts": 2}}`, "hedgingPolicy", "belongs in a methodConfig entry", false},
		{"misplaced in an entry", `{"methodConfig": [{"service": "s", "hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0].service", "belongs in a name list entry", false},
		{"no names", `{"methodConfig": [{"hedgingPolicy": {"maxAttempts": 2}}]}`, "methodConfig[0].name", "applies to no method", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := hedgegrpc.ParseServiceConfig(tc.js)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Warnings) == 0 {
				t.Fatalf("no warning, want one for %s", tc.field)
			}
			found := false
			for _, w := range sc.Warnings {
				found = found || w.Field == tc.field && strings.Contains(w.Msg, tc.msg)
			}
			if !found {
				t.Errorf("warnings %v\nwant one for %q containing %q", sc.Warnings, tc.field, tc.msg)
			}
			if hedged := sc.Lookup("/s/M") != nil; hedged != tc.hedged {
				t.Errorf("/s/M hedged: %v, want %v", hedged, tc.hedged)
			}
		})
	}
}

// Every mistake is reported at once, in every field of every entry and in
// retryThrottling, also when a field is missing next to a wrong one.
func TestParseServiceConfigReportsEveryMistakeAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		js   string
		want []string
	}{
		{"throttling: a wrong maxTokens next to a missing tokenRatio", `{"retryThrottling": {"maxTokens": 0}}`, []string{
			"retryThrottling.maxTokens: 0 is outside (0, 1000]",
			"retryThrottling.tokenRatio: missing",
		}},
		{"throttling: a missing maxTokens next to a wrong tokenRatio", `{"retryThrottling": {"tokenRatio": -1}}`, []string{
			"retryThrottling.maxTokens: missing",
			"retryThrottling.tokenRatio: -1 is outside [0.001, maxTokens]",
		}},
		{"throttling: both out of range", `{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.0001}}`, []string{
			"retryThrottling.maxTokens: 1001 is outside (0, 1000]",
			"retryThrottling.tokenRatio: 0.0001 is outside [0.001, maxTokens]",
		}},
		{"throttling: tokenRatio above maxTokens", `{"retryThrottling": {"maxTokens": 1, "tokenRatio": 2}}`, []string{
			"retryThrottling.tokenRatio: 2 is outside [0.001, maxTokens]",
		}},
		{"every entry, every field", `{
			"methodConfig": [
				{"name": [{"method": "Get"}], "hedgingPolicy": {"hedgingDelay": "-1s", "nonFatalStatusCodes": ["unavailable", 17]}},
				{"name": [{"service": "s"}, {"service": "s"}], "hedging_policy": {"maxAttempts": 2}},
				{"name": [{"service": "t"}], "retryPolicy": {}, "hedgingPolicy": {"maxAttempts": 1.5, "hedgingDelay": 1, "jitter": 1}}
			],
			"retryThrottling": {"maxTokens": 0, "token_ratio": 0.1}
		}`, []string{
			"methodConfig[0].hedgingPolicy.maxAttempts: missing",
			`methodConfig[0].hedgingPolicy.hedgingDelay: "-1s" is negative`,
			`methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]: "unavailable" is not a status code name: write it UNAVAILABLE`,
			"methodConfig[0].hedgingPolicy.nonFatalStatusCodes[1]: 17 is not a status code",
			`methodConfig[1].hedging_policy: is not read: gRPC spells this field "hedgingPolicy"`,
			"methodConfig[2]: sets both retryPolicy and hedgingPolicy",
			"methodConfig[2].hedgingPolicy.jitter: unknown field",
			"methodConfig[2].hedgingPolicy.maxAttempts: 1.5 is not an integer",
			"methodConfig[2].hedgingPolicy.hedgingDelay: not a string",
			"methodConfig[0].name[0].service: empty with method",
			"methodConfig[1].name[1]: s/* is already named by methodConfig[1].name[0]",
			`retryThrottling.token_ratio: is not read: gRPC spells this field "tokenRatio"`,
			"retryThrottling.maxTokens: 0 is outside (0, 1000]",
			"retryThrottling.tokenRatio: missing",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hedgegrpc.ParseServiceConfig(tc.js)
			var got []string
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					var ce *hedgegrpc.ConfigError
					if !errors.As(e, &ce) {
						t.Errorf("%v is not a *ConfigError", e)
						continue
					}
					got = append(got, ce.Field+": "+ce.Msg)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d mistakes reported, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("no mistake reported as %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// NewFromServiceConfig reports every mistake in its arguments at once.
func TestNewFromServiceConfigReportsEveryMistakeAtOnce(t *testing.T) {
	budget, _ := hedge.NewBudget(0.1, 10)
	sc := &hedgegrpc.ServiceConfig{
		MethodConfigs: []hedgegrpc.MethodConfig{
			{Names: []hedgegrpc.MethodName{{Method: "Get"}}, Hedging: &hedgegrpc.HedgingPolicy{MaxAttempts: 1, Delay: -time.Second}},
			{Hedging: &hedgegrpc.HedgingPolicy{MaxAttempts: 2, NonFatalCodes: []codes.Code{codes.OK}}},
		},
		RetryThrottling: &hedgegrpc.RetryThrottling{MaxTokens: 0},
	}
	_, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{Budget: budget, MaxHedgesInFlight: -1}, hedgegrpc.WithOpName(nil))
	for _, want := range []string{
		"WithOpName(nil)",
		"methodConfig[0].name[0].service: empty",
		"methodConfig[0].hedgingPolicy.maxAttempts: 1 is below 2",
		"methodConfig[0].hedgingPolicy.hedgingDelay: -1s is negative",
		"methodConfig[1].hedgingPolicy.nonFatalStatusCodes[0]: OK is not a failure",
		"retryThrottling.maxTokens: 0 is outside",
		"retryThrottling.tokenRatio: 0 is outside [0.001, maxTokens]",
		"sets retryThrottling and base Config sets Budget",
		"base Config: hedge: Config.MaxHedgesInFlight",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not contain %q", err, want)
		}
	}
	var ce *hedgegrpc.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("errors.As finds no *ConfigError in %v", err)
	}
}
