package hedge_test

import (
	"fmt"

	"github.com/tailcut/hedge"
)

// Stats.Refused counts the hedges not sent by the Refusal that kept each.
// Index it by a Refusal; All yields every counted refusal by the name the
// metrics and hedgectl give it.
func ExampleRefusals() {
	var s hedge.Stats // as Hedger.OpStats returns it
	s.Refused[hedge.RefusedBusy] = 3
	s.Refused[hedge.RefusedBudget] = 1

	fmt.Println("busy:", s.Refused[hedge.RefusedBusy])
	for why, n := range s.Refused.All() {
		if n > 0 {
			fmt.Printf("%s=%d\n", why, n)
		}
	}
	fmt.Println(s.Refused)
	// Output:
	// busy: 3
	// budget=1
	// busy=3
	// deadline 0, replicas 0, in_flight 0, budget 1, busy 3, payoff 0, fan_out 0, head 0, rate 0
}
