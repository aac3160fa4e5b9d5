package sim

import "hash/fnv"

// splitmix64 is the SplitMix64 finaliser: a bijective mixer that turns
// nearby inputs into unrelated outputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RunSeed returns the seed of run r of a point whose seed is base. Run 0
// uses base itself.
func RunSeed(base uint64, r int) uint64 {
	if r == 0 {
		return base
	}
	return splitmix64(base ^ splitmix64(uint64(r)))
}

// DeriveSeed returns a seed from a master seed and a name, such as a
// point's identity. It does not depend on anything else (in particular not
// on the order in which points are scheduled).
func DeriveSeed(master uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return splitmix64(master ^ splitmix64(h.Sum64()))
}
