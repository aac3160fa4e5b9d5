package wire

// LoadReportKey is the gRPC trailer key of per-call load reports (ORCA,
// gRFC A51): its value is a binary OrcaLoadReport.
const LoadReportKey = "endpoint-load-metrics-bin"

// The named metrics of the toolkit's gRPC load reports: the fields of
// hedge.Load, each a whole number. The HTTP report (LoadHeader) carries
// them as named_metrics.<name>.
const (
	RunningMetric = "hedge_running" // hedge.Load.Running
	QueuedMetric  = "hedge_queued"  // hedge.Load.Queued
	WorkersMetric = "hedge_workers" // hedge.Load.Workers
	DoneMetric    = "hedge_done"    // hedge.Load.Done
)
