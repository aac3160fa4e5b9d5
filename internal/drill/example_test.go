package drill_test

import (
	"fmt"
	"time"

	"github.com/tailcut/hedge/internal/drill"
)

// Hedging at 130 ms, just above the slowest normal primary, hedges only
// the three slow requests.
func ExampleRun() {
	p := drill.DefaultParams()
	p.Delay = 130 * time.Millisecond
	r, err := drill.Run(p)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Outcome)
	fmt.Println(r.Summary)
	fmt.Println("hedged:", r.HedgedRequests(), "loser work:", r.LoserWork)
	for _, e := range r.Events {
		if e.Req == 6 {
			fmt.Println(e)
		}
	}
	// Output:
	// TAIL CUT
	// The p95 falls from 640 ms to 226 ms for 15% extra requests (requests 6, 12 and 17 hedged).
	// hedged: [6 12 17] loser work: 684ms
	// 0 ms  request 6: primary sent
	// 130 ms  request 6: primary still running after 130 ms: backup sent (hedge 1)
	// 225 ms  request 6: backup answers first: latency 225 ms
	// 225 ms  request 6: primary cancelled after 225 ms of work
}

// A write without an idempotency key commits on both copies.
func ExampleRun_write() {
	p := drill.DefaultParams()
	p.Op = drill.Write
	r, _ := drill.Run(p)
	fmt.Println(r.Outcome, r.DuplicateWrites)
	// Output: DUPLICATE WRITES 3
}
