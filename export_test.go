package hedge

// Names the external tests of package hedge read, and users need not.
var FormatDelay = formatDelay

const MaxEstimatorMemory = maxEstimatorMemory
