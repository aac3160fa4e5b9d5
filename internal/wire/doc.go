// Package wire holds what the toolkit's clients and servers must agree
// on: the names of headers, metadata keys and load-report metrics, the
// values they carry, the errors those values stand for, and the small
// helpers that read them.
//
// The client transports (hedgehttp, hedgegrpc) and the server side
// (spare, tied, loadreport and their gRPC packages) both import it, and
// neither imports the other: each public package keeps its exported
// names as aliases of these (hedgehttp.AttemptHeader is
// wire.AttemptHeader), so that one definition serves both ends.
// layering_test.go checks the direction of the module's imports.
package wire
