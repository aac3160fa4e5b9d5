package fleetfeature_test

import (
	"context"
	"fmt"

	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetfeature"
)

// A Source on the SDK's in-memory provider. With flagd, set flagd's
// provider instead (see the package doc): the Source is the same.
func ExampleSource() {
	ctx := context.Background()
	api := isolated.NewAPI()
	defer func() { _ = api.Shutdown(ctx) }()

	provider := memprovider.NewInMemoryProvider(map[string]memprovider.InMemoryFlag{
		"hedge-policy-checkout": {
			Key:            "hedge-policy-checkout",
			State:          memprovider.Enabled,
			DefaultVariant: "v7",
			Variants: map[string]any{
				"v7": "service: checkout\nversion: 7\nhedgers:\n  \"*\": {mode: shadow}\n",
			},
		},
	})
	if err := api.SetProviderAndWait(ctx, provider); err != nil {
		fmt.Println(err)
		return
	}

	src := &fleetfeature.Source{
		Client:   api.NewClient(),
		Flag:     "hedge-policy-checkout",
		Service:  "checkout",
		Instance: "checkout-7d9f-x2",
	}
	// A fleet.Watcher calls Watch; here the first report ends it.
	ctx, stop := context.WithCancel(ctx)
	err := src.Watch(ctx, func(r fleet.Report) {
		p, err := fleet.Parse(r.Doc)
		if err != nil {
			fmt.Println(err)
		} else {
			fmt.Printf("%s: %s version %d, mode %s\n", src, p.Service, p.Version, p.Hedgers[fleet.All].Mode)
		}
		stop()
	})
	fmt.Println(err)
	// Output:
	// openfeature flag hedge-policy-checkout: checkout version 7, mode shadow
	// context canceled
}
