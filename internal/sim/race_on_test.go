//go:build race

package sim

// raceEnabled shrinks the statistical tests under the race detector, which
// runs the engine about ten times slower.
const raceEnabled = true
