// Package recovery holds the one rule by which the simulator
// (sim.Simulator.MeasureRecovery) and the bench (bench.RunRecovery) judge
// that latency has come back after a slowdown, so that the two report the
// same thing.
package recovery

// First returns the first of settle windows in a row that are all
// recovered, among the windows from, ..., n-2 that are eligible (the
// windows that end after the slowdown does), or -1 if there is none. The
// last window, n-1, never counts: the run may have cut it short. A window
// that is eligible but not recovered starts the count again.
func First(from, n, settle int, eligible, recovered func(i int) bool) int {
	run := 0
	for i := from; i < n-1; i++ {
		if !eligible(i) {
			continue
		}
		if !recovered(i) {
			run = 0
			continue
		}
		if run++; run == settle {
			return i - settle + 1
		}
	}
	return -1
}
