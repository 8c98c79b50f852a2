//! The span export queue: bounded, sized for the gateway's rate, and
//! counted.
//!
//! The SDK's batch processor keeps ended spans in a queue that a thread of
//! its own drains to the exporter; when the queue is full it drops the
//! span, logs the first drop once and counts the rest only for a line at
//! shutdown. An observability team cannot see from that whether its traces
//! are whole. [`CountedBatch`] wraps the processor and its exporter:
//! - it counts the spans waiting, and drops a span itself (counted) when
//!   [`SpanQueueConfig::max_queue_size`] wait already, so the processor's
//!   own queue, as large, never drops one unseen;
//! - it counts every span handed to the exporter as `exported` or
//!   `failed`, by the export's outcome.
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
//! `OTEL_BSP_MAX_QUEUE_SIZE` and
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` still win.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use opentelemetry::Context;
use opentelemetry_sdk::{
    Resource,
    error::OTelSdkResult,
    trace::{BatchConfigBuilder, BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor},
};
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

/// The queue's bounds, from the `OTEL_BSP_*` variables or the defaults
/// above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanQueueConfig {
    /// Spans waiting for export at most; past it a span is dropped.
    pub max_queue_size: usize,
    /// Spans per export at most.
    pub max_export_batch_size: usize,
}

impl SpanQueueConfig {
    /// The bounds `env` gives (`OTEL_BSP_MAX_QUEUE_SIZE`,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`), else the defaults. A batch is
    /// never larger than the queue.
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
        Self {
            max_queue_size,
            max_export_batch_size,
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

/// Spans waiting: counted up as they enter the processor, down as the
/// exporter takes them.
#[derive(Debug, Default)]
struct Waiting(AtomicUsize);

/// The batch processor behind a counted bound. See the module's doc.
#[derive(Debug)]
pub struct CountedBatch {
    inner: BatchSpanProcessor,
    waiting: Arc<Waiting>,
    max_queue_size: usize,
    stats: SpanExportStats,
}

impl CountedBatch {
    /// A batch processor exporting through `exporter` within `config`,
    /// counting into `stats`. The other `OTEL_BSP_*` variables (schedule
    /// delay, export timeout) apply as the SDK reads them.
    pub fn new<E>(exporter: E, config: SpanQueueConfig, stats: SpanExportStats) -> Self
    where
        E: SpanExporter + 'static,
    {
        let waiting = Arc::new(Waiting::default());
        let exporter = CountedExporter {
            inner: exporter,
            waiting: waiting.clone(),
            stats: stats.clone(),
        };
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(config.max_queue_size)
            .with_max_export_batch_size(config.max_export_batch_size)
            .build();
        Self {
            inner: BatchSpanProcessor::new(exporter, batch),
            waiting,
            max_queue_size: config.max_queue_size,
            stats,
        }
    }
}

impl SpanProcessor for CountedBatch {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let before = self.waiting.0.fetch_add(1, Ordering::AcqRel);
        if before >= self.max_queue_size {
            self.waiting.0.fetch_sub(1, Ordering::AcqRel);
            self.stats.count("dropped", 1);
            return;
        }
        self.stats.queued.inc();
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter behind [`CountedBatch`]: counts each batch it is handed.
#[derive(Debug)]
struct CountedExporter<E> {
    inner: E,
    waiting: Arc<Waiting>,
    stats: SpanExportStats,
}

impl<E: SpanExporter> SpanExporter for CountedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        self.waiting.0.fetch_sub(spans, Ordering::AcqRel);
        self.stats
            .queued
            .dec_by(i64::try_from(spans).unwrap_or(i64::MAX));
        let result = self.inner.export(batch).await;
        let outcome = if result.is_ok() { "exported" } else { "failed" };
        self.stats.count(outcome, spans);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests;
