package hedgeotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tailcut/hedge"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Copy outcomes, the values of the "hedge.copy.outcome" span attribute.
const (
	OutcomeWon       = "won"       // the copy whose result Do returned
	OutcomeCancelled = "cancelled" // cancelled because another copy won, or the call ended
	OutcomeLost      = "lost"      // succeeded, after another copy had won
	OutcomeFailed    = "failed"    // returned an error of its own
)

// Span attribute keys set on each copy's span.
const (
	AttrOp      = attribute.Key("hedge.op")             // the operation class
	AttrIndex   = attribute.Key("hedge.copy.index")     // hedge.Attempt.Index: 0 for the primary
	AttrKind    = attribute.Key("hedge.copy.kind")      // "hedge" if hedge.Attempt.Hedge, else "primary"
	AttrReplica = attribute.Key("hedge.copy.replica")   // hedge.Attempt.Replica, when the Hedger picks
	AttrOutcome = attribute.Key("hedge.copy.outcome")   // OutcomeWon, OutcomeCancelled, OutcomeLost, OutcomeFailed
	AttrWinner  = attribute.Key("hedge.copy.winner")    // on every copy: the index of the copy that won, when one did
	AttrCopies  = attribute.Key("hedge.copies.started") // on every copy: how many copies the call started
)

// TracedDo is hedge.Do with each copy of the request in a span of its own,
// a child of the span in ctx (the caller's), named "hedge.copy " + op, so
// that a trace shows the primary and each hedge side by side, on their
// replicas, and which one answered.
//
// Each span carries the operation (hedge.op), the copy's index
// (hedge.copy.index) and kind (hedge.copy.kind: hedge for a copy sent
// while another copy ran, hedge.Attempt.Hedge; primary for the primary
// and for a copy that stands for it, sent when no other ran), its
// replica when the Hedger picks replicas, and, once the call is decided,
// its outcome (hedge.copy.outcome: won, cancelled, lost or failed), the
// winner's index (hedge.copy.winner) and how many copies were started.
// The winner's span has status Ok; a copy that failed with an error of its
// own has status Error and the error recorded; a copy cancelled because
// another won is not an error, and its span says so by its outcome. The
// spans of one call are linked to each other, both ways, so that a trace
// viewer leads from the primary to its hedges.
//
// The winner is exact: TracedDo carries the winning copy's index beside
// its result through hedge.Do, and each span is ended, at the time its
// copy returned, once the call is decided. A copy still running when Do
// returns (Config.ReapInBackground) ends its span when it returns.
// Everything else is hedge.Do's: the same Hedger, stats and events; the
// tracing costs a few allocations per copy, and nothing when the tracer
// does not sample the call (a non-recording span).
func TracedDo[T any](ctx context.Context, tracer trace.Tracer, h *hedge.Hedger, op string, attempt func(ctx context.Context, a hedge.Attempt) (T, error)) (T, error) {
	tc := &tracedCall{op: op, winner: -1}
	decided := false
	defer func() {
		if !decided { // a copy panicked: Do re-raises it here
			tc.decide(-1)
		}
	}()
	r, err := hedge.Do(ctx, h, op, func(ctx context.Context, a hedge.Attempt) (indexed[T], error) {
		ctx, sp := tc.start(ctx, tracer, a)
		ok := false
		defer func() {
			if !ok {
				tc.returned(sp, ctx, errPanicked)
			}
		}()
		v, err := attempt(ctx, a)
		ok = true
		tc.returned(sp, ctx, err)
		return indexed[T]{v, a.Index}, err
	})
	decided = true
	if err != nil {
		tc.decide(-1)
		var zero T
		return zero, err
	}
	tc.decide(r.index)
	return r.v, nil
}

// errPanicked is recorded on the span of a copy that panicked (or called
// runtime.Goexit); Do re-raises the panic on the caller.
var errPanicked = errors.New("hedgeotel: the copy panicked")

// indexed is a result with the index of the copy that produced it.
type indexed[T any] struct {
	v     T
	index int
}

// tracedCall is the tracing state of one call. mu guards everything.
type tracedCall struct {
	op string

	mu      sync.Mutex
	spans   []*copySpan
	decided bool
	winner  int // -1: none (yet)
}

// copySpan is one copy's span, with what its copy did.
type copySpan struct {
	span      trace.Span
	index     int
	done      bool // the copy's function returned
	ended     bool
	end       time.Time
	err       error
	cancelled bool // its context had ended when it returned
}

func (tc *tracedCall) start(ctx context.Context, tracer trace.Tracer, a hedge.Attempt) (context.Context, *copySpan) {
	kind := "primary"
	if a.Hedge {
		kind = "hedge"
	}
	attrs := []attribute.KeyValue{AttrOp.String(tc.op), AttrIndex.Int(a.Index), AttrKind.String(kind)}
	if a.Replica >= 0 {
		attrs = append(attrs, AttrReplica.Int(a.Replica))
	}
	ctx, span := tracer.Start(ctx, "hedge.copy "+tc.op, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	cs := &copySpan{span: span, index: a.Index}
	tc.mu.Lock()
	tc.spans = append(tc.spans, cs)
	tc.mu.Unlock()
	return ctx, cs
}

// returned records that cs's copy returned err, and ends its span if the
// call is decided.
func (tc *tracedCall) returned(cs *copySpan, ctx context.Context, err error) {
	end := time.Now()
	cancelled := ctx.Err() != nil
	tc.mu.Lock()
	defer tc.mu.Unlock()
	cs.done, cs.end, cs.err, cs.cancelled = true, end, err, cancelled
	if tc.decided {
		tc.finish(cs)
	}
}

// decide records the winner (-1: none) and ends the spans of the copies
// that have returned.
func (tc *tracedCall) decide(winner int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.decided, tc.winner = true, winner
	for _, cs := range tc.spans {
		if cs.done {
			tc.finish(cs)
		}
	}
}

// finish sets cs's outcome, links and status, and ends its span at the
// time its copy returned. tc.mu is held.
func (tc *tracedCall) finish(cs *copySpan) {
	if cs.ended {
		return
	}
	cs.ended = true
	outcome := OutcomeCancelled
	switch {
	case cs.index == tc.winner:
		outcome = OutcomeWon
		cs.span.SetStatus(codes.Ok, "")
	case cs.err == nil:
		outcome = OutcomeLost
	case cs.cancelled && (errors.Is(cs.err, context.Canceled) || errors.Is(cs.err, context.DeadlineExceeded)):
		// Cancelled because another copy won or the call ended: not
		// this copy's failure.
	default:
		outcome = OutcomeFailed
		cs.span.RecordError(cs.err)
		cs.span.SetStatus(codes.Error, cs.err.Error())
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(outcome), AttrCopies.Int(len(tc.spans))}
	if tc.winner >= 0 {
		attrs = append(attrs, AttrWinner.Int(tc.winner))
	}
	cs.span.SetAttributes(attrs...)
	for _, other := range tc.spans {
		if other != cs {
			cs.span.AddLink(trace.Link{SpanContext: other.span.SpanContext(), Attributes: []attribute.KeyValue{AttrIndex.Int(other.index)}})
		}
	}
	cs.span.End(trace.WithTimestamp(cs.end))
}
