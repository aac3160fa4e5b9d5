package fleetfeature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/tailcut/hedge/fleet"
)

// ServiceAttribute is the evaluation context attribute that holds
// [Source.Service]. A flag's targeting rules can match on it.
const ServiceAttribute = "service"

// Errors a [Source] reports or returns. Match them with [errors.Is].
var (
	// ErrProvider is in [fleet.Report.Err] when the provider is in error
	// or cannot evaluate the flag. The last good policy stays in force.
	ErrProvider = errors.New("fleetfeature: the flag provider cannot serve the policy flag")
	// ErrStale is in [fleet.Report.Err] when the provider says its
	// values may be out of date (PROVIDER_STALE). The last good policy
	// stays in force until the provider is ready again.
	ErrStale = errors.New("fleetfeature: the flag provider's values are stale")
	// ErrSource is returned by [Source.Watch] when the Source cannot
	// work at all: no client, no flag key, or a negative Every.
	ErrSource = errors.New("fleetfeature: the source is not set up")
)

// A Source reads a service's policy document from an OpenFeature flag.
// It implements [fleet.Source].
//
// Set Client and Flag; set Service and Instance to the Watcher's. The
// zero value is not usable.
type Source struct {
	// Client evaluates the flag. Any OpenFeature client works: one from
	// openfeature.NewDefaultClient, openfeature.NewClient or an isolated
	// API. Its provider must be set (SetProvider or SetProviderAndWait);
	// the Source waits for it to be ready.
	Client openfeature.IClient
	// Flag is the key of the object flag that holds the document.
	Flag string
	// Service is put in the evaluation context as [ServiceAttribute].
	Service string
	// Instance is the evaluation context's targeting key. Fractional
	// or per-pod targeting rules in the flag system split on it.
	Instance string
	// Attributes are more evaluation context attributes for targeting
	// rules (a region, a zone). Service and Instance win over a key of
	// the same name.
	Attributes map[string]any
	// Every, if above zero, reads the flag again at this interval too,
	// for a provider that emits no change events. Zero reads it on the
	// provider's events only.
	Every time.Duration
}

// String names the source for logs and status, as
// "openfeature flag hedge-policy", with the client's domain if it has one.
func (s *Source) String() string {
	if s.Client != nil {
		if d := s.Client.Metadata().Domain(); d != "" {
			return fmt.Sprintf("openfeature flag %s (domain %s)", s.Flag, d)
		}
	}
	return "openfeature flag " + s.Flag
}

// events are the provider events the Source listens to. Each one makes
// it read the provider's state and the flag again.
var events = []openfeature.EventType{
	openfeature.ProviderReady,
	openfeature.ProviderConfigChange,
	openfeature.ProviderStale,
	openfeature.ProviderError,
}

// Watch reads the flag, then reads it again on every provider event,
// until ctx ends. It implements [fleet.Source].
//
// A flag that holds an object is reported as its JSON. A flag that
// holds a string is reported as the string's bytes (JSON or YAML). A
// value of another type (a number, a boolean, a list) is reported as its
// JSON, which [fleet.Parse] refuses: the last good policy stays in force
// and the Watcher counts the refusal. A flag that is missing, or
// disabled in the flag system, is reported as Deleted.
//
// The provider's stale and error states are reported as Err (matching
// [ErrStale] and [ErrProvider]). While the provider is not ready yet,
// nothing is reported. Every Report's Revision is 0: OpenFeature has no
// store revision, so the document's own version orders documents.
//
// With Every set, Watch also reads the flag at that interval. The same
// value is not reported twice in a row. Watch removes its event handlers
// before it returns.
func (s *Source) Watch(ctx context.Context, report func(fleet.Report)) error {
	if s.Client == nil {
		return fmt.Errorf("%w: Source.Client is nil: set it to an OpenFeature client whose provider serves the policy flag", ErrSource)
	}
	if s.Flag == "" {
		return fmt.Errorf("%w: Source.Flag is empty: set it to the key of the flag that holds the policy document", ErrSource)
	}

	if s.Every < 0 {
		return fmt.Errorf("%w: Source.Every = %v: use 0 to read on the provider's events only, or an interval such as 30s", ErrSource, s.Every)
	}

	w := &watch{src: s, report: report, poke: make(chan struct{}, 1)}
	for _, t := range events {
		// EventDetails do not say which event it was, so each type has a
		// callback of its own. The SDK may call it under its own lock and
		// on a goroutine of its own: it only records and pokes.
		f := func(d openfeature.EventDetails) { w.event(t, d) }
		cb := openfeature.EventCallback(&f)
		s.Client.AddHandler(t, cb)
		defer s.Client.RemoveHandler(t, cb)
	}

	var tick <-chan time.Time
	if s.Every > 0 {
		t := time.NewTicker(s.Every)
		defer t.Stop()
		tick = t.C
	}

	w.kick()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.poke:
			w.read(ctx)
		case <-tick:
			w.read(ctx)
		}
	}
}

// watch is one run of [Source.Watch].
type watch struct {
	src    *Source
	report func(fleet.Report)
	poke   chan struct{}

	mu      sync.Mutex
	message string // the last stale or error event's message

	// last is what was reported last, so that the same is not reported
	// twice in a row. Only Watch's goroutine touches it.
	last *fleet.Report
}

// event records a provider event and wakes Watch's loop.
func (w *watch) event(t openfeature.EventType, d openfeature.EventDetails) {
	if t == openfeature.ProviderStale || t == openfeature.ProviderError {
		w.mu.Lock()
		w.message = d.Message
		w.mu.Unlock()
	}
	w.kick()
}

// kick wakes Watch's loop without blocking. Events that come while a
// read is pending fold into that read.
func (w *watch) kick() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// read looks at the provider's state and the flag, and reports what it
// finds unless it is what was reported last.
func (w *watch) read(ctx context.Context) {
	r, ok := w.look(ctx)
	if !ok || ctx.Err() != nil {
		return
	}
	if w.last != nil && same(*w.last, r) {
		return
	}
	w.last = &r
	w.report(r)
}

// look returns what the provider holds now, or false when there is
// nothing to report yet (the provider is not ready).
func (w *watch) look(ctx context.Context) (fleet.Report, bool) {
	s := w.src
	// The SDK writes a provider's state before it calls the handlers, so
	// the state read here is at least as new as the event that woke us.
	switch st := s.Client.State(); st {
	case openfeature.NotReadyState:
		return fleet.Report{}, false
	case openfeature.StaleState:
		return fleet.Report{Err: fmt.Errorf("%w: %s: %s; the last good policy stays in force until the provider is ready again", ErrStale, s, w.lastMessage("the provider is stale"))}, true
	case openfeature.ErrorState, openfeature.FatalState:
		return fleet.Report{Err: fmt.Errorf("%w: %s: the provider is in state %s: %s; check the flag system's connection and the provider's logs", ErrProvider, s, st, w.lastMessage("no message"))}, true
	}

	d, err := s.Client.ObjectValueDetails(ctx, s.Flag, absent, w.evalContext())
	if err != nil {
		switch d.ErrorCode {
		case openfeature.FlagNotFoundCode:
			return fleet.Report{Deleted: true}, true
		case openfeature.ProviderNotReadyCode:
			return fleet.Report{}, false
		}
		return fleet.Report{Err: fmt.Errorf("%w: %s: %v; check the flag's definition and the provider's logs", ErrProvider, s, err)}, true
	}
	if d.Value == absent || d.Value == nil || d.Reason == openfeature.DisabledReason {
		// Disabled in the flag system, or no value: the provider gave
		// back the default.
		return fleet.Report{Deleted: true}, true
	}
	doc, err := document(d.Value)
	if err != nil {
		return fleet.Report{Err: fmt.Errorf("%w: %s: %v; make the flag's value an object or a string of JSON or YAML", ErrProvider, s, err)}, true
	}
	return fleet.Report{Doc: doc}, true
}

// lastMessage is the last stale or error event's message, or def.
func (w *watch) lastMessage(def string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.message == "" {
		return def
	}
	return w.message
}

// evalContext is the evaluation context of every read: Instance as the
// targeting key, Service and Attributes as attributes.
func (w *watch) evalContext() openfeature.EvaluationContext {
	s := w.src
	attrs := make(map[string]any, len(s.Attributes)+1)
	maps.Copy(attrs, s.Attributes)
	delete(attrs, openfeature.TargetingKey)
	attrs[ServiceAttribute] = s.Service
	return openfeature.NewEvaluationContext(s.Instance, attrs)
}

// absent is the default value of every evaluation. A provider returns
// it when the flag has no value for this pod, as for a disabled flag.
var absent any = new(struct{ absent bool })

// document turns a flag's object value into the bytes fleet.Parse reads.
func document(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the flag's value (%T) cannot be written as JSON: %w", v, err)
	}
	return b, nil
}

// same says two reports say the same thing.
func same(a, b fleet.Report) bool {
	switch {
	case a.Err != nil || b.Err != nil:
		return a.Err != nil && b.Err != nil && a.Err.Error() == b.Err.Error()
	case a.Deleted || b.Deleted:
		return a.Deleted == b.Deleted
	}
	return string(a.Doc) == string(b.Doc)
}
