package hedgeotel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgetest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// attr returns the value of key among kvs, and whether it is there.
func attr(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// copyView is what a test checks of one copy's span.
type copyView struct {
	index          int64
	kind, outcome  string
	winner, copies int64
	status         codes.Code
	links          int
	parentOK       bool
	events         int
}

// TestTracedDo runs calls under a parent span on synctest's fake clock and
// reads the copies' spans from an in-memory recorder.
func TestTracedDo(t *testing.T) {
	for _, c := range []struct {
		name    string
		attempt func(context.Context, hedge.Attempt) (int, error)
		want    []copyView // by copy index
		wantV   int
		wantErr bool
	}{
		{
			name:    "hedge wins, primary cancelled",
			attempt: hedgetest.Sleeper(50*ms, 5*ms),
			want: []copyView{
				{index: 0, kind: "primary", outcome: hedgeotel.OutcomeCancelled, winner: 1, copies: 2, status: codes.Unset, links: 1},
				{index: 1, kind: "hedge", outcome: hedgeotel.OutcomeWon, winner: 1, copies: 2, status: codes.Ok, links: 1},
			},
			wantV: 1,
		},
		{
			name:    "primary wins before the delay",
			attempt: hedgetest.Sleeper(3 * ms),
			want:    []copyView{{index: 0, kind: "primary", outcome: hedgeotel.OutcomeWon, winner: 0, copies: 1, status: codes.Ok}},
			wantV:   0,
		},
		{
			name: "primary fails, the next copy goes at once and wins",
			attempt: func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index == 0 {
					return 0, errors.New("connection reset")
				}
				return hedgetest.Sleeper(0, 2*ms)(ctx, a)
			},
			want: []copyView{
				{index: 0, kind: "primary", outcome: hedgeotel.OutcomeFailed, winner: 1, copies: 2, status: codes.Error, links: 1, events: 1},
				// Sent once the only running copy failed: no hedge, it
				// stands for the primary (hedge.Attempt.Hedge).
				{index: 1, kind: "primary", outcome: hedgeotel.OutcomeWon, winner: 1, copies: 2, status: codes.Ok, links: 1},
			},
			wantV: 1,
		},
		{
			name: "every copy fails",
			attempt: func(context.Context, hedge.Attempt) (int, error) {
				return 0, hedge.Permanent(errors.New("not found"))
			},
			want:    []copyView{{index: 0, kind: "primary", outcome: hedgeotel.OutcomeFailed, winner: -1, copies: 1, status: codes.Error, events: 1}},
			wantErr: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer time.Sleep(time.Second) // the Hedger's timer goroutine lingers
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				tracer := tp.Tracer("test")
				h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Replicas: 2})
				ctx, parent := tracer.Start(context.Background(), "caller")
				v, err := hedgeotel.TracedDo(ctx, tracer, h, "get", c.attempt)
				parent.End()
				if (err != nil) != c.wantErr || (!c.wantErr && v != c.wantV) {
					t.Fatalf("TracedDo = %v, %v", v, err)
				}
				var copies []sdktrace.ReadOnlySpan
				for _, s := range rec.Ended() {
					if s.Name() == "hedge.copy get" {
						copies = append(copies, s)
					}
				}
				if len(copies) != len(c.want) {
					t.Fatalf("%d copy spans ended; want %d", len(copies), len(c.want))
				}
				ids := map[trace.SpanID]int64{}
				for _, s := range copies {
					i, _ := attr(s.Attributes(), hedgeotel.AttrIndex)
					ids[s.SpanContext().SpanID()] = i.AsInt64()
				}
				for _, s := range copies {
					kv := s.Attributes()
					i, _ := attr(kv, hedgeotel.AttrIndex)
					kind, _ := attr(kv, hedgeotel.AttrKind)
					outcome, _ := attr(kv, hedgeotel.AttrOutcome)
					n, _ := attr(kv, hedgeotel.AttrCopies)
					got := copyView{index: i.AsInt64(), kind: kind.AsString(), outcome: outcome.AsString(), winner: -1, copies: n.AsInt64(),
						status: s.Status().Code, links: len(s.Links()), events: len(s.Events()),
						parentOK: s.Parent().SpanID() == parent.SpanContext().SpanID() && s.SpanContext().TraceID() == parent.SpanContext().TraceID()}
					if w, ok := attr(kv, hedgeotel.AttrWinner); ok {
						got.winner = w.AsInt64()
					}
					want := c.want[got.index]
					want.parentOK = true
					if got != want {
						t.Errorf("copy %d: %+v; want %+v", got.index, got, want)
					}
					if op, _ := attr(kv, hedgeotel.AttrOp); op.AsString() != "get" {
						t.Errorf("copy %d: op %q", got.index, op.AsString())
					}
					if _, ok := attr(kv, hedgeotel.AttrReplica); !ok {
						t.Errorf("copy %d: no replica attribute with Replicas: 2", got.index)
					}
					for _, l := range s.Links() {
						if other, ok := ids[l.SpanContext.SpanID()]; !ok || other == got.index {
							t.Errorf("copy %d links to %v, not a sibling copy", got.index, l.SpanContext.SpanID())
						}
					}
				}
			})
		})
	}
}

// TestTracedDoPanic: a copy that panics ends its span as failed, and the
// panic reaches the caller as Do raises it.
func TestTracedDoPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer time.Sleep(time.Second)
		rec := tracetest.NewSpanRecorder()
		tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms)})
		func() {
			defer func() {
				var pe *hedge.PanicError
				if r := recover(); r == nil {
					t.Error("no panic reached the caller")
				} else if err, ok := r.(error); !ok || !errors.As(err, &pe) {
					t.Errorf("recovered %v; want a *hedge.PanicError", r)
				}
			}()
			hedgeotel.TracedDo(context.Background(), tracer, h, "get", func(context.Context, hedge.Attempt) (int, error) {
				panic("boom")
			})
		}()
		ended := rec.Ended()
		if len(ended) != 1 || ended[0].Status().Code != codes.Error {
			t.Fatalf("spans after a panic: %v", ended)
		}
		if o, _ := attr(ended[0].Attributes(), hedgeotel.AttrOutcome); o.AsString() != hedgeotel.OutcomeFailed {
			t.Errorf("outcome %q; want failed", o.AsString())
		}
	})
}
