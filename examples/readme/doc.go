// Package readme holds the README's code snippets as code that compiles and
// runs. Its tests check that every Go snippet in README.md appears, line for
// line, in this package's test files, and run each snippet against real
// servers on loopback, so that the README cannot drift from the API.
package readme
