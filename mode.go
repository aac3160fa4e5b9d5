package hedge

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Mode is the runtime switch of a Hedger: the kill switch and the dry run.
type Mode int32

const (
	// On sends hedges (to the rollout fraction of requests; the rest run
	// in Shadow).
	On Mode = iota
	// Shadow runs the whole decision (delay timer, caps, budget) and
	// counts "would have hedged" where it would send a hedge, but sends
	// nothing. Use it to learn the real hedge rate before turning hedging
	// on.
	Shadow
	// Off sends every request once and decides nothing: the kill switch.
	Off
)

// String returns "on", "shadow" or "off".
func (m Mode) String() string {
	switch m {
	case On:
		return "on"
	case Shadow:
		return "shadow"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Mode(%d)", int32(m))
}

// ParseMode parses "on", "shadow" or "off".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "on":
		return On, nil
	case "shadow":
		return Shadow, nil
	case "off":
		return Off, nil
	}
	return 0, fmt.Errorf("hedge: unknown mode %q: use on, shadow or off", s)
}

// switchboard holds the runtime-switchable settings of a Hedger. Reads are
// single atomic loads; a call snapshots them once when it starts.
type switchboard struct {
	mode    atomic.Int32
	rollout atomic.Uint64 // math.Float64bits of the fraction of On requests
}

func (s *switchboard) setRollout(f float64) error {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return fmt.Errorf("hedge: rollout %v is outside [0, 1]: use e.g. 0.01 to hedge 1%% of requests and shadow the rest", f)
	}
	s.rollout.Store(math.Float64bits(f))
	return nil
}
