// Package hedgeset is what the packages that export or control a set of
// named Hedgers (hedgeprom, hedgeotel, hedgectl) share: the validation of
// the set, and of the tied clients and servers an exporter is given, the
// label names and values of refusal reasons, latency paths and replicas,
// and the series made of replicas and of tied traffic, so that the
// metrics of every exporter name the same things the same way.
package hedgeset

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/tailcut/hedge"
)

// Label names, shared by every exporter.
const (
	LabelHedger   = "hedger"   // the name of a Hedger in its set
	LabelOp       = "op"       // the operation class, Stats.Op
	LabelReason   = "reason"   // a refusal reason (ReasonBudget...)
	LabelPath     = "path"     // a latency path (PathCaller...)
	LabelReplica  = "replica"  // a server's label, hedge.ReplicaStats.Name
	LabelClient   = "client"   // the name of a tied client
	LabelServer   = "server"   // the name of a tied server
	LabelOutcome  = "outcome"  // a claim's outcome (OutcomeWon...)
	LabelQuantile = "quantile" // a quantile of a latency distribution
	LabelView     = "view"     // a view of a replica's load (ViewReport...)
)

// Named is one Hedger of a set, with its name.
type Named struct {
	Name string
	H    *hedge.Hedger
}

// Sort returns the set sorted by name, and every mistake in it, sorted by
// text so that the report does not depend on map order: no Hedgers, an
// empty or non-UTF-8 name, a nil Hedger, the same Hedger under two names
// (which would count every call twice in any sum over Hedgers).
func Sort(hedgers map[string]*hedge.Hedger) ([]Named, []error) {
	list, errs := SortAllowEmpty(hedgers)
	if len(hedgers) == 0 {
		errs = append([]error{errors.New("no hedgers: pass at least one *hedge.Hedger, keyed by a short fixed name such as \"items\"")}, errs...)
	}
	return list, errs
}

// ErrNoHedgers is the mistake of an exporter given nothing to export: no
// Hedger, and none of the tied clients and servers its options add.
var ErrNoHedgers = errors.New("no hedgers: pass at least one *hedge.Hedger, keyed by a short fixed name such as \"items\", or a tied client or server (WithTiedClient, WithTiedServer)")

// SortAllowEmpty is Sort for a set that may be empty, as an exporter's is
// when its options give it something else to export.
func SortAllowEmpty(hedgers map[string]*hedge.Hedger) ([]Named, []error) {
	var errs []error
	list := make([]Named, 0, len(hedgers))
	seen := make(map[*hedge.Hedger]string, len(hedgers))
	for name, h := range hedgers {
		switch {
		case name == "":
			errs = append(errs, errors.New("a hedger has an empty name: give each a short fixed name such as \"items\""))
		case !utf8.ValidString(name):
			errs = append(errs, fmt.Errorf("hedger name %q is not valid UTF-8", name))
		}
		if h == nil {
			errs = append(errs, fmt.Errorf("hedger %q is nil: make it with hedge.New", name))
			continue
		}
		if other, dup := seen[h]; dup {
			errs = append(errs, fmt.Errorf("hedgers %q and %q are the same *hedge.Hedger: name it once, or its calls are counted twice",
				min(name, other), max(name, other)))
		}
		seen[h] = name
		list = append(list, Named{name, h})
	}
	slices.SortFunc(errs, func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
	slices.SortFunc(list, func(a, b Named) int { return cmp.Compare(a.Name, b.Name) })
	return list, errs
}

// Refusal reasons, as label values: the names of hedge.Refusal
// (Refusal.String), the one vocabulary of refusals.
var (
	ReasonBudget   = hedge.RefusedBudget.String()   // Stats.Refused[RefusedBudget]
	ReasonInFlight = hedge.RefusedInFlight.String() // Stats.Refused[RefusedInFlight]
	ReasonBusy     = hedge.RefusedBusy.String()     // Stats.Refused[RefusedBusy]
	ReasonPayoff   = hedge.RefusedPayoff.String()   // Stats.Refused[RefusedPayoff]
	ReasonFanOut   = hedge.RefusedFanOut.String()   // Stats.Refused[RefusedFanOut]
	ReasonHead     = hedge.RefusedHead.String()     // Stats.Refused[RefusedHead]
	ReasonDeadline = hedge.RefusedDeadline.String() // Stats.Refused[RefusedDeadline]
	ReasonReplicas = hedge.RefusedReplicas.String() // Stats.Refused[RefusedReplicas]
)

// Count is a counter with its label value.
type Count struct {
	Label string
	N     int64
}

// Refusals returns s's refusal counts, labelled by Refusal.String, for
// every counted refusal (hedge.Refusals.All), zeros included.
func Refusals(s hedge.Stats) []Count {
	out := make([]Count, 0, len(s.Refused))
	for why, n := range s.Refused.All() {
		out = append(out, Count{why.String(), n})
	}
	return out
}

// The gauges of what a Hedger runs now, labelled by hedger: its mode (one
// series per mode, labelled LabelMode, 1 for the mode in force and 0 for
// the others) and its rollout fraction. Their names are dotted as those
// of a Series, without a prefix.
const (
	ModeName    = "mode"
	RolloutName = "rollout"
	LabelMode   = "mode" // a mode's name, hedge.Mode.String
)

// ModeHelp and RolloutHelp describe the gauges of a Hedger's mode and
// rollout.
const (
	ModeHelp    = "1 for the mode the Hedger runs in now (mode=on, shadow or off; hedge.Hedger.SetMode), 0 for the others: after a kill switch, every pod should show mode=\"off\" at 1. Hedgers sharing a hedge.ModeVar report the same."
	RolloutHelp = "The fraction of requests the Hedger hedges for real while its mode is on (hedge.Hedger.SetRollout); the others run in Shadow, the control group. 1 without a rollout."
)

// Modes are the modes, in the order of their series.
var Modes = [...]hedge.Mode{hedge.On, hedge.Shadow, hedge.Off}

// ModeInForce returns the mode h's requests run in now: the more
// cautious of its own ([hedge.Hedger.Mode]) and its live settings'
// ([hedge.Hedger.Live], a fleet policy's), [hedge.Off] being the most
// cautious. An operation class's own live mode can be more cautious
// still; the mode gauges show the Hedger's.
func ModeInForce(h *hedge.Hedger) hedge.Mode {
	return max(h.Mode(), h.Live().Mode)
}

// ModeValues returns the values of the mode gauge of a Hedger in mode m,
// labelled by mode.
func ModeValues(m hedge.Mode) [len(Modes)]Count {
	var out [len(Modes)]Count
	for i, each := range Modes {
		out[i] = Count{each.String(), 0}
		if each == m {
			out[i].N = 1
		}
	}
	return out
}

// Views of a replica's load, as label values.
const (
	ViewReport  = "report"   // Stats.LoadByReport
	ViewOwnView = "own_view" // Stats.LoadByOwnView
)

// LoadViews returns s's counts of hedge decisions by the view of the
// replica's load they read.
func LoadViews(s hedge.Stats) [2]Count {
	return [2]Count{{ViewReport, s.LoadByReport}, {ViewOwnView, s.LoadByOwnView}}
}

// Latency paths, as label values.
const (
	PathCaller  = "caller"  // Stats.Latency
	PathPrimary = "primary" // Stats.Primary
	PathHedge   = "hedge"   // Stats.HedgePath
	PathHoldout = "holdout" // Stats.Holdout
)

// Path is a latency distribution with its label value.
type Path struct {
	Label string
	D     hedge.Distribution
}

// Paths returns s's latency distributions by path.
func Paths(s hedge.Stats) [3]Path {
	return [3]Path{{PathCaller, s.Latency}, {PathPrimary, s.Primary}, {PathHedge, s.HedgePath}}
}
