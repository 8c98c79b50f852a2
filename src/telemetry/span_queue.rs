//! The span export queue: bounded, sized for the gateway's rate, and
//! counted.
//!
//! [`EncodedBatch`] is the tracer provider's span processor. When a span
//! ends, the serving thread that ended it encodes it to OTLP protobuf
//! (`otlp::wire`) and appends the bytes to the queue; a thread of its own
//! sends each batch as one `ExportTraceServiceRequest` (`otlp::transport`).
//! The SDK's batch processor did otherwise: it queued the span record,
//! and its thread converted each to the generated protobuf structs before
//! encoding them. Encoding where the span ends copies nothing but the
//! bytes, and frees the span's memory on the thread that allocated it
//! (docs/performance.md has what that saved).
//!
//! - The queue holds [`SpanQueueConfig::max_queue_size`] spans; past it a
//!   span is dropped and counted `dropped`.
//! - A batch leaves as soon as it holds
//!   [`SpanQueueConfig::max_export_batch_size`] spans, and whatever waits
//!   leaves every [`SpanQueueConfig::schedule_delay`], on a flush and at
//!   shutdown. One export is in flight at a time.
//! - Every span handed to the transport is counted `exported` or
//!   `failed`, by the export's outcome after the transport's retries
//!   (spans a collector says it rejected, OTLP's partial success, are
//!   `failed`).
//!
//! [`SpanExportStats`] holds the counters; `/metrics` shows them as
//! `idgate_trace_spans_total{outcome}` and `idgate_trace_queue_spans`
//! (docs/otlp.md).
//!
//! Defaults: the SDK's (2,048 spans queued, 512 per export) drop spans at
//! a few thousand calls per second: a call makes two or three spans, and
//! one export of 512 spans cannot leave faster than the collector answers.
//! Here the queue holds [`DEFAULT_MAX_QUEUE_SIZE`] spans and an export
//! carries up to [`DEFAULT_MAX_EXPORT_BATCH_SIZE`] (about 1.2 MB of OTLP,
//! under a collector's 4 MiB gRPC default): sized for 50,000 calls per
//! second; no span was dropped at the highest rate the development
//! machine reaches with export on, about 31,000 (docs/performance.md).
//! `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` and
//! `OTEL_BSP_SCHEDULE_DELAY` still win.

use std::time::Duration;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
};

/// Spans the queue holds unless `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise:
/// about 0.3 s of a 50,000 calls/s peak at two spans a call.
pub const DEFAULT_MAX_QUEUE_SIZE: usize = 32_768;

/// Spans per export unless `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` says
/// otherwise.
pub const DEFAULT_MAX_EXPORT_BATCH_SIZE: usize = 4_096;

/// How long a span waits at most before its batch leaves, full or not,
/// unless `OTEL_BSP_SCHEDULE_DELAY` (milliseconds) says otherwise: the
/// specification's default.
pub const DEFAULT_SCHEDULE_DELAY: Duration = Duration::from_secs(5);

/// The queue's bounds, from the `OTEL_BSP_*` variables or the defaults
/// above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanQueueConfig {
    /// Spans waiting for export at most; past it a span is dropped.
    pub max_queue_size: usize,
    /// Spans per export at most.
    pub max_export_batch_size: usize,
    /// The longest a span waits for its batch to leave.
    pub schedule_delay: Duration,
}

impl SpanQueueConfig {
    /// The bounds `env` gives (`OTEL_BSP_MAX_QUEUE_SIZE`,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY`), else
    /// the defaults. A batch is never larger than the queue.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let positive = |name: &str, default: usize| {
            env(name)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        let max_queue_size = positive("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE);
        let max_export_batch_size = positive(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            DEFAULT_MAX_EXPORT_BATCH_SIZE,
        )
        .min(max_queue_size);
        let schedule_delay = Duration::from_millis(
            u64::try_from(positive(
                "OTEL_BSP_SCHEDULE_DELAY",
                DEFAULT_SCHEDULE_DELAY.as_millis() as usize,
            ))
            .unwrap_or(u64::MAX),
        );
        Self {
            max_queue_size,
            max_export_batch_size,
            schedule_delay,
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// What became of the spans the gateway ended: exported, failed (the
/// collector refused or did not answer), dropped (the queue was full). The
/// series of `/metrics` share these counters.
#[derive(Debug, Clone, Default)]
pub struct SpanExportStats {
    family: Family<OutcomeLabels, Counter>,
    queued: Gauge,
}

impl SpanExportStats {
    fn count(&self, outcome: &'static str, spans: usize) {
        self.family
            .get_or_create(&OutcomeLabels { outcome })
            .inc_by(u64::try_from(spans).unwrap_or(u64::MAX));
    }

    fn get(&self, outcome: &'static str) -> u64 {
        self.family.get_or_create(&OutcomeLabels { outcome }).get()
    }

    /// Spans handed to the exporter whose export succeeded.
    pub fn exported(&self) -> u64 {
        self.get("exported")
    }

    /// Spans handed to the exporter whose export failed.
    pub fn failed(&self) -> u64 {
        self.get("failed")
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.get("dropped")
    }

    /// Registers the series: `idgate_trace_spans_total{outcome}` and
    /// `idgate_trace_queue_spans`, every outcome present from zero.
    pub(super) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        for outcome in ["exported", "failed", "dropped"] {
            self.count(outcome, 0);
        }
        registry.register(
            "idgate_trace_spans",
            "Spans the gateway ended, by outcome: exported, failed (the collector refused or did not answer) or dropped (the export queue was full)",
            self.family.clone(),
        );
        registry.register(
            "idgate_trace_queue_spans",
            "Spans waiting in the export queue",
            self.queued.clone(),
        );
    }
}

mod export;
mod pending;

pub use export::{EncodedBatch, SpanQueue};

#[cfg(test)]
mod tests;
