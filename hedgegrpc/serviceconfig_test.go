package hedgegrpc_test

import (
	"errors"
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
		{"delay no unit", hp(`{"maxAttempts": 2, "hedgingDelay": "1"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay dot only", hp(`{"maxAttempts": 2, "hedgingDelay": ".s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay trailing dot", hp(`{"maxAttempts": 2, "hedgingDelay": "1.s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay sign", hp(`{"maxAttempts": 2, "hedgingDelay": "+1s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a duration"},
		{"delay too precise", hp(`{"maxAttempts": 2, "hedgingDelay": "0.0000000001s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "more than 9 fractional digits"},
		{"delay too long", hp(`{"maxAttempts": 2, "hedgingDelay": "9223372037s"}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "too long"},
		{"delay number", hp(`{"maxAttempts": 2, "hedgingDelay": 0.01}`), "methodConfig[0].hedgingPolicy.hedgingDelay", "not a string"},
		{"codes not a list", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": "UNAVAILABLE"}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes", "not a list"},
		{"code unknown", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["UNAVAILABLE", "NOPE"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[1]", `"NOPE" is not a status code name`},
		{"code spelling", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["Unavailable"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "write it UNAVAILABLE"},
		{"code Go spelling", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["Canceled"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "is not a status code name"},
		{"code number out of range", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": [17]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "17 is not a status code"},
		{"code OK", hp(`{"maxAttempts": 2, "nonFatalStatusCodes": ["OK"]}`), "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]", "OK is not a failure"},
		{"second entry", `{"methodConfig": [{"name": [{"service": "a"}], "hedgingPolicy": {"maxAttempts": 2}}, {"name": [{"service": "b"}], "hedgingPolicy": {"maxAttempts": 0}}]}`, "methodConfig[1].hedgingPolicy.maxAttempts", "0 is below 2"},
		{"throttling not an object", `{"retryThrottling": 3}`, "retryThrottling", "not an object"},
		{"maxTokens zero", `{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "outside (0, 1000]"},
		{"maxTokens above 1000", `{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "outside (0, 1000]"},
		{"maxTokens missing", `{"retryThrottling": {"tokenRatio": 0.1}}`, "retryThrottling.maxTokens", "missing"},
		{"tokenRatio zero", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}`, "retryThrottling.tokenRatio", "not above 0"},
		{"tokenRatio negative", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": -1}}`, "retryThrottling.tokenRatio", "not above 0"},
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
		"retryThrottling.tokenRatio: 0 is not above 0",
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
		`[`, `null`, `""`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, js string) {
		sc, err := hedgegrpc.ParseServiceConfig(js)
		if err != nil {
			var ce *hedgegrpc.ConfigError
			if !errors.As(err, &ce) || ce.Msg == "" {
				t.Fatalf("error %v is not a *ConfigError with a message", err)
			}
			return
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
