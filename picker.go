package hedge

import (
	"math/rand/v2"
	"slices"
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
// Policy.Ghost has passed: cancelling a copy stuck on a stalled server
// must not make that server look idle, or new requests walk into the
// stall.
type Picker struct {
	// Random picks uniformly instead of by two choices.
	Random bool
	// Zones, if not nil, has one entry per replica.
	Zones []string
}

// maxHeld bounds how many replicas a request can hold: MaxAttempts is at
// most 5, so a pick sees at most 4 held replicas.
const maxHeld = 8

// Pick returns the replica in [0, n) for the next copy, or -1 if every
// replica already holds a copy. held lists the replicas holding a copy (at
// most 7, distinct); load(i) is replica i's current load and may be nil with Random.
// r is the random source; nil uses the package-level generator of
// math/rand/v2. Pick takes one 64-bit draw from r (see PickWith).
func (p *Picker) Pick(n int, held []int, load func(i int) int, r *rand.Rand) int {
	var u uint64
	if r == nil {
		u = rand.Uint64()
	} else {
		u = r.Uint64()
	}
	return p.PickWith(n, held, load, u)
}

// PickWith is Pick with the randomness supplied by the caller as 64
// random bits, for a caller with a generator of its own (the simulator
// draws from a concrete one that inlines). A pick makes at most two
// uniform draws, each from 32 of the bits by a multiplication: a draw
// over k replicas takes each with a probability within 2^-32 of 1/k, a
// bias far below anything a sample of picks can show. n must be below
// 2^32.
func (p *Picker) PickWith(n int, held []int, load func(i int) int, u uint64) int {
	// Fast paths for the common cases (the simulator's inner loop): no
	// zones, at most one copy held, replicas in range.
	if p.Zones == nil && len(held) <= 1 && n >= 2 && (len(held) == 0 || (held[0] >= 0 && held[0] < n)) {
		free := n - len(held)
		a := first(u, free)
		if len(held) == 1 && a >= held[0] {
			a++
		}
		if p.Random || free == 1 || load == nil {
			return a
		}
		// b is uniform over the free replicas other than a.
		b := second(u, free-1)
		lo, hi := a, -1
		if len(held) == 1 {
			lo, hi = min(a, held[0]), max(a, held[0])
		}
		if b >= lo {
			b++
		}
		if hi >= 0 && b >= hi {
			b++
		}
		if load(b) < load(a) {
			return b
		}
		return a
	}
	var buf [maxHeld]int
	ex := append(buf[:0], held...) // sorted, deduplicated, in range
	slices.Sort(ex)
	ex = slices.Compact(ex)
	for len(ex) > 0 && ex[0] < 0 {
		ex = ex[1:]
	}
	for len(ex) > 0 && ex[len(ex)-1] >= n {
		ex = ex[:len(ex)-1]
	}
	if len(p.Zones) == n && len(held) > 0 {
		if i := p.pickZone(n, ex, load, u); i >= 0 {
			return i
		}
	}
	free := n - len(ex)
	if free <= 0 {
		return -1
	}
	a := nth(first(u, free), ex)
	if p.Random || free == 1 || load == nil {
		return a
	}
	// Draw b among the eligible replicas other than a.
	ex2 := append(buf2(ex), a)
	slices.Sort(ex2)
	b := nth(second(u, free-1), ex2)
	if load(b) < load(a) {
		return b
	}
	return a
}

// first and second are a pick's two uniform draws in [0, k), from the
// low and the high 32 bits of u.
func first(u uint64, k int) int  { return int((u & 0xffffffff) * uint64(k) >> 32) }
func second(u uint64, k int) int { return int((u >> 32) * uint64(k) >> 32) }

func buf2(ex []int) []int {
	var b [maxHeld + 1]int
	return append(b[:0], ex...)
}

// nth returns the j-th integer (from 0) that is not in the sorted list ex.
func nth(j int, ex []int) int {
	for _, e := range ex {
		if e <= j {
			j++
		} else {
			break
		}
	}
	return j
}

// pickZone picks among replicas whose zone holds no copy yet, or returns -1
// if there are none. It scans all n replicas: zones are for the live engine,
// where replica lists are short.
func (p *Picker) pickZone(n int, ex []int, load func(int) int, u uint64) int {
	usedZone := func(i int) bool {
		for _, h := range ex {
			if p.Zones[h] == p.Zones[i] {
				return true
			}
		}
		return false
	}
	count := 0
	for i := range n {
		if !usedZone(i) {
			count++
		}
	}
	if count == 0 {
		return -1
	}
	kth := func(k int) int {
		for i := range n {
			if !usedZone(i) {
				if k == 0 {
					return i
				}
				k--
			}
		}
		return -1
	}
	ka := first(u, count)
	a := kth(ka)
	if p.Random || count == 1 || load == nil {
		return a
	}
	kb := second(u, count-1)
	if kb >= ka {
		kb++
	}
	if b := kth(kb); load(b) < load(a) {
		return b
	}
	return a
}
