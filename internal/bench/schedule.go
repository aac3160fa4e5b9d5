package bench

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Stall is one stretch during which a replica answers nothing.
type Stall struct {
	// At is when the stall starts, since the start of the measured part
	// of a run.
	At time.Duration
	// Length is how long it lasts.
	Length time.Duration
}

// StallSchedule returns the stalls of one replica over [0, span), in order
// and never overlapping: an alternating renewal process in which every
// stall lasts length and the time from the end of one stall to the start of
// the next is exponential with mean length*(1-share)/share. So stalls start
// at the times of a Poisson process run on the replica's up time, the
// replica is stalled a fraction share of the time in the long run, and
// stalls start at a rate of share/length per second.
//
// The schedule is a pure function of its arguments: the same seed gives the
// same stalls, which is what lets every configuration compared within one
// repeat see the very same stalls. A share of 0 (or a length of 0) means no
// stalls. share must be below 1.
func StallSchedule(seed uint64, length time.Duration, share float64, span time.Duration) []Stall {
	if share <= 0 || length <= 0 || span <= 0 {
		return nil
	}
	if share >= 1 {
		panic(fmt.Sprintf("bench: stall share %v: use a share below 1", share))
	}
	r := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	meanGap := float64(length) * (1 - share) / share
	var out []Stall
	t := time.Duration(r.ExpFloat64() * meanGap)
	for t < span {
		out = append(out, Stall{At: t, Length: length})
		t += length + time.Duration(r.ExpFloat64()*meanGap)
	}
	return out
}

// Arrivals returns the intended start times of an open-loop Poisson load:
// exponential gaps with mean 1/rate, from 0 until span or until max times,
// whichever comes first (max <= 0 means no cap on the count). It is a pure
// function of its arguments.
func Arrivals(seed uint64, rate float64, span time.Duration, max int) []time.Duration {
	if rate <= 0 || span <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 0xa771fa15))
	n := int(rate*span.Seconds()*1.05) + 16
	if max > 0 && n > max {
		n = max
	}
	out := make([]time.Duration, 0, n)
	mean := float64(time.Second) / rate
	t := 0.0
	for max <= 0 || len(out) < max {
		t += r.ExpFloat64() * mean
		if time.Duration(t) >= span {
			break
		}
		out = append(out, time.Duration(t))
	}
	return out
}

// DeriveSeed returns a seed for one use of a master seed: the arrivals of
// repeat 2, the stalls of replica 1 in repeat 0, ... The same inputs always
// give the same seed; different labels give unrelated seeds.
func DeriveSeed(master uint64, label string, parts ...int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", master, label)
	for _, p := range parts {
		fmt.Fprintf(h, "/%d", p)
	}
	return splitmix(h.Sum64())
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
