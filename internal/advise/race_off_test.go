//go:build !race

package advise

const raceEnabled = false
