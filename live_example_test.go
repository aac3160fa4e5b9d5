package hedge_test

import (
	"errors"
	"fmt"

	"github.com/tailcut/hedge"
)

// SetLive changes a running Hedger: here its "scan" operations go to
// Shadow, and every other class gets three copies and a cap of 100
// hedges per second. A setting the Hedger cannot change while it runs
// is refused, and nothing changes.
func ExampleHedger_SetLive() {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(0)})
	if err != nil {
		panic(err)
	}
	err = h.SetLive(hedge.Live{
		Settings: hedge.Settings{MaxAttempts: 3, MaxHedgesPerSecond: 100},
		Ops:      map[string]hedge.Settings{"scan": {Mode: hedge.Shadow}},
	})
	fmt.Println(err)
	fmt.Println(h.Live().MaxAttempts, h.Live().Ops["scan"].Mode)

	err = h.SetLive(hedge.Live{Settings: hedge.Settings{Percentile: 99}})
	fmt.Println(errors.Is(err, hedge.ErrNotLive), h.Live().MaxAttempts)
	// Output:
	// <nil>
	// 3 shadow
	// true 3
}
