// Package peers benchmarks github.com/tailcut/hedge against peer hedging
// libraries (failsafe-go's hedgepolicy and cristalhq/hedgedhttp).
//
// Everything lives in the _test.go files; see README.md for what is
// compared, how to run it, and why this is a separate module.
package peers
