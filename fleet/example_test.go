package fleet_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
)

// Parse reads a policy document and reports every mistake with its fix.
func ExampleParse() {
	_, err := fleet.Parse([]byte(`
service: checkout
version: 3
hedgers:
  "*":
    mode: sometimes
    maxAttempts: 7
`))
	fmt.Println(err)
	// Output:
	// fleet: hedgers."*".mode: is "sometimes": use on, shadow or off
	// fleet: hedgers."*": Config.MaxAttempts = 7: use 1 to 5 copies per request (2 is the usual choice; 0 means 2)
}

// A Watcher applies the policy in a ConfigMap volume to the pod's
// Hedgers until its context ends.
func ExampleNewWatcher() {
	inventory, err := hedge.New(hedge.Config{})
	if err != nil {
		log.Fatal(err)
	}
	w, err := fleet.NewWatcher(fleet.Options{
		Service:   "checkout",
		Source:    fleet.NewFile("/etc/hedge/policy.yaml"),
		Hedgers:   map[string]*hedge.Hedger{"inventory": inventory},
		Jitter:    2 * time.Second,
		LostAfter: 10 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := w.Run(context.Background()); err != nil {
			log.Print(err)
		}
	}()
}
