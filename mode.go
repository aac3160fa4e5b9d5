package hedge

import (
	"fmt"
	"sync/atomic"
)

// Mode is the runtime switch of a [Hedger]: the kill switch and the dry run.
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

// parseMode parses "on", "shadow" or "off".
func parseMode(s string) (Mode, error) {
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

// Moder is where a [Hedger] reads its mode ([Config.Mode]): a Mode, the
// [Hedger]'s initial mode, or a *ModeVar, a mode shared by every [Hedger] given
// it, as slog.HandlerOptions.Level takes a slog.Level or a *slog.LevelVar.
// It is implemented by those two types only.
type Moder interface {
	Mode() Mode
	moder()
}

// Mode returns m, so that a Mode is a Moder.
func (m Mode) Mode() Mode { return m }

func (Mode) moder()     {}
func (*ModeVar) moder() {}

// ModeVar is a [Mode] that can be switched at run time and shared.
// Hedgers made with the same *ModeVar as [Config.Mode] all follow it, so
// that one Set flips every Hedger of a service (hedgegrpc's per-method
// Hedgers share one this way). It is to Mode what slog.LevelVar is to
// slog.Level. The zero ModeVar is [On]. It is safe for concurrent use,
// and Set is one atomic store.
type ModeVar struct {
	v atomic.Int32
}

// Mode returns the current mode.
func (v *ModeVar) Mode() Mode { return Mode(v.v.Load()) }

// Set switches the mode. Calls already started keep the mode they started
// with.
func (v *ModeVar) Set(m Mode) error {
	if m < On || m > Off {
		return fmt.Errorf("hedge: %v is not a mode: use hedge.On, hedge.Shadow or hedge.Off", m)
	}
	v.v.Store(int32(m))
	return nil
}

// String returns the mode's name.
func (v *ModeVar) String() string { return v.Mode().String() }

// MarshalText returns the mode's name, for encoding/json and flag.TextVar.
func (v *ModeVar) MarshalText() ([]byte, error) { return []byte(v.Mode().String()), nil }

// UnmarshalText sets the mode from its name ("on", "shadow" or "off").
func (v *ModeVar) UnmarshalText(b []byte) error {
	m, err := parseMode(string(b))
	if err != nil {
		return err
	}
	return v.Set(m)
}
