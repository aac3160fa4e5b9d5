// Package fleetfeature reads a service's hedging policy from an
// OpenFeature flag. Teams that run flagd, GO Feature Flag, Unleash or
// LaunchDarkly steer hedging from the flag system they already run.
//
// # The flag
//
// The policy document (see package fleet) is the value of one object
// flag. The value is either an object with the document's fields, or a
// string that holds the document as JSON or YAML. Give the flag one
// variant per policy version, and make the new one the default variant
// to publish it.
//
// The Source evaluates the flag with the pod's instance name as the
// targeting key and the service under [ServiceAttribute]. The fleet's
// own rollout field is the usual way to reach a share of the pods. A
// targeting rule in the flag system works too: each pod then runs the
// variant it gets, and its status ([fleet.Watcher.Status]) says which
// version.
//
// # Changes and order
//
// The Source reads the flag at start and again on each provider event:
// PROVIDER_READY, PROVIDER_CONFIGURATION_CHANGED, PROVIDER_STALE and
// PROVIDER_ERROR. A stale or failing provider is reported as an error
// ([ErrStale], [ErrProvider]): the pod keeps its last good policy. A
// missing or disabled flag is reported as deleted. For a provider that
// emits no change events, set [Source.Every]: the Source then reads the
// flag at that interval too.
//
// OpenFeature has no store revision. Every report's Revision is 0, and
// the document's own version field orders documents: the Watcher does
// not apply a version older than or equal to the one it runs. Raise the
// version with every change, or the pods keep the old one. Switching the
// default variant back to an older version is refused: to roll back,
// publish the old rules as a new version.
//
// # flagd
//
// With flagd's Go provider in file mode, the flag file is the store.
// flagd watches it and emits PROVIDER_CONFIGURATION_CHANGED when it
// changes. A flag file with the policy of the service checkout:
//
//	{
//	  "$schema": "https://flagd.dev/schema/v0/flags.json",
//	  "flags": {
//	    "hedge-policy-checkout": {
//	      "state": "ENABLED",
//	      "defaultVariant": "v7",
//	      "variants": {
//	        "v7": {
//	          "service": "checkout",
//	          "version": 7,
//	          "hedgers": {"*": {"mode": "on", "rollout": 0.1}}
//	        }
//	      }
//	    }
//	  }
//	}
//
// And the pod (error handling cut short):
//
//	provider, err := flagd.NewProvider(
//		flagd.WithFileResolver(),
//		flagd.WithOfflineFilePath("/etc/flagd/flags.json"),
//	)
//	err = openfeature.SetProviderAndWait(provider)
//	w, err := fleet.NewWatcher(fleet.Options{
//		Service:  "checkout",
//		Instance: os.Getenv("POD_NAME"),
//		Source: &fleetfeature.Source{
//			Client:   openfeature.NewDefaultClient(),
//			Flag:     "hedge-policy-checkout",
//			Service:  "checkout",
//			Instance: os.Getenv("POD_NAME"),
//		},
//		Hedgers: map[string]*hedge.Hedger{"db": db},
//	})
//	go w.Run(ctx)
//
// flagd's provider is github.com/open-feature/go-sdk-contrib/providers/flagd.
// Its in-process and RPC modes work the same way: they emit the same
// events. The example of [Source] runs with the SDK's in-memory provider.
package fleetfeature
