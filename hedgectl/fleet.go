package hedgectl

import (
	"maps"
	"slices"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
)

// FleetStatus is what the Handler reads of a pod's fleet policy watcher:
// *fleet.Watcher implements it. Status must not block.
type FleetStatus interface {
	Status() fleet.PodStatus
}

// LiveState is what a fleet policy set over a Hedger's Config
// (hedge.Settings); a zero field is the Config's.
type LiveState struct {
	LiveSettings
	// Ops holds the settings of the operation classes that have their
	// own, in place of the Hedger's.
	Ops map[string]LiveSettings `json:"ops,omitempty"`
}

// LiveSettings is hedge.Settings in JSON.
type LiveSettings struct {
	Mode               string  `json:"mode"`
	Percentile         float64 `json:"percentile,omitempty"`
	BudgetRatio        float64 `json:"budget_ratio,omitempty"`
	BudgetBurst        float64 `json:"budget_burst,omitempty"`
	MaxAttempts        int     `json:"max_attempts,omitempty"`
	MaxHedgesPerSecond float64 `json:"max_hedges_per_second,omitempty"`
}

// liveState returns l in JSON form, or nil for the zero Live.
func liveState(l hedge.Live) *LiveState {
	if l.Settings == (hedge.Settings{}) && len(l.Ops) == 0 {
		return nil
	}
	out := &LiveState{LiveSettings: liveSettings(l.Settings)}
	for _, op := range slices.Sorted(maps.Keys(l.Ops)) {
		if out.Ops == nil {
			out.Ops = map[string]LiveSettings{}
		}
		out.Ops[op] = liveSettings(l.Ops[op])
	}
	return out
}

func liveSettings(s hedge.Settings) LiveSettings {
	return LiveSettings{
		Mode: s.Mode.String(), Percentile: s.Percentile, BudgetRatio: s.BudgetRatio, BudgetBurst: s.BudgetBurst,
		MaxAttempts: s.MaxAttempts, MaxHedgesPerSecond: s.MaxHedgesPerSecond,
	}
}
