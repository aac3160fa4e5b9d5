package advise

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Where says where the sample suggests the slowness lives.
type Where int

const (
	// Unknown: the sample cannot tell (no replica and no time of each
	// request, or too few slow requests).
	Unknown Where = iota
	// InServers: slow requests gather on some replicas or in bursts of
	// time, as stalls, pauses and noisy neighbours make them: a copy sent
	// elsewhere, or a little later, is likely fast.
	InServers
	// InRequests: slow requests are spread evenly over the replicas and
	// over time, as big requests are: a copy of a slow request is likely
	// as slow, and hedging will not help.
	InRequests
)

// String returns a short name.
func (w Where) String() string {
	switch w {
	case InServers:
		return "servers"
	case InRequests:
		return "requests"
	}
	return "unknown"
}

// ReplicaStats describes one replica's part of the sample.
type ReplicaStats struct {
	Replica  string
	Count    int
	P50, P99 time.Duration
	// TailShare is the replica's share of the sample's slowest 1% over its
	// share of all requests: 1 is its fair share, 3 three times it.
	TailShare float64
}

// Diagnosis is what the sample says about where its slowness lives.
type Diagnosis struct {
	Where Where
	// Replicas has one entry per replica with at least minReplicaCount
	// latencies, when the sample names replicas.
	Replicas []ReplicaStats
	// Burstiness is the dispersion of slow requests over time windows:
	// about 1 when each request is slow independently of when it ran,
	// well above 1 when slow requests come in bursts (NaN without times).
	Burstiness float64
	// Reasons explain the conclusion, one sentence each.
	Reasons []string
}

// Thresholds of the diagnosis.
const (
	minReplicaCount = 100 // latencies a replica needs to be judged
	concentrated    = 2.0 // TailShare from which a replica holds the tail
	evenShare       = 1.5 // TailShare under which (and above 1/evenShare) a share is even
	evenP99         = 1.3 // p99s within this factor of each other are equal
	bursty          = 3.0 // Burstiness from which slow requests come in bursts
	steady          = 1.5 // Burstiness under which they do not
)

// diagnose looks for where the slowness of s lives: the replicas' shares
// of the slowest 1% of requests, and the burstiness of slow requests over
// time.
func diagnose(s *Sample, e *empirical) Diagnosis {
	dg := Diagnosis{Burstiness: math.NaN()}
	cut := quantileOf(e.xs, 0.99)
	// At or above the p99: a tail of equal values (a timeout, a
	// histogram's top bucket) counts whole.
	slow := func(i int) bool { return float64(s.Latencies[i]) >= cut }
	nSlow := 0
	for i := range s.Latencies {
		if slow(i) {
			nSlow++
		}
	}
	if nSlow < 10 || nSlow > s.Len()/20 {
		dg.Reasons = append(dg.Reasons, "The sample's tail is flat (the p99 is shared by too many or too few requests): nothing to locate.")
		return dg
	}
	server, request := false, false
	if s.hasReplicas() {
		idx := map[string][]int{}
		for i, r := range s.Replicas {
			if r != "" {
				idx[r] = append(idx[r], i)
			}
		}
		total := 0
		for _, is := range idx {
			total += len(is)
		}
		slowAll := 0
		for i := range s.Latencies {
			if s.Replicas[i] != "" && slow(i) {
				slowAll++
			}
		}
		names := make([]string, 0, len(idx))
		for r := range idx {
			names = append(names, r)
		}
		slices.Sort(names)
		for _, r := range names {
			is := idx[r]
			if len(is) < minReplicaCount {
				continue
			}
			xs := make([]float64, len(is))
			k := 0
			for j, i := range is {
				xs[j] = float64(s.Latencies[i])
				if slow(i) {
					k++
				}
			}
			slices.Sort(xs)
			share := math.NaN()
			if slowAll > 0 {
				share = (float64(k) / float64(slowAll)) / (float64(len(is)) / float64(total))
			}
			dg.Replicas = append(dg.Replicas, ReplicaStats{Replica: r, Count: len(is), P50: time.Duration(quantileOf(xs, 0.5)), P99: time.Duration(quantileOf(xs, 0.99)), TailShare: share})
		}
		if len(dg.Replicas) >= 2 {
			hi, lo := dg.Replicas[0], dg.Replicas[0]
			even := true
			minP99, maxP99 := dg.Replicas[0].P99, dg.Replicas[0].P99
			for _, rs := range dg.Replicas {
				if rs.TailShare > hi.TailShare {
					hi = rs
				}
				if rs.TailShare < lo.TailShare {
					lo = rs
				}
				if !(rs.TailShare < evenShare && rs.TailShare > 1/evenShare) {
					even = false
				}
				minP99, maxP99 = min(minP99, rs.P99), max(maxP99, rs.P99)
			}
			switch {
			case hi.TailShare >= concentrated:
				server = true
				dg.Reasons = append(dg.Reasons, fmt.Sprintf("Replica %s serves %.1f times its share of the slowest 1%% of requests (p99 %v against %v for %s): slowness lives in servers, and a copy sent to another replica is likely fast.", hi.Replica, hi.TailShare, round(hi.P99), round(lo.P99), lo.Replica))
			case even && float64(maxP99) <= evenP99*float64(minP99):
				request = true
				dg.Reasons = append(dg.Reasons, fmt.Sprintf("The %d replicas are equally slow (p99 %v to %v, each with %.2g to %.2g times its share of the slowest 1%%): nothing marks a slow server.", len(dg.Replicas), round(minP99), round(maxP99), lo.TailShare, hi.TailShare))
			default:
				dg.Reasons = append(dg.Reasons, fmt.Sprintf("The replicas' shares of the slowest 1%% range from %.2g to %.2g times their fair share: neither clearly one slow server nor clearly even.", lo.TailShare, hi.TailShare))
			}
		}
	}
	if s.hasTimes() {
		dg.Burstiness = burstiness(s, slow, nSlow)
		switch {
		case math.IsNaN(dg.Burstiness):
		case dg.Burstiness >= bursty:
			server = true
			request = false
			dg.Reasons = append(dg.Reasons, fmt.Sprintf("Slow requests come in bursts (dispersion %.3g over time windows, where independent slowness gives about 1): stalls, pauses or overload episodes, which a copy on another replica can escape.", dg.Burstiness))
		case dg.Burstiness < steady:
			dg.Reasons = append(dg.Reasons, fmt.Sprintf("Slow requests are spread evenly over time (dispersion %.3g, about 1 for independent slowness): no stalls or pauses show.", dg.Burstiness))
			if !server {
				request = true
			}
		default:
			dg.Reasons = append(dg.Reasons, fmt.Sprintf("Slow requests are somewhat clustered in time (dispersion %.3g).", dg.Burstiness))
		}
	}
	switch {
	case server:
		dg.Where = InServers
	case request:
		dg.Where = InRequests
		dg.Reasons = append(dg.Reasons, "The slowness looks like it lives in the requests themselves (big requests, expensive keys): then a copy is as slow as the original wherever it runs, and hedging will not help. The shared-size estimate shows that case.")
	case !s.hasReplicas() && !s.hasTimes():
		dg.Reasons = append(dg.Reasons, "The sample has neither the replica nor the time of each request, and latencies alone cannot tell a slow server from a big request (2% of requests stalled 20 times longer and 5% of requests 20 times bigger give the same distribution). Record the replica (--replica-field) and the send time (--time-field) to tell; until then read the fresh and shared estimates as the best and the worst case.")
	default:
		dg.Reasons = append(dg.Reasons, "The sample does not say clearly where its slowness lives: read the fresh and shared estimates as the best and the worst case.")
	}
	return dg
}

// burstiness returns the dispersion of slow requests over time windows:
// sum over windows of (observed - expected)^2 / expected, over the degrees
// of freedom, where expected is the window's requests times the overall
// slow fraction. About 1 when slowness is independent of time.
func burstiness(s *Sample, slow func(int) bool, nSlow int) float64 {
	t0, t1 := s.Times[0], s.Times[0]
	for _, t := range s.Times {
		if t.Before(t0) {
			t0 = t
		}
		if t.After(t1) {
			t1 = t
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		return math.NaN()
	}
	// About five slow requests per window, at least 10 windows.
	w := max(10, nSlow/5)
	reqs := make([]int, w)
	slows := make([]int, w)
	for i, t := range s.Times {
		k := min(w-1, int(float64(t.Sub(t0))/float64(span)*float64(w)))
		reqs[k]++
		if slow(i) {
			slows[k]++
		}
	}
	p := float64(nSlow) / float64(s.Len())
	chi, df := 0.0, -1
	for k := range w {
		exp := float64(reqs[k]) * p
		if exp <= 0 {
			continue
		}
		d := float64(slows[k]) - exp
		chi += d * d / exp
		df++
	}
	if df < 1 {
		return math.NaN()
	}
	return chi / float64(df)
}

// round rounds a duration for people: three significant digits.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Second:
		return d.Round(time.Second)
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}
