// Package orcawire writes the toolkit's gRPC load reports (ORCA per-call
// metrics), for the gRPC servers of the toolkit and the client transport
// that documents them alike. It is apart from package wire so that the
// HTTP packages do not import gRPC.
package orcawire

import (
	"context"

	"google.golang.org/grpc/orca"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
)

// RecordLoad records l as the ORCA per-call load report of the gRPC call
// of ctx, a server-side context: the named metrics wire.RunningMetric,
// wire.QueuedMetric, wire.WorkersMetric and wire.DoneMetric, and (when
// l.Workers > 0) application_utilization (Running+Queued)/Workers. It
// returns false, recording nothing, when ctx holds no recorder (the
// server lacks orca.CallMetricsServerOption, or runs the caller before
// it). hedgegrpc.RecordLoad documents it for users.
func RecordLoad(ctx context.Context, l hedge.Load) bool {
	r := orca.CallMetricsRecorderFromContext(ctx)
	if r == nil {
		return false
	}
	r.SetNamedMetric(wire.RunningMetric, float64(l.Running))
	r.SetNamedMetric(wire.QueuedMetric, float64(l.Queued))
	r.SetNamedMetric(wire.WorkersMetric, float64(l.Workers))
	r.SetNamedMetric(wire.DoneMetric, float64(l.Done))
	if l.Workers > 0 {
		r.SetApplicationUtilization(float64(l.Running+l.Queued) / float64(l.Workers))
	}
	return true
}
