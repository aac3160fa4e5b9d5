package hedgeotel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TracedDo runs a call with each copy in its own span, under the caller's.
// Here the primary never answers; the hedge, sent after 10 ms, does.
func ExampleTracedDo() {
	rec := tracetest.NewSpanRecorder() // in a program: the SDK's exporter of choice
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("example")
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond)})
	if err != nil {
		log.Fatal(err)
	}
	ctx, span := tracer.Start(context.Background(), "GET /items/42")
	v, err := hedgeotel.TracedDo(ctx, tracer, h, "GetItem", func(ctx context.Context, a hedge.Attempt) (string, error) {
		if !a.Hedge {
			<-ctx.Done() // stuck until cancelled
			return "", ctx.Err()
		}
		return "item 42", nil
	})
	span.End()
	fmt.Println(v, err)
	for _, s := range rec.Ended() {
		if s.Name() != "hedge.copy GetItem" {
			continue
		}
		kind, _ := attr(s.Attributes(), hedgeotel.AttrKind)
		outcome, _ := attr(s.Attributes(), hedgeotel.AttrOutcome)
		fmt.Println(kind.AsString(), outcome.AsString(), s.Parent().SpanID() == span.SpanContext().SpanID())
	}
	// Unordered output:
	// item 42 <nil>
	// primary cancelled true
	// hedge won true
}
