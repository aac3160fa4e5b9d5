package bench

import (
	"fmt"
	"maps"
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
	// Name is what --configs takes ("default").
	Name string
	// Doc says what the configuration is, exactly, for the report.
	Doc string
	// Config returns a fresh hedge.Config (a fresh Budget each call: a
	// Budget is state and must not carry over from one run to the next).
	// Replicas and PreciseTimers are set by the caller (StrategyContender),
	// and the backend adds its transport's wiring (NewClient).
	Config func(o StrategyOptions) (hedge.Config, error)
	// Fan, if set, sends each request as one fan-out call (hedge.DoFan)
	// of Scenario.FanOut leaves with these options, rather than each leaf
	// through the backend's hedging transport.
	Fan *hedge.FanOut
}

// StrategyOptions are the knobs a strategy may read.
type StrategyOptions struct {
	// FixedDelay is the delay of the fixed-delay strategies.
	FixedDelay time.Duration
}

// DefaultStrategy is the name of the library's default: the zero
// hedge.Config, so that it follows whatever the library's default is.
const DefaultStrategy = "default"

// builtinStrategies is the one table of the configurations this package
// registers: each name, what it is, and the hedge.Config it stands for.
// Every configuration starts from the zero hedge.Config and sets only what
// makes it differ from the library's default, so a change of the default
// reaches all of them.
var builtinStrategies = []Strategy{
	{
		Name:   "none-random",
		Doc:    "No hedging; each request goes once to a replica drawn uniformly at random.",
		Config: constant(hedge.Config{MaxAttempts: 1, Picker: hedge.Picker{Random: true}}),
	},
	{
		Name:   "none-two-choice",
		Doc:    "No hedging; each request goes once to the replica the library's default picker chooses (the less busy of two drawn at random, by requests in flight from this client).",
		Config: constant(hedge.Config{MaxAttempts: 1}),
	},
	{
		Name:   DefaultStrategy,
		Doc:    defaultDoc(),
		Config: constant(hedge.Config{}),
	},
	{
		Name:   "default-fan",
		Doc:    "The library's default Config, each request sent as one fan-out call (hedge.DoFan with the zero FanOut: the request's own budget and cap, and the sibling trigger) of --fanout leaves, rather than each leaf through the transport.",
		Config: constant(hedge.Config{}),
		Fan:    &hedge.FanOut{},
	},
	{
		Name:   "hedge-live-plain",
		Doc:    "The plain live p95 with the budget: the zero hedge.Config with the spare-capacity and payoff rules off (MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1).",
		Config: constant(hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}),
	},
	{
		Name:   "hedge-fixed",
		Doc:    "As default with a fixed delay (--delay, hedge.Fixed) instead of the default delay.",
		Config: fixedDelay(hedge.Config{}),
	},
	{
		Name:   "hedge-fixed-plain",
		Doc:    "Plain hedging at a fixed delay (--delay): no budget, and the spare-capacity and payoff rules off, as hedge advise's rows model it.",
		Config: fixedDelay(hedge.Config{NoBudget: true, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}),
	},
	{
		Name:   "hedge-fixed-nobudget",
		Doc:    "As hedge-fixed with no budget (NoBudget), as the peer libraries hedge by default.",
		Config: fixedDelay(hedge.Config{NoBudget: true}),
	},
	{
		Name:   "hedge-live-budget5",
		Doc:    "As default with a budget of 5% of requests and a burst of 10 (hedge.NewBudget(0.05, 10)).",
		Config: withBudget(0.05, 10),
	},
	{
		Name:   "hedge-live-burst100",
		Doc:    "As default with a budget of 10% of requests and a burst of 100 hedges (hedge.NewBudget(0.1, 100)): room for the hedges of a whole stall.",
		Config: withBudget(0.1, 100),
	},
	{
		Name:   "hedge-live-p90",
		Doc:    "As default with the delay at the live p90 (hedge.Percentile{P: 90}).",
		Config: constant(hedge.Config{Delay: hedge.Percentile{P: 90}}),
	},
	{
		Name:   "hedge-live-p99",
		Doc:    "As default with the delay at the live p99 (hedge.Percentile{P: 99}): about 1% of requests outlive it, so about 1% extra.",
		Config: constant(hedge.Config{Delay: hedge.Percentile{P: 99}}),
	},
}

// strategyAliases maps former names to the names LookupStrategy returns
// for them. hedge-live is what default was called before it was named for
// what it is; it is accepted for a while.
var strategyAliases = map[string]string{"hedge-live": DefaultStrategy}

// DefaultStrategies are the configurations compared when none are named.
var DefaultStrategies = []string{"none-random", "none-two-choice", "hedge-fixed", DefaultStrategy, "hedge-live-budget5"}

// constant returns a Config function that returns cfg, which must hold no
// state (no Budget).
func constant(cfg hedge.Config) func(StrategyOptions) (hedge.Config, error) {
	return func(StrategyOptions) (hedge.Config, error) { return cfg, nil }
}

// fixedDelay returns a Config function that returns cfg with the delay
// fixed at StrategyOptions.FixedDelay, which must be above 0.
func fixedDelay(cfg hedge.Config) func(StrategyOptions) (hedge.Config, error) {
	return func(o StrategyOptions) (hedge.Config, error) {
		if o.FixedDelay <= 0 {
			return hedge.Config{}, fmt.Errorf("the fixed-delay configurations need a delay above 0 (--delay), not %v", o.FixedDelay)
		}
		cfg.Delay = hedge.Fixed(o.FixedDelay)
		return cfg, nil
	}
}

// withBudget returns a Config function that returns the default with a
// fresh hedge.NewBudget(ratio, burst).
func withBudget(ratio, burst float64) func(StrategyOptions) (hedge.Config, error) {
	return func(StrategyOptions) (hedge.Config, error) {
		b, err := hedge.NewBudget(ratio, burst)
		return hedge.Config{Budget: b}, err
	}
}

// defaultDoc describes the default configuration as the library defines
// it, read from the Policy of a zero hedge.Config rather than written out,
// so that the report follows the library too.
func defaultDoc() string {
	doc := "The library's default: the zero hedge.Config, only Replicas set."
	h, err := hedge.New(hedge.Config{Replicas: 3})
	if err != nil {
		return doc
	}
	return fmt.Sprintf("%s As built: %v; replicas chosen by hedge.Picker's default. hedge-live is accepted as an alias.", doc, h)
}

var (
	strategiesMu sync.Mutex
	strategies   = map[string]Strategy{}
)

func init() {
	for _, s := range builtinStrategies {
		RegisterStrategy(s)
	}
}

// RegisterStrategy adds a strategy, so that it can be chosen by name. It
// panics if the name is taken (as a name or an alias) or the strategy
// incomplete.
func RegisterStrategy(s Strategy) {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	if s.Name == "" || s.Config == nil {
		panic("bench: RegisterStrategy: a strategy needs a Name and a Config")
	}
	_, dup := strategies[s.Name]
	_, alias := strategyAliases[s.Name]
	if dup || alias {
		panic("bench: strategy registered twice: " + s.Name)
	}
	strategies[s.Name] = s
}

// LookupStrategy returns the strategy of that name, or an error that lists
// the known ones. A former name (see StrategyAliases) returns the strategy
// under its current name.
func LookupStrategy(name string) (Strategy, error) {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	if current, ok := strategyAliases[name]; ok {
		name = current
	}
	s, ok := strategies[name]
	if !ok {
		return Strategy{}, fmt.Errorf("unknown configuration %q: use one of %s", name, strings.Join(strategyNames(), ", "))
	}
	return s, nil
}

// StrategyAliases returns the former names still accepted by
// LookupStrategy, each mapped to its current name.
func StrategyAliases() map[string]string { return maps.Clone(strategyAliases) }

// StrategyNames returns the registered names, sorted; aliases are not
// among them.
func StrategyNames() []string {
	strategiesMu.Lock()
	defer strategiesMu.Unlock()
	return strategyNames()
}

func strategyNames() []string {
	return slices.Sorted(maps.Keys(strategies))
}

// StrategyContender turns a strategy into a Contender for one backend.
// It sets what the bench must on the strategy's Config: Replicas, the
// backend's, and PreciseTimers, precise (the runner sets it for Redis,
// whose sub-millisecond delays the runtime timer would round up to a
// millisecond; false is the library's default).
func StrategyContender(s Strategy, o StrategyOptions, precise bool) Contender {
	doc := s.Doc
	if precise {
		doc += " PreciseTimers on."
	}
	config := func(b Backend) (hedge.Config, error) {
		cfg, err := s.Config(o)
		cfg.Replicas = b.Replicas()
		cfg.PreciseTimers = precise
		return cfg, err
	}
	c := Contender{
		Name: s.Name,
		Doc:  doc,
		New: func(b Backend) (Client, error) {
			cfg, err := config(b)
			if err != nil {
				return nil, err
			}
			return b.NewClient(cfg)
		},
	}
	if s.Fan != nil {
		f := *s.Fan
		c.NewFan = func(b Backend, w int) (Client, error) {
			cfg, err := config(b)
			if err != nil {
				return nil, err
			}
			return newFanCallClient(b, cfg, f, w)
		}
		c.New = func(b Backend) (Client, error) { return c.NewFan(b, 1) }
	}
	return c
}
