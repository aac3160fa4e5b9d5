package hedge

import (
	"math/rand/v2"

	"github.com/tailcut/hedge/internal/decide"
)

// Picker chooses the replica each copy of a request goes to. It never
// returns a replica that already holds a copy of the request.
//
// By default it uses "two choices": it draws two distinct eligible replicas
// uniformly at random and takes the less loaded one. Because the two draws
// are exchangeable, taking the first on a tie already breaks ties uniformly
// at random. With Random set it takes one uniform draw instead.
//
// With Zones set (Zones[i] is replica i's failure domain), it prefers
// replicas in a zone that holds no copy of the request yet, and falls back
// to any other replica when every zone holds one.
//
// A Picker is a plain value with no state; the load of each replica is
// passed in, so the live engine uses its in-flight counts and the simulator
// its queue lengths. Under the zero Config's spare-capacity rule, both
// count one more on a replica where a copy was cancelled because another
// copy of its request won, until the replica answers something or
// four hedge delays have passed: cancelling a copy stuck on a stalled server
// must not make that server look idle, or new requests walk into the
// stall.
type Picker struct {
	// Random picks uniformly instead of by two choices.
	Random bool
	// Zones, if not nil, has one entry per replica.
	Zones []string
}

// Pick returns the replica in [0, n) for the next copy, or -1 if every
// replica already holds a copy. held lists the replicas holding a copy (at
// most 7, distinct); load(i) is replica i's current load and may be nil with Random.
// r is the random source; nil uses the package-level generator of
// math/rand/v2. Pick takes one 64-bit draw from r.
func (p *Picker) Pick(n int, held []int, load func(i int) int, r *rand.Rand) int {
	var u uint64
	if r == nil {
		u = rand.Uint64()
	} else {
		u = r.Uint64()
	}
	return (*decide.Picker)(p).Pick(n, held, load, u)
}
