package readme

import (
	"context"
	"log"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/memprovider"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetfeature"
)

// filePod is docs/fleet.md's first snippet: a pod that follows a policy
// file, as a ConfigMap volume holds it.
func filePod(ctx context.Context, inv, prices *hedge.Hedger) *fleet.Watcher {
	w, err := fleet.NewWatcher(fleet.Options{
		Service:   "checkout",
		Source:    fleet.NewFile("/etc/hedge/policy.yaml"), // a ConfigMap volume
		Hedgers:   map[string]*hedge.Hedger{"inventory": inv, "prices": prices},
		Jitter:    2 * time.Second,
		LostAfter: 10 * time.Minute,
		Fallback:  fleet.FallbackOff,
	})
	if err != nil {
		log.Fatal(err)
	}
	go w.Run(ctx)
	return w
}

// featurePod is docs/fleet.md's pod on an OpenFeature provider.
func featurePod(ctx context.Context, provider openfeature.FeatureProvider, pod string, db *hedge.Hedger) error {
	if err := openfeature.SetProviderAndWait(provider); err != nil {
		return err
	}
	w, err := fleet.NewWatcher(fleet.Options{
		Service:  "checkout",
		Instance: pod,
		Source: &fleetfeature.Source{
			Client:   openfeature.NewDefaultClient(),
			Flag:     "hedge-policy-checkout",
			Service:  "checkout",
			Instance: pod,
		},
		Hedgers: map[string]*hedge.Hedger{"db": db},
	})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// TestFleetFileSnippet runs the first snippet where no policy file is
// mounted: the pod runs the Config in its code and says why. The
// Watcher and its file source run on synctest's clock: once every
// goroutine waits for its next poll, the first one has been reported.
func TestFleetFileSnippet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inv, prices := newHedger(t), newHedger(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := filePod(ctx, inv, prices)
		synctest.Wait()
		if st := w.Status(); st.State != "code" || st.Version != 0 || st.Error == "" {
			t.Errorf("status %+v; want the Config in code, version 0, and the missing /etc/hedge/policy.yaml as the error", st)
		}
	})
}

// TestFleetFeatureSnippet runs the OpenFeature pod on the SDK's
// in-memory provider, whose flag holds version 8 of the policy: the
// pod's Hedger runs in shadow, as the document says.
func TestFleetFeatureSnippet(t *testing.T) {
	provider := memprovider.NewInMemoryProvider(map[string]memprovider.InMemoryFlag{
		"hedge-policy-checkout": {
			Key:            "hedge-policy-checkout",
			State:          memprovider.Enabled,
			DefaultVariant: "v8",
			Variants: map[string]any{
				"v8": map[string]any{"service": "checkout", "version": 8, "hedgers": map[string]any{"*": map[string]any{"mode": "shadow"}}},
			},
		},
	})
	defer openfeature.Shutdown()
	db := newHedger(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- featurePod(ctx, provider, "checkout-1", db) }()
	// The SDK's event executor runs outside any test bubble: the test
	// polls what the pod applies, after its random delay, until the
	// test's own timeout; no outcome depends on how fast that is.
	for db.Live().Mode != hedge.Shadow {
		select {
		case err := <-done:
			t.Fatalf("the pod stopped before it applied the policy: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v; want context.Canceled", err)
	}
}

func newHedger(t *testing.T) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(hedge.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
