//! The RED series as OpenTelemetry instruments, for OTLP metrics export.

use super::*;

/// The RED series again as OpenTelemetry instruments, for OTLP metrics
/// export (`OTEL_METRICS_EXPORTER=otlp`). They come from the global meter
/// provider when the metrics are created: without one installed they are
/// no-ops.
pub(super) struct OtelRed {
    pub(super) rpc_requests: opentelemetry::metrics::Counter<u64>,
    pub(super) rpc_duration: opentelemetry::metrics::Histogram<f64>,
    pub(super) upstream_requests: opentelemetry::metrics::Counter<u64>,
    pub(super) upstream_duration: opentelemetry::metrics::Histogram<f64>,
}

impl OtelRed {
    pub(super) fn new() -> Self {
        let meter = opentelemetry::global::meter("idgate");
        OtelRed {
            rpc_requests: meter
                .u64_counter("idgate.rpc.requests")
                .with_description("RPCs served, by method and gRPC code")
                .build(),
            rpc_duration: meter
                .f64_histogram("idgate.rpc.duration")
                .with_unit("s")
                .with_description("RPC latency (a stream's whole life)")
                .with_boundaries(LATENCY_BUCKETS.to_vec())
                .build(),
            upstream_requests: meter
                .u64_counter("idgate.upstream.requests")
                .with_description("Upstream REST calls, by operation, channel and status")
                .build(),
            upstream_duration: meter
                .f64_histogram("idgate.upstream.duration")
                .with_unit("s")
                .with_description("Upstream REST call latency")
                .with_boundaries(LATENCY_BUCKETS.to_vec())
                .build(),
        }
    }
}
