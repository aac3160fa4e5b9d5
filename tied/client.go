package tied

import (
	"context"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/tiedclient"
)

// DefaultGap is the time between the two copies of a tied call when
// ClientConfig.Gap is zero: about two network round trips within a data
// centre. The gap lets the first copy, if its server is idle, claim the
// tie before the second is queued (the second server then drops it on
// arrival), so that the two copies' claims rarely cross; the servers run
// a call once either way.
const DefaultGap = tiedclient.DefaultGap

// Form is how the two copies of a tied call share the work (see the
// package documentation, "Two forms").
type Form = tiedclient.Form

const (
	// FormSpare, the default: the first copy queues as an untied request
	// does and starts without claiming (RolePrimary); the second
	// (RoleSpare) runs only on a worker free when it arrives, claiming
	// the tie first, so that it takes the call only from a first copy
	// still queued, and is refused at once (ErrNoSpare) by a server with
	// no free worker. No copy waits in a queue it would lengthen, and no
	// primary waits for a claim.
	FormSpare = tiedclient.FormSpare
	// FormSymmetric: both copies queue, and the first ready to start
	// claims the tie at the other's server (The Tail at Scale's tied
	// requests). Every copy that starts waits for a claim's round trip,
	// and both copies lengthen queues: near capacity it loses to sending
	// one copy (BENCHMARKS.md).
	FormSymmetric = tiedclient.FormSymmetric
)

// ClientConfig configures a Client: Replicas (at least 2; copies go to
// two distinct ones), Picker (chooses the two replicas of a call, the
// second never the first's, by the copies of this Client in flight on
// each; two choices by default, see hedge.Picker), Gap (the time between
// the first copy and the second; zero means DefaultGap, a negative value
// sends both at once) and Form (FormSpare, the zero value, or
// FormSymmetric).
type ClientConfig = tiedclient.ClientConfig

// Client sends tied calls: two copies of each to two distinct replicas,
// the second Gap after the first, both carrying a tie (a fresh
// identifier, and each the address of the other's replica) so that the
// first server to start its copy has the other dropped. Transports build
// on it (hedgehttp.Config.Tied, hedgegrpc.WithTied); see Run. Make one
// with NewClient; it is safe for concurrent use.
type Client = tiedclient.Client

// ErrNotSent marks the error of a copy whose request provably never
// reached a server: it failed before any byte of it was written (the
// connection was refused, had no route, or the name did not resolve).
// An attempt function passed to Run returns an error matching it (see
// NotSent) for such a failure; Run then treats the copy as never sent.
// It is hedge.ErrNotSent, so that one mark serves hedged and tied calls.
var ErrNotSent = hedge.ErrNotSent

// NotSent returns err marked as the failure of a copy that never reached
// a server: the result matches ErrNotSent and everything err matches.
// It returns nil for a nil err. It is hedge.NotSent.
func NotSent(err error) error { return hedge.NotSent(err) }

// NewClient validates cfg and returns a Client. The error matches
// ErrInvalidConfig.
func NewClient(cfg ClientConfig) (*Client, error) { return tiedclient.NewClient(cfg) }

// Copy tells an attempt function which copy of a tied call it sends:
// Index (0 for the first copy, 1 for the second), Replica (where this
// copy goes) and Sibling (where the other goes, or would go; they
// differ), ID (the tie identifier, shared by both copies; NewID) and Role
// (the copy's part, sent in RoleHeader (RoleKey): RolePrimary or RoleSpare
// in FormSpare, RoleEither, no header, in FormSymmetric).
type Copy = tiedclient.Copy

// ClientStats are a Client's counters; they only grow. Calls counts
// tied calls; Seconds second copies sent (a call whose first copy answers
// within the gap sends none); Dropped copies answered "dropped by the
// sibling" (ErrDropped); NoSpare spare copies answered "no spare
// capacity" (ErrNoSpare); SecondWins calls won by the second copy;
// Failures calls that returned an error; SparesSkipped spare copies not
// sent because fresh load reports said they could not help (see
// Client.ReportLoad); NotSent copies that failed before their request
// reached a server (errors matching ErrNotSent): they end no call and
// keep no twin from being sent.
type ClientStats = tiedclient.ClientStats

// Run sends a tied call through c: copy 0 at once, copy 1 Gap later
// (unless copy 0 has answered by then), each by attempt on its own
// goroutine with its own context, derived from ctx. attempt must send the
// copy to Copy.Replica with the tie (Copy.ID, the address of
// Copy.Sibling and Copy.Role), and return an error matching ErrDropped
// when the server answered that it dropped the copy for its sibling, and
// ErrNoSpare (which matches ErrDropped too) when it refused a spare copy
// for want of a free worker (DroppedError reads both from an HTTP
// answer).
//
// In FormSpare copy 0 is the primary and copy 1 the spare, which is not
// sent when fresh load reports say it cannot help (see ReportLoad). A
// spare refused is no failure: the primary has the call. When the primary
// never reached its server (ErrNotSent), copy 1 goes as a primary
// instead, or, if it went as a spare and was refused, goes again as a
// primary, so that the call is not left to nobody.
//
// The first copy to succeed wins: the other's context is cancelled, Run
// waits for it to return, and passes its value, if it succeeded too, to
// discard (which may be nil). A dropped copy is no failure: Run waits for
// the other. Nor is a copy whose error matches ErrNotSent (it never
// reached a server, so no server can have claimed its tie or run it): if
// copy 1 has not left yet, it is sent at once, and the call is the other
// copy's, so that one replica down does not fail the calls that pick it.
// A copy that fails otherwise ends the call with its error if the other
// copy was not sent or failed too; such a failure of copy 0 before the
// gap does not send copy 1 (a tied call is no retry: copy 0's server may
// have claimed the tie already, so that copy 1 would be dropped). If both
// copies were dropped, which correct servers never do, the error wraps
// ErrDropped. If ctx ends first, Run cancels both copies, waits for them
// and returns ctx's error.
//
// The winner's context stays alive until release is called (an HTTP
// body must be read within it); release must be called once, also after
// an error. A panic in attempt is re-raised on the caller's goroutine
// after the other copy returned.
func Run[T any](ctx context.Context, c *Client, attempt func(ctx context.Context, cp Copy) (T, error), discard func(T)) (v T, release func(), err error) {
	return tiedclient.Run(ctx, c, attempt, discard)
}
