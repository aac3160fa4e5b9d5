//go:build race

package advise

// raceEnabled: the race detector runs the simulator some thirty times
// slower, so the tests that check advise's numbers against long simulated
// runs (single-goroutine arithmetic the detector has nothing to find in)
// run without it; scripts/test runs them in a pass of their own.
const raceEnabled = true
