package hedge

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// HedgeSent: a hedge copy went ([Event.Copy], [Event.Replica]), or in
	// Shadow mode would have ([Event.Shadow]).
	HedgeSent EventKind = iota + 1
	// HedgeRefused: a copy was not sent; [Event.Refusal] says why (any
	// [Refusal] that [Stats.Refused] counts, those [Refusals.All] yields).
	HedgeRefused
	// HedgeWon: a hedge copy won its call.
	HedgeWon
	// CopyPanicked: a copy panicked ([Event.Panic]); the panic is re-raised
	// on the caller's goroutine.
	CopyPanicked
	// ModeChanged: SetMode switched the [Hedger] to [Event.Mode].
	ModeChanged
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case HedgeSent:
		return "hedge sent"
	case HedgeRefused:
		return "hedge refused"
	case HedgeWon:
		return "hedge won"
	case CopyPanicked:
		return "copy panicked"
	case ModeChanged:
		return "mode changed"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one thing a [Hedger] did, reported to [Config.OnEvent].
type Event struct {
	Kind EventKind
	// Op is the operation class (empty for [ModeChanged]).
	Op string
	// Copy is the copy's [Attempt.Index], and Replica its [Attempt.Replica]
	// (-1 when the attempt function chooses), for [HedgeSent], [HedgeWon] and
	// [CopyPanicked].
	Copy, Replica int
	// Shadow marks a [HedgeSent] that Shadow mode counted without sending.
	Shadow bool
	// Refusal says why, for [HedgeRefused].
	Refusal Refusal
	// Elapsed is the time since the call started.
	Elapsed time.Duration
	// Mode is the new mode, for [ModeChanged].
	Mode Mode
	// Panic is the copy's panic, for [CopyPanicked].
	Panic *PanicError
}

// String describes the event on one line.
func (e Event) String() string {
	switch e.Kind {
	case HedgeSent:
		if e.Shadow {
			return fmt.Sprintf("%s: shadow hedge %d after %v", e.Op, e.Copy, e.Elapsed)
		}
		return fmt.Sprintf("%s: hedge %d sent to replica %d after %v", e.Op, e.Copy, e.Replica, e.Elapsed)
	case HedgeRefused:
		return fmt.Sprintf("%s: hedge refused (%v) after %v", e.Op, e.Refusal, e.Elapsed)
	case HedgeWon:
		return fmt.Sprintf("%s: hedge %d on replica %d won after %v", e.Op, e.Copy, e.Replica, e.Elapsed)
	case CopyPanicked:
		return fmt.Sprintf("%s: copy %d panicked after %v: %v", e.Op, e.Copy, e.Elapsed, e.Panic.Value)
	case ModeChanged:
		return fmt.Sprintf("mode changed to %v", e.Mode)
	}
	return e.Kind.String()
}

// LogEvents returns an OnEvent hook that writes each event to l: panics at
// level Error, mode changes at Warn, the rest at Debug (one line per hedge
// decision is too much for Info on a busy service). A nil l means
// slog.Default().
func LogEvents(l *slog.Logger) func(Event) {
	if l == nil {
		l = slog.Default()
	}
	return func(e Event) {
		level := slog.LevelDebug
		switch e.Kind {
		case CopyPanicked:
			level = slog.LevelError
		case ModeChanged:
			level = slog.LevelWarn
		}
		if !l.Enabled(context.Background(), level) {
			return
		}
		attrs := []slog.Attr{slog.String("event", e.Kind.String())}
		switch e.Kind {
		case HedgeSent, HedgeWon, CopyPanicked:
			attrs = append(attrs, slog.String("op", e.Op), slog.Int("copy", e.Copy), slog.Int("replica", e.Replica), slog.Duration("elapsed", e.Elapsed))
			if e.Shadow {
				attrs = append(attrs, slog.Bool("shadow", true))
			}
			if e.Panic != nil {
				attrs = append(attrs, slog.Any("panic", e.Panic.Value))
			}
		case HedgeRefused:
			attrs = append(attrs, slog.String("op", e.Op), slog.String("refusal", e.Refusal.String()), slog.Duration("elapsed", e.Elapsed))
		case ModeChanged:
			attrs = append(attrs, slog.String("mode", e.Mode.String()))
		}
		l.LogAttrs(context.Background(), level, "hedge: "+e.Kind.String(), attrs...)
	}
}
