package hedge

import "github.com/tailcut/hedge/internal/decide"

// Names the external tests of package hedge read, and users need not.
var FormatDelay = formatDelay

const MaxEstimatorMemory = maxEstimatorMemory

// NewEstimator returns fresh state of d for one operation class.
func NewEstimator(d Delay) decide.Estimator { return d.newEstimator() }
