package decide

import "slices"

// Picker is hedge.Picker's algorithm, with the randomness supplied by the
// caller: the live engine draws from math/rand/v2, the simulator from a
// concrete generator of its own that inlines. Its fields are
// hedge.Picker's, so that one converts to the other.
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
// replica already holds a copy, with the randomness supplied as 64
// random bits. held lists the replicas holding a copy (at most 7,
// distinct); load(i) is replica i's current load, and may be nil with
// Random. A pick makes at most two uniform draws, each from 32 of the
// bits by a multiplication: a draw over k replicas takes each with a
// probability within 2^-32 of 1/k, a bias far below anything a sample of
// picks can show. n must be below 2^32.
func (p *Picker) Pick(n int, held []int, load func(i int) int, u uint64) int {
	if a, b, ok := p.Pair(n, held, u); ok {
		if b < 0 || load == nil {
			return a
		}
		return Choose(a, b, load(a), load(b))
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

// Pair is Pick's fast path, for the common cases (the simulator's inner
// loop): no zones, at most one copy held, replicas in range. It returns
// Pick's candidates, a and b, with ok set, or ok false outside those
// cases, where only Pick answers. b is -1 when Pick takes a without
// reading a load (Random, or one free replica); otherwise Pick returns
// Choose(a, b, load(a), load(b)). A caller that reads its loads without a
// function value calls Pair and Choose, and Pick when ok is false.
func (p *Picker) Pair(n int, held []int, u uint64) (a, b int, ok bool) {
	if p.Zones != nil || len(held) > 1 || n < 2 {
		return 0, 0, false
	}
	h := -1
	if len(held) == 1 {
		if h = held[0]; h < 0 || h >= n {
			return 0, 0, false
		}
	}
	free := n - len(held)
	a = first(u, free)
	if h >= 0 && a >= h {
		a++
	}
	if p.Random || free == 1 {
		return a, -1, true
	}
	// b is uniform over the free replicas other than a.
	b = second(u, free-1)
	lo, hi := a, -1
	if h >= 0 {
		lo, hi = min(a, h), max(a, h)
	}
	if b >= lo {
		b++
	}
	if hi >= 0 && b >= hi {
		b++
	}
	return a, b, true
}

// Choose is the rule of two choices between Pick's candidates a and b,
// whose loads are la and lb: b only when it is strictly less loaded, so
// that a tie goes to a, the first draw.
func Choose(a, b, la, lb int) int {
	if lb < la {
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
