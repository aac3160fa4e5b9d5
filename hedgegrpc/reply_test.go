package hedgegrpc_test

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// watchedReply is a reply message that records the goroutine of every
// call of its ProtoReflect, the door to its contents.
type watchedReply struct {
	*testgrpc.SimpleResponse
	mu   sync.Mutex
	from map[string]bool
}

func (w *watchedReply) ProtoReflect() protoreflect.Message {
	w.mu.Lock()
	w.from[goroutine()] = true
	w.mu.Unlock()
	return w.SimpleResponse.ProtoReflect()
}

// goroutine returns the calling goroutine's number, from the first line
// of its stack ("goroutine 7 [running]:").
func goroutine() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _, _ = bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(buf)
}

// TestCopiesLeaveTheCallersReplyAlone checks that the copies of a call
// never touch the caller's reply message: the caller fills it with the
// winner's reply while, under ReapInBackground, a loser may still be
// starting. The hedge, sent at once, runs on a goroutine of its own, and
// only the caller's goroutine may call the reply's ProtoReflect.
func TestCopiesLeaveTheCallersReplyAlone(t *testing.T) {
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), NoBudget: true})
	ic, err := hedgegrpc.New(h)
	if err != nil {
		t.Fatal(err)
	}
	hedgeRan := make(chan struct{})
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		if attemptOf(ctx) != "" {
			close(hedgeRan)
			<-ctx.Done() // the primary wins
			return ctx.Err()
		}
		<-hedgeRan // the hedge has made its reply
		reply.(*testgrpc.SimpleResponse).Hostname = "primary"
		return nil
	}
	reply := &watchedReply{SimpleResponse: &testgrpc.SimpleResponse{}, from: map[string]bool{}}
	if err := ic.Unary(context.Background(), unaryCall, &testgrpc.SimpleRequest{}, reply, nil, invoker); err != nil {
		t.Fatal(err)
	}
	if reply.GetHostname() != "primary" {
		t.Fatalf("reply %v, want the primary's", reply.SimpleResponse)
	}
	caller := goroutine()
	for g := range reply.from {
		if g != caller {
			t.Errorf("goroutine %s (not the caller's, %s) called the caller's reply's ProtoReflect", g, caller)
		}
	}
}
