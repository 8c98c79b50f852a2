use std::sync::{Condvar, Mutex};

use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
use opentelemetry_sdk::{error::OTelSdkError, trace::SdkTracerProvider};

use super::*;

/// An exporter that holds every export until the test opens its gate, and
/// then succeeds or fails as told.
#[derive(Debug, Clone)]
struct Gated {
    gate: Arc<(Mutex<bool>, Condvar)>,
    fail: bool,
}

impl Gated {
    fn new(fail: bool) -> Self {
        Self {
            gate: Arc::new((Mutex::new(false), Condvar::new())),
            fail,
        }
    }

    fn open(&self) {
        let (open, changed) = &*self.gate;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }
}

impl SpanExporter for Gated {
    async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
        let (open, changed) = &*self.gate;
        let mut is_open = open.lock().unwrap();
        while !*is_open {
            is_open = changed.wait(is_open).unwrap();
        }
        if self.fail {
            Err(OTelSdkError::InternalFailure("refused".into()))
        } else {
            Ok(())
        }
    }
}

fn provider(exporter: Gated, max_queue_size: usize, stats: &SpanExportStats) -> SdkTracerProvider {
    let config = SpanQueueConfig {
        max_queue_size,
        max_export_batch_size: 4,
    };
    SdkTracerProvider::builder()
        .with_span_processor(CountedBatch::new(exporter, config, stats.clone()))
        .build()
}

fn end_spans(provider: &SdkTracerProvider, n: usize) {
    let tracer = provider.tracer("test");
    for _ in 0..n {
        tracer.start("span").end();
    }
}

#[test]
fn past_the_queue_bound_spans_are_dropped_and_counted_and_every_span_is_accounted_for() {
    let stats = SpanExportStats::default();
    let exporter = Gated::new(false);
    let provider = provider(exporter.clone(), 8, &stats);
    // The first export holds its batch until the gate opens: the rest wait
    // in the queue, and past 8 of them are dropped.
    end_spans(&provider, 40);
    exporter.open();
    provider.shutdown().unwrap();

    assert!(stats.dropped() >= 40 - 8 - 4, "dropped {}", stats.dropped());
    assert_eq!(stats.exported() + stats.dropped(), 40);
    assert_eq!(stats.failed(), 0);
    assert_eq!(stats.queued.get(), 0, "nothing left waiting");
}

#[test]
fn within_the_queue_bound_every_span_is_exported() {
    let stats = SpanExportStats::default();
    let exporter = Gated::new(false);
    let provider = provider(exporter.clone(), 64, &stats);
    end_spans(&provider, 40);
    exporter.open();
    provider.shutdown().unwrap();

    assert_eq!(
        (stats.exported(), stats.dropped(), stats.failed()),
        (40, 0, 0)
    );
}

#[test]
fn spans_of_a_refused_export_are_counted_failed() {
    let stats = SpanExportStats::default();
    let exporter = Gated::new(true);
    exporter.open();
    let provider = provider(exporter, 64, &stats);
    end_spans(&provider, 10);
    let _ = provider.shutdown();

    assert_eq!(
        (stats.exported(), stats.dropped(), stats.failed()),
        (0, 0, 10)
    );
}

#[test]
fn the_queue_bounds_come_from_the_standard_variables_or_the_defaults() {
    let none = |_: &str| None;
    assert_eq!(
        SpanQueueConfig::from_env(&none),
        SpanQueueConfig {
            max_queue_size: DEFAULT_MAX_QUEUE_SIZE,
            max_export_batch_size: DEFAULT_MAX_EXPORT_BATCH_SIZE,
        }
    );
    let set = |name: &str| match name {
        "OTEL_BSP_MAX_QUEUE_SIZE" => Some("1000".to_owned()),
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("5000".to_owned()),
        _ => None,
    };
    assert_eq!(
        SpanQueueConfig::from_env(&set),
        SpanQueueConfig {
            max_queue_size: 1000,
            max_export_batch_size: 1000,
        },
        "a batch never exceeds the queue"
    );
    let junk = |name: &str| (name == "OTEL_BSP_MAX_QUEUE_SIZE").then(|| "0".to_owned());
    assert_eq!(
        SpanQueueConfig::from_env(&junk).max_queue_size,
        DEFAULT_MAX_QUEUE_SIZE
    );
}
