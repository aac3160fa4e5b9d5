package hedge

import (
	"math/rand/v2"

	"github.com/tailcut/hedge/internal/decide"
)

// Names the external tests of package hedge read, and users need not.
var FormatDelay = formatDelay

const MaxEstimatorMemory = maxEstimatorMemory

// NewEstimator returns fresh state of d for one operation class.
func NewEstimator(d Delay) decide.Estimator { return d.newEstimator() }

// Pick is the Picker's choice, with draws from r (nil: the package-level
// generator of math/rand/v2).
func (p *Picker) Pick(n int, held []int, load func(i int) int, r *rand.Rand) int {
	u := rand.Uint64()
	if r != nil {
		u = r.Uint64()
	}
	return (*decide.Picker)(p).Pick(n, held, load, u)
}

// The probation's constants, and the span of a recent Distribution.
const (
	ProbationFailures = probationFailures
	ProbationTime     = probationTime
	RecentWindow      = recentSpan
)

// ParseMode parses a mode's name.
var ParseMode = parseMode

// HedgeRate returns hedges sent per request.
func (s Stats) HedgeRate() float64 { return s.hedgeRate() }
