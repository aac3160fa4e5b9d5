// Package otelhist exports the latency histograms of one or more
// *hedge.Hedger as OpenTelemetry exponential histograms, through the
// OpenTelemetry SDK's Producer interface.
//
// Package hedgeotel exports a Hedger's latencies as gauges of quantiles,
// because the OpenTelemetry metric API has no asynchronous histogram: its
// histogram instruments are synchronous, and the SDK's exponential
// histogram aggregation is fed only by their Record, one call per value.
// Feeding it would put a Record on every call of hedge.Do, which hedgeotel
// promises not to do. The SDK does take already aggregated data from an
// external source, a Producer registered on a Reader (the way its
// OpenCensus bridge works), and that is what this package is: at each
// collection, Producer reads Hedger.Histograms, the counts the Hedger
// keeps anyway, and converts them. Nothing is added to the request path.
//
// Wire it to the reader that exports your metrics:
//
//	p, err := otelhist.NewProducer(map[string]*hedge.Hedger{"items": h})
//	if err != nil {
//		log.Fatal(err)
//	}
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(p))
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//
// It lives apart from hedgeotel because it depends on the SDK
// (go.opentelemetry.io/otel/sdk/metric), not only on the API: a library
// that only instruments should not pull an SDK into its users' programs.
//
// # The metric
//
//	hedge.latency.distribution{hedger,op,path}   exponential histogram  s  path: caller, primary, hedge, holdout
//
// Cumulative, since the Hedger was made; StartTime is when NewProducer
// was called (a Hedger does not say when it was made). The paths are
// hedgeotel's (see hedgeotel.PathCaller and the others); a path with no
// values yet has no point.
//
// # Buckets and their error
//
// A Hedger counts latencies in log-linear buckets, 64 per power of two
// (package quantile). Each is counted whole, as if every value in it were
// its midpoint (quantile.Bucket.Mid, the value the Hedger's own quantiles
// report), in the exponential bucket of scale 6 (64 per power of two, each
// bound 2^(1/64) above the one before) that holds the midpoint; exact
// zeros go to the zero bucket, whose threshold is 0. A value is then never
// further than quantile.RelativeError (1/128, about 0.8%) outside the
// bucket it is counted in: a value in (a(1-e), b(1+e)] for a bucket
// (a, b]. The scale is then lowered, as the SDK's own aggregation does,
// until the buckets in use fit in MaxSize (160, the SDK's default); each
// step halves the resolution and keeps the bound relative to the wider
// buckets. Min and Max are not reported.
package otelhist
