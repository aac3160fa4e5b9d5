//go:build !race

package exactlyonce_test

const raceEnabled = false
