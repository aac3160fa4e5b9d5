package fleetfeature_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetfeature"
)

// The tests run the SDK for real: an isolated OpenFeature API, its event
// executor and clients, and the SDK's in-memory provider, which emits
// PROVIDER_CONFIGURATION_CHANGED when its flags change. The providers
// that read a flag file or a flag server (flagd's, GO Feature Flag's, in
// go-sdk-contrib) are not dependencies of this module, so the SDK's own
// provider is the one the tests run. Where a test needs the provider's error and stale events, which the
// in-memory provider never emits, faultyProvider adds them around it.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const flag = "hedge-policy-checkout"

// policy is a policy document as a flag system holds an object value:
// maps of any, numbers as float64 (as flagd decodes JSON).
func policy(version float64, mode string) map[string]any {
	return map[string]any{
		"service": "checkout",
		"version": version,
		"hedgers": map[string]any{
			"*": map[string]any{"mode": mode, "rollout": 0.1},
		},
	}
}

// flags is a flag set with flag's one variant set to value.
func flags(value any) map[string]memprovider.InMemoryFlag {
	return map[string]memprovider.InMemoryFlag{
		flag: {
			Key:            flag,
			State:          memprovider.Enabled,
			DefaultVariant: "current",
			Variants:       map[string]any{"current": value},
		},
	}
}

// world is one isolated OpenFeature API with a provider set, a Source
// on its client, and Watch running in its own goroutine.
type world struct {
	t       *testing.T
	api     *openfeature.EvaluationAPI
	client  *countingClient
	reports chan fleet.Report
	cancel  context.CancelFunc
	done    chan error
}

// start sets p as the API's provider without waiting for it to be
// ready, and starts Watch on a Source for the pod "pod-a".
func start(t *testing.T, p openfeature.FeatureProvider) *world {
	t.Helper()
	api := isolated.NewAPI()
	if err := api.SetProvider(t.Context(), p); err != nil {
		t.Fatalf("SetProvider: %v", err)
	}
	w := &world{
		t:       t,
		api:     api,
		client:  &countingClient{IClient: api.NewClient()},
		reports: make(chan fleet.Report, 16),
		done:    make(chan error, 1),
	}
	src := &fleetfeature.Source{Client: w.client, Flag: flag, Service: "checkout", Instance: "pod-a"}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- src.Watch(ctx, func(r fleet.Report) { w.reports <- r }) }()
	return w
}

// stop ends Watch, checks that it returned ctx's error and removed every
// handler it added, and shuts the API down.
func (w *world) stop() {
	w.t.Helper()
	w.cancel()
	if err := <-w.done; !errors.Is(err, context.Canceled) {
		w.t.Errorf("Watch returned %v, want context.Canceled", err)
	}
	if n := w.client.registered(); n != 0 {
		w.t.Errorf("%d event handlers still registered after Watch returned", n)
	}
	if err := w.api.Shutdown(context.Background()); err != nil {
		w.t.Errorf("Shutdown: %v", err)
	}
}

// next is the next report. In a synctest bubble, a report that never
// comes fails the test as a deadlock instead of hanging it.
func (w *world) next() fleet.Report {
	w.t.Helper()
	return <-w.reports
}

// quiet checks that no report is pending once every goroutine of the
// bubble is blocked.
func (w *world) quiet() {
	w.t.Helper()
	synctest.Wait()
	select {
	case r := <-w.reports:
		w.t.Fatalf("unexpected report %+v", describe(r))
	default:
	}
}

func describe(r fleet.Report) string {
	return fmt.Sprintf("Doc=%q Revision=%d Deleted=%v Err=%v", r.Doc, r.Revision, r.Deleted, r.Err)
}

// wantDoc checks that r carries a document equal, as JSON, to want.
func wantDoc(t *testing.T, r fleet.Report, want map[string]any) {
	t.Helper()
	if r.Err != nil || r.Deleted || r.Revision != 0 {
		t.Fatalf("report %s, want a document at revision 0", describe(r))
	}
	var got map[string]any
	if err := json.Unmarshal(r.Doc, &got); err != nil {
		t.Fatalf("document %q is not JSON: %v", r.Doc, err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(want)
	if string(g) != string(e) {
		t.Fatalf("document %s, want %s", g, e)
	}
}

func TestFirstDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := start(t, memprovider.NewInMemoryProvider(flags(policy(7, "on"))))
		defer w.stop()
		r := w.next()
		wantDoc(t, r, policy(7, "on"))
		if p, err := fleet.Parse(r.Doc); err != nil || p.Version != 7 || p.Hedgers[fleet.All].Rollout == nil {
			t.Errorf("fleet.Parse(%s) = %+v, %v; want version 7 with a rollout", r.Doc, p, err)
		}
		w.quiet()
	})
}

func TestFirstDocumentFromAString(t *testing.T) {
	yaml := "service: checkout\nversion: 7\nhedgers:\n  \"*\": {mode: shadow}\n"
	synctest.Test(t, func(t *testing.T) {
		w := start(t, memprovider.NewInMemoryProvider(flags(yaml)))
		defer w.stop()
		r := w.next()
		if r.Err != nil || r.Deleted || string(r.Doc) != yaml {
			t.Fatalf("report %s, want the string's bytes", describe(r))
		}
		if p, err := fleet.Parse(r.Doc); err != nil || p.Version != 7 || p.Hedgers[fleet.All].Mode != "shadow" {
			t.Errorf("fleet.Parse(%q) = %+v, %v; want version 7 in shadow", r.Doc, p, err)
		}
	})
}

func TestChangeEventBringsNewDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := memprovider.NewInMemoryProvider(flags(policy(7, "on")))
		w := start(t, p)
		defer w.stop()
		wantDoc(t, w.next(), policy(7, "on"))

		p.UpdateFlags(flags(policy(8, "off")))
		wantDoc(t, w.next(), policy(8, "off"))

		// A change to another flag leaves the document as it is: no
		// report, so the Watcher does not count a refused equal version.
		other := flags(policy(8, "off"))
		other["unrelated"] = memprovider.InMemoryFlag{Key: "unrelated", State: memprovider.Enabled, DefaultVariant: "x", Variants: map[string]any{"x": true}}
		p.UpdateFlags(other)
		w.quiet()

		p.UpdateFlags(flags(policy(9, "shadow")))
		wantDoc(t, w.next(), policy(9, "shadow"))
	})
}

func TestInvalidFlagValueReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		doc   string
	}{
		{"a boolean", true, "true"},
		{"a number", 7.0, "7"},
		{"a list", []any{"on"}, `["on"]`},
		{"a string that is not a document", "version: [", "version: ["},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := memprovider.NewInMemoryProvider(flags(policy(7, "on")))
				w := start(t, p)
				defer w.stop()
				wantDoc(t, w.next(), policy(7, "on"))

				p.UpdateFlags(flags(tc.value))
				r := w.next()
				if r.Err != nil || r.Deleted || string(r.Doc) != tc.doc {
					t.Fatalf("report %s, want the document %q for the Watcher to refuse", describe(r), tc.doc)
				}
				if _, err := fleet.Parse(r.Doc); !errors.Is(err, fleet.ErrInvalidDocument) {
					t.Errorf("fleet.Parse(%q) = %v, want an error matching ErrInvalidDocument", r.Doc, err)
				}
			})
		})
	}
}

func TestMissingOrDisabledFlagIsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := memprovider.NewInMemoryProvider(flags(policy(7, "on")))
		w := start(t, p)
		defer w.stop()
		wantDoc(t, w.next(), policy(7, "on"))

		p.UpdateFlags(map[string]memprovider.InMemoryFlag{})
		if r := w.next(); !r.Deleted || r.Err != nil || r.Doc != nil {
			t.Fatalf("flag removed: report %s, want Deleted", describe(r))
		}

		p.UpdateFlags(flags(policy(8, "on")))
		wantDoc(t, w.next(), policy(8, "on"))

		disabled := flags(policy(8, "on"))
		f := disabled[flag]
		f.State = memprovider.Disabled
		disabled[flag] = f
		p.UpdateFlags(disabled)
		if r := w.next(); !r.Deleted || r.Err != nil || r.Doc != nil {
			t.Fatalf("flag disabled: report %s, want Deleted", describe(r))
		}
	})
}

func TestProviderErrorReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFaultyProvider(flags(policy(7, "on")))
		w := start(t, p)
		defer w.stop()
		wantDoc(t, w.next(), policy(7, "on"))

		p.emit(openfeature.ProviderError, "sync stream closed: connection refused")
		r := w.next()
		if !errors.Is(r.Err, fleetfeature.ErrProvider) || r.Doc != nil || r.Deleted {
			t.Fatalf("provider error: report %s, want an Err matching ErrProvider", describe(r))
		}
		if !strings.Contains(r.Err.Error(), "connection refused") || !strings.Contains(r.Err.Error(), flag) {
			t.Errorf("error %q does not name the flag and the provider's message", r.Err)
		}

		// Ready again with the same document: reported again, since the
		// last report was an error and the document says the store is back.
		p.emit(openfeature.ProviderReady, "reconnected")
		wantDoc(t, w.next(), policy(7, "on"))

		p.emit(openfeature.ProviderStale, "cache is 5m old")
		r = w.next()
		if !errors.Is(r.Err, fleetfeature.ErrStale) || errors.Is(r.Err, fleetfeature.ErrProvider) {
			t.Fatalf("provider stale: report %s, want an Err matching ErrStale only", describe(r))
		}
		if !strings.Contains(r.Err.Error(), "cache is 5m old") {
			t.Errorf("error %q does not carry the provider's message", r.Err)
		}

		// A change while stale does not hide the staleness.
		p.setFlags(flags(policy(8, "on")))
		p.emit(openfeature.ProviderConfigChange, "")
		w.quiet()

		p.emit(openfeature.ProviderReady, "")
		wantDoc(t, w.next(), policy(8, "on"))
	})
}

func TestProviderFailingAtStartReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFaultyProvider(flags(policy(7, "on")))
		p.initErr = errors.New("dial flagd:8015: connection refused")
		w := start(t, p)
		defer w.stop()
		r := w.next()
		if !errors.Is(r.Err, fleetfeature.ErrProvider) {
			t.Fatalf("report %s, want an Err matching ErrProvider", describe(r))
		}
		if !strings.Contains(r.Err.Error(), string(openfeature.ErrorState)) {
			t.Errorf("error %q does not say the provider's state", r.Err)
		}
	})
}

func TestNothingReportedUntilProviderReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFaultyProvider(flags(policy(7, "on")))
		p.initGate = make(chan struct{})
		w := start(t, p)
		defer w.stop()
		w.quiet()
		close(p.initGate)
		wantDoc(t, w.next(), policy(7, "on"))
	})
}

func TestTargetingByInstanceAndService(t *testing.T) {
	// The flag's variant depends on the evaluation context, as a flag
	// system's targeting rule would: the pod's instance name is the
	// targeting key and the service is an attribute.
	eval := func(f memprovider.InMemoryFlag, c openfeature.FlattenedContext) (any, openfeature.ProviderResolutionDetail) {
		if c[fleetfeature.ServiceAttribute] != "checkout" || c["zone"] != "eu-1" {
			return nil, openfeature.ProviderResolutionDetail{ResolutionError: openfeature.NewInvalidContextResolutionError(fmt.Sprintf("context %v", c))}
		}
		v := "out"
		if c[openfeature.TargetingKey] == "pod-a" {
			v = "in"
		}
		return f.Variants[v], openfeature.ProviderResolutionDetail{Variant: v, Reason: openfeature.TargetingMatchReason}
	}
	fs := map[string]memprovider.InMemoryFlag{flag: {
		Key: flag, State: memprovider.Enabled, DefaultVariant: "out",
		Variants:         map[string]any{"in": policy(7, "on"), "out": policy(7, "shadow")},
		ContextEvaluator: &eval,
	}}
	synctest.Test(t, func(t *testing.T) {
		api := isolated.NewAPI()
		defer func() { _ = api.Shutdown(context.Background()) }()
		if err := api.SetProviderAndWait(t.Context(), memprovider.NewInMemoryProvider(fs)); err != nil {
			t.Fatal(err)
		}
		for pod, want := range map[string]map[string]any{"pod-a": policy(7, "on"), "pod-b": policy(7, "shadow")} {
			src := &fleetfeature.Source{
				Client: api.NewClient(), Flag: flag, Service: "checkout", Instance: pod,
				Attributes: map[string]any{"zone": "eu-1", openfeature.TargetingKey: "overridden", fleetfeature.ServiceAttribute: "overridden"},
			}
			ctx, cancel := context.WithCancel(t.Context())
			var got fleet.Report
			err := src.Watch(ctx, func(r fleet.Report) { got = r; cancel() })
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Watch: %v", err)
			}
			wantDoc(t, got, want)
		}
	})
}

func TestWatchEndRemovesHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := memprovider.NewInMemoryProvider(flags(policy(7, "on")))
		w := start(t, p)
		wantDoc(t, w.next(), policy(7, "on"))
		if n := w.client.registered(); n != 4 {
			t.Errorf("%d handlers registered while watching, want 4 (ready, change, stale, error)", n)
		}
		w.cancel()
		if err := <-w.done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch returned %v, want context.Canceled", err)
		}
		// After Watch returned, a change reaches no handler and no report.
		p.UpdateFlags(flags(policy(8, "on")))
		w.quiet()
		if n := w.client.registered(); n != 0 {
			t.Errorf("%d event handlers still registered after Watch returned", n)
		}
		if err := w.api.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEveryReadsAProviderWithoutEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memprovider.NewInMemoryProvider(flags(policy(7, "on")))
		api := isolated.NewAPI()
		defer func() { _ = api.Shutdown(context.Background()) }()
		if err := api.SetProviderAndWait(t.Context(), silentProvider{mem}); err != nil {
			t.Fatal(err)
		}
		reports := make(chan fleet.Report, 4)
		src := &fleetfeature.Source{Client: api.NewClient(), Flag: flag, Service: "checkout", Instance: "pod-a", Every: time.Minute}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Watch(ctx, func(r fleet.Report) { reports <- r }) }()
		defer func() { cancel(); <-done }()

		wantDoc(t, <-reports, policy(7, "on"))
		mem.UpdateFlags(flags(policy(8, "on")))
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if len(reports) != 0 {
			t.Fatalf("a report before Every passed")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case r := <-reports:
			wantDoc(t, r, policy(8, "on"))
		default:
			t.Fatal("no report one Every after the change")
		}
		// The same value at the next tick is not reported again.
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(reports) != 0 {
			t.Fatalf("the same document reported again")
		}
	})
}

// silentProvider serves the in-memory provider's flags and emits no
// events, as some providers do.
type silentProvider struct{ p *memprovider.InMemoryProvider }

func (s silentProvider) Metadata() openfeature.Metadata { return openfeature.Metadata{Name: "silent"} }
func (s silentProvider) Hooks() []openfeature.Hook      { return nil }
func (s silentProvider) BooleanEvaluation(ctx context.Context, f string, d bool, c openfeature.FlattenedContext) openfeature.BoolResolutionDetail {
	return s.p.BooleanEvaluation(ctx, f, d, c)
}
func (s silentProvider) StringEvaluation(ctx context.Context, f string, d string, c openfeature.FlattenedContext) openfeature.StringResolutionDetail {
	return s.p.StringEvaluation(ctx, f, d, c)
}
func (s silentProvider) FloatEvaluation(ctx context.Context, f string, d float64, c openfeature.FlattenedContext) openfeature.FloatResolutionDetail {
	return s.p.FloatEvaluation(ctx, f, d, c)
}
func (s silentProvider) IntEvaluation(ctx context.Context, f string, d int64, c openfeature.FlattenedContext) openfeature.IntResolutionDetail {
	return s.p.IntEvaluation(ctx, f, d, c)
}
func (s silentProvider) ObjectEvaluation(ctx context.Context, f string, d any, c openfeature.FlattenedContext) openfeature.InterfaceResolutionDetail {
	return s.p.ObjectEvaluation(ctx, f, d, c)
}

func TestWatchRefusesAnIncompleteSource(t *testing.T) {
	api := isolated.NewAPI()
	defer func() { _ = api.Shutdown(context.Background()) }()
	// With ctx already ended, a Source that went on to watch would return
	// ctx's error instead.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, src := range []*fleetfeature.Source{
		{Flag: flag},
		{Client: api.NewClient()},
		{Client: api.NewClient(), Flag: flag, Every: -time.Second},
	} {
		err := src.Watch(ctx, func(fleet.Report) { t.Error("report from an incomplete source") })
		if !errors.Is(err, fleetfeature.ErrSource) {
			t.Errorf("Watch on %+v: %v, want ErrSource", src, err)
		}
	}
}

func TestString(t *testing.T) {
	api := isolated.NewAPI()
	defer func() { _ = api.Shutdown(context.Background()) }()
	for _, tc := range []struct {
		src  *fleetfeature.Source
		want string
	}{
		{&fleetfeature.Source{Client: api.NewClient(), Flag: flag}, "openfeature flag " + flag},
		{&fleetfeature.Source{Client: api.NewClient(openfeature.WithDomain("payments")), Flag: flag}, "openfeature flag " + flag + " (domain payments)"},
	} {
		if got := tc.src.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

// countingClient is a real client that counts the event handlers added
// through it and not yet removed.
type countingClient struct {
	openfeature.IClient
	mu  sync.Mutex
	net int
}

func (c *countingClient) AddHandler(t openfeature.EventType, cb openfeature.EventCallback) {
	c.mu.Lock()
	c.net++
	c.mu.Unlock()
	c.IClient.AddHandler(t, cb)
}

func (c *countingClient) RemoveHandler(t openfeature.EventType, cb openfeature.EventCallback) {
	c.mu.Lock()
	c.net--
	c.mu.Unlock()
	c.IClient.RemoveHandler(t, cb)
}

func (c *countingClient) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.net
}

// faultyProvider is the SDK's in-memory provider with the events it
// never emits: a flag system whose connection fails, goes stale and
// comes back. It can also fail or hold its initialisation.
type faultyProvider struct {
	*memprovider.InMemoryProvider
	events   chan openfeature.Event
	initErr  error
	initGate chan struct{}
}

func newFaultyProvider(fs map[string]memprovider.InMemoryFlag) *faultyProvider {
	return &faultyProvider{
		InMemoryProvider: memprovider.NewInMemoryProvider(fs),
		events:           make(chan openfeature.Event, 8),
	}
}

func (p *faultyProvider) Metadata() openfeature.Metadata {
	return openfeature.Metadata{Name: "faulty"}
}

func (p *faultyProvider) Init(openfeature.EvaluationContext) error {
	if p.initGate != nil {
		<-p.initGate
	}
	return p.initErr
}

func (p *faultyProvider) Shutdown() {}

func (p *faultyProvider) EventChannel() <-chan openfeature.Event { return p.events }

// setFlags changes the flags without an event (the in-memory provider's
// own event goes to a channel nobody reads here).
func (p *faultyProvider) setFlags(fs map[string]memprovider.InMemoryFlag) {
	p.UpdateFlags(fs)
}

func (p *faultyProvider) emit(t openfeature.EventType, msg string) {
	p.events <- openfeature.Event{
		ProviderName:         "faulty",
		EventType:            t,
		ProviderEventDetails: openfeature.ProviderEventDetails{Message: msg},
	}
}
