package hedge

import (
	"math/rand/v2"

	"github.com/tailcut/hedge/internal/decide"
)

// Picker chooses the replica each copy of a request goes to. It never
// chooses a replica that already holds a copy of the request. Set it as
// [Config.Picker]; it applies when [Config.Replicas] is positive.
//
// By default it uses "two choices": it draws two distinct eligible
// replicas uniformly at random and takes the less loaded one. A tie is
// broken at random. With Random set it takes one uniform draw instead.
//
// With Zones set (Zones[i] is replica i's failure domain), it prefers
// replicas in a zone that holds no copy of the request yet. It falls back
// to any other replica when every zone holds one.
//
// The load of a replica is this [Hedger]'s copies in flight there. Under
// the spare-capacity rule ([Config.MaxReplicaLoad]), a copy cancelled
// because another copy of its request won still counts, until the
// replica answers something or eight hedge delays have passed.
// Cancelling a copy stuck on a stalled server must not make that server
// look idle, or new requests walk into the stall.
type Picker struct {
	// Random picks uniformly instead of by two choices.
	Random bool
	// Zones, if not nil, has one entry per replica.
	Zones []string
}

// pick returns the replica in [0, n) for the next copy, or -1 if every
// replica already holds a copy. held lists the replicas holding a copy
// (at most 7, distinct); load(i) is replica i's current load, and may be
// nil with Random. It takes one draw from math/rand/v2's generator.
func (p *Picker) pick(n int, held []int, load func(i int) int) int {
	return (*decide.Picker)(p).Pick(n, held, load, rand.Uint64())
}
