// Package pb stands in for the package protoc generates for a search
// service, so that the transports guide's sharded gRPC snippet compiles
// and runs here: its Search service's Query is grpc.testing's UnaryCall,
// and the servers the tests start answer it.
package pb

import (
	"context"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// Request is a search's request.
type Request = testgrpc.SimpleRequest

// Reply is a search's reply.
type Reply = testgrpc.SimpleResponse

// SearchClient calls the Search service over a conn.
type SearchClient struct{ c testgrpc.TestServiceClient }

// NewSearchClient returns a SearchClient over cc.
func NewSearchClient(cc grpc.ClientConnInterface) SearchClient {
	return SearchClient{testgrpc.NewTestServiceClient(cc)}
}

// Query runs a search.
func (s SearchClient) Query(ctx context.Context, req *Request, opts ...grpc.CallOption) (*Reply, error) {
	return s.c.UnaryCall(ctx, req, opts...)
}
