package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge"
)

// Strategy is a named hedging configuration of our engine. The runner
// gives every strategy the same backend and workload; Config says how the
// Hedger of each run is made.
type Strategy struct {
	// Name is what --configs takes ("hedge-live").
	Name string
	// Doc says what the configuration is, exactly, for the report.
	Doc string
	// Config returns a fresh hedge.Config (a fresh Budget each call: a
	// Budget is state and must not carry over from one run to the next).
	// Replicas and PreciseTimers are set by the caller.
	Config func(o StrategyOptions) (hedge.Config, error)
}

// StrategyOptions are the knobs a strategy may read.
type StrategyOptions struct {
	// FixedDelay is the delay of the fixed-delay strategies.
	FixedDelay time.Duration
}

var (
	strategiesMu sync.Mutex
	strategies   = map[string]Strategy{}
)

// RegisterStrategy adds a strategy, so that it can be chosen by name. It
// panics if the name is taken or the strategy incomplete.
func RegisterStrategy(s Strategy) {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	if s.Name == "" || s.Config == nil {
		panic("bench: RegisterStrategy: a strategy needs a Name and a Config")
	}
	if _, dup := strategies[s.Name]; dup {
		panic("bench: strategy registered twice: " + s.Name)
	}
	strategies[s.Name] = s
}

// LookupStrategy returns the strategy of that name, or an error that lists
// the known ones.
func LookupStrategy(name string) (Strategy, error) {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	s, ok := strategies[name]
	if !ok {
		return Strategy{}, fmt.Errorf("unknown configuration %q: use one of %s", name, strings.Join(strategyNames(), ", "))
	}
	return s, nil
}

// StrategyNames returns the registered names, sorted.
func StrategyNames() []string {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	return strategyNames()
}

func strategyNames() []string {
	names := make([]string, 0, len(strategies))
	for n := range strategies {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// DefaultStrategies are the configurations compared when none are named.
var DefaultStrategies = []string{"none-random", "none-two-choice", "hedge-fixed", "hedge-live", "hedge-live-budget5"}

// StrategyContender turns a strategy into a Contender for one backend.
// precise sets Config.PreciseTimers (the runner sets it for Redis, whose
// sub-millisecond delays the runtime timer would round up to a millisecond).
func StrategyContender(s Strategy, o StrategyOptions, precise bool) Contender {
	doc := s.Doc
	if precise {
		doc += " PreciseTimers on."
	}
	return Contender{
		Name: s.Name,
		Doc:  doc,
		New: func(b Backend) (Client, error) {
			cfg, err := s.Config(o)
			if err != nil {
				return nil, err
			}
			cfg.Replicas = b.Replicas()
			cfg.PreciseTimers = precise
			return b.NewClient(cfg)
		},
	}
}

func budget(ratio float64) *hedge.Budget {
	b, err := hedge.NewBudget(ratio, 10)
	if err != nil {
		panic(err) // constant arguments
	}
	return b
}

func needDelay(o StrategyOptions) error {
	if o.FixedDelay <= 0 {
		return fmt.Errorf("the fixed-delay configurations need a delay above 0 (--delay), not %v", o.FixedDelay)
	}
	return nil
}

func init() {
	RegisterStrategy(Strategy{
		Name: "none-random",
		Doc:  "No hedging; each request goes once to a replica drawn uniformly at random.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{MaxAttempts: 1, Picker: hedge.Picker{Random: true}}, nil
		},
	})
	RegisterStrategy(Strategy{
		Name: "none-two-choice",
		Doc:  "No hedging; each request goes once to the less busy (fewer requests in flight from this client) of two replicas drawn at random.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{MaxAttempts: 1}, nil
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-fixed",
		Doc:  "Hedge after a fixed delay (--delay); otherwise the defaults: at most 2 copies, budget 10% of requests (burst 10), two-choice picker, losers cancelled.",
		Config: func(o StrategyOptions) (hedge.Config, error) {
			return hedge.Config{Delay: hedge.Fixed(o.FixedDelay), Budget: budget(0.1)}, needDelay(o)
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-fixed-nobudget",
		Doc:  "Hedge after a fixed delay (--delay), no budget (as the peer libraries do by default), at most 2 copies, two-choice picker.",
		Config: func(o StrategyOptions) (hedge.Config, error) {
			return hedge.Config{Delay: hedge.Fixed(o.FixedDelay), NoBudget: true}, needDelay(o)
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-live",
		Doc: "Our default, the zero hedge.Config: delay = live p95 of the last 1,000 primary latencies (no hedge before 100 were seen), " +
			"budget 10% of requests with a burst of 10 (hedge.NewBudget(0.1, 10)), at most 2 copies, two-choice picker that never reuses the primary's replica, losers cancelled.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{}, nil
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-live-budget5",
		Doc:  "As hedge-live with a budget of 5% of requests (hedge.NewBudget(0.05, 10)).",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{Budget: budget(0.05)}, nil
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-live-p99",
		Doc:  "As hedge-live with the delay at the live p99 instead of p95: about 1% of requests outlive it, so about 1% extra.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{Delay: hedge.Percentile{P: 99}}, nil
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-live-burst100",
		Doc:  "As hedge-live with a budget burst of 100 hedges instead of 10 (hedge.NewBudget(0.1, 100)): room for the hedges of a whole stall.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			b, err := hedge.NewBudget(0.1, 100)
			return hedge.Config{Budget: b}, err
		},
	})
	RegisterStrategy(Strategy{
		Name: "hedge-live-p90",
		Doc:  "As hedge-live with the delay at the live p90 instead of p95.",
		Config: func(StrategyOptions) (hedge.Config, error) {
			return hedge.Config{Delay: hedge.Percentile{P: 90}}, nil
		},
	})
}
