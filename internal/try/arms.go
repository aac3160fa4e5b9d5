package try

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
)

// Arm is one hedging configuration under test: the requests assigned to it
// go through a client of its own (a hedgehttp.Transport, a hedgegrpc
// Interceptor or a hedgeredis.Client) with a Hedger of its own, made from
// Config.
type Arm struct {
	// Name is how --arms names it ("none", "default", "fixed:20ms").
	Name string
	// Doc says what the arm is, for the report.
	Doc string
	// Config returns a fresh hedge.Config (a Budget is state: each call
	// makes a new one). Replicas is set by the runner.
	Config func() (hedge.Config, error)
}

// hedges reports whether the arm may send more than one copy.
func (a Arm) hedges() bool {
	cfg, err := a.Config()
	return err == nil && cfg.MaxAttempts != 1
}

// NoneArm is the unhedged arm: one copy per request, to the replica the
// library's default picker chooses (the less busy of two drawn at
// random), so that it differs from the hedged arms in hedging alone.
const NoneArm = "none"

// ParseArm returns the arm of a name:
//
//   - none: no hedging (hedge.Config{MaxAttempts: 1});
//   - default: the library's default, the zero hedge.Config;
//   - fixed:DUR: the default with a fixed delay (hedge.Fixed(DUR));
//   - pNN: the default with the delay at the live NNth percentile
//     (hedge.Percentile{P: NN}), such as p90 or p99.5;
//   - plain-pNN: plain percentile hedging, such as plain-p95: a delay at
//     the live NNth percentile and the default's budget, without the
//     default's other rules (the spare-capacity rule, the payoff rule and
//     the head wait off: MaxReplicaLoad hedge.AnyReplicaLoad, PayoffWinRate
//     -1), so that beside default it tells the rules' doing from
//     hedging's;
//   - any configuration name of "hedge bench --configs" (bench.StrategyNames)
//     that needs no --delay and sends no fan-out calls.
func ParseArm(name string) (Arm, error) {
	switch {
	case name == NoneArm:
		return Arm{Name: name, Doc: "No hedging: one copy per request (hedge.Config{MaxAttempts: 1}), the replica chosen by the library's default picker.",
			Config: constantConfig(hedge.Config{MaxAttempts: 1})}, nil
	case name == bench.DefaultStrategy:
		return Arm{Name: name, Doc: "The library's default: the zero hedge.Config (a hedge at the live p95 of the arm's own latencies after 100 of them, a budget of 10% with a burst of 10, the spare-capacity and payoff rules).",
			Config: constantConfig(hedge.Config{})}, nil
	case strings.HasPrefix(name, "fixed:"):
		d, err := time.ParseDuration(strings.TrimPrefix(name, "fixed:"))
		if err != nil || d <= 0 {
			return Arm{}, fmt.Errorf("%w: arm %q: write fixed:DURATION with a duration above 0, such as fixed:20ms", ErrInvalid, name)
		}
		return Arm{Name: name, Doc: fmt.Sprintf("The default with a fixed delay of %v (hedge.Fixed).", d),
			Config: constantConfig(hedge.Config{Delay: hedge.Fixed(d)})}, nil
	case len(name) > 1 && name[0] == 'p' && (name[1] >= '0' && name[1] <= '9'):
		p, err := percentileArm(name, name[1:], "pNN", "p95 or p99")
		if err != nil {
			return Arm{}, err
		}
		return Arm{Name: name, Doc: fmt.Sprintf("The default with the delay at the live p%g of the arm's own latencies (hedge.Percentile{P: %g}).", p, p),
			Config: constantConfig(hedge.Config{Delay: hedge.Percentile{P: p}})}, nil
	case strings.HasPrefix(name, plainPrefix):
		p, err := percentileArm(name, strings.TrimPrefix(name, plainPrefix), "plain-pNN", "plain-p95")
		if err != nil {
			return Arm{}, err
		}
		return Arm{Name: name, Doc: fmt.Sprintf("Plain percentile hedging: a hedge at the live p%g of the arm's own latencies after 100 of them, and the default's budget (10%%, a burst of 10), without the default's other rules: no spare-capacity rule, no payoff rule, no head wait (hedge.Config{Delay: hedge.Percentile{P: %g}, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}).", p, p),
			Config: constantConfig(hedge.Config{Delay: hedge.Percentile{P: p}, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})}, nil
	}
	s, err := bench.LookupStrategy(name)
	if err != nil {
		return Arm{}, fmt.Errorf("%w: arm %q: use none, default, fixed:DURATION, pNN, plain-pNN, or a configuration of hedge bench: %s", ErrInvalid, name, strings.Join(bench.StrategyNames(), ", "))
	}
	if s.Fan != nil {
		return Arm{}, fmt.Errorf("%w: arm %q sends fan-out calls, which try does not: choose another", ErrInvalid, name)
	}
	if _, err := s.Config(bench.StrategyOptions{}); err != nil {
		return Arm{}, fmt.Errorf("%w: arm %q needs a delay: use fixed:DURATION instead", ErrInvalid, name)
	}
	return Arm{Name: s.Name, Doc: s.Doc, Config: func() (hedge.Config, error) { return s.Config(bench.StrategyOptions{}) }}, nil
}

// ParseArms parses a comma-separated list of arm names (see ParseArm). It
// needs at least two arms, each named once.
func ParseArms(list string) ([]Arm, error) {
	var arms []Arm
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		a, err := ParseArm(n)
		if err != nil {
			return nil, err
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("%w: arm %q is named twice: name each once", ErrInvalid, a.Name)
		}
		seen[a.Name] = true
		arms = append(arms, a)
	}
	if len(arms) < 2 {
		return nil, fmt.Errorf("%w: --arms %q: name at least two arms to compare, such as none,default", ErrInvalid, list)
	}
	return arms, nil
}

// plainPrefix begins the names of the plain percentile arms.
const plainPrefix = "plain-p"

// percentileArm reads the percentile of an arm's name, 50 to below 100.
func percentileArm(name, num, form, example string) (float64, error) {
	p, err := strconv.ParseFloat(num, 64)
	if err != nil || p < 50 || p >= 100 || strings.ContainsAny(num, "+-eExXpP_") {
		return 0, fmt.Errorf("%w: arm %q: write %s with NN from 50 to below 100, such as %s", ErrInvalid, name, form, example)
	}
	if _, err := hedge.New(hedge.Config{Delay: hedge.Percentile{P: p}}); err != nil {
		return 0, fmt.Errorf("%w: arm %q: %v", ErrInvalid, name, err)
	}
	return p, nil
}

func constantConfig(cfg hedge.Config) func() (hedge.Config, error) {
	return func() (hedge.Config, error) { return cfg, nil }
}
