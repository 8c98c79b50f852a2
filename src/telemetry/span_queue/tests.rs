use std::sync::{Arc, Condvar, Mutex};

use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_sdk::trace::SdkTracerProvider;
use prost::Message as _;

use super::*;
use crate::telemetry::otlp::transport::{Accepted, ExportFailure, Transport};

/// A transport that holds every export until the test opens its gate,
/// then accepts (rejecting `reject` spans of each) or fails as told, and
/// keeps how many spans each request carried.
#[derive(Debug, Clone)]
struct Gated {
    gate: Arc<(Mutex<bool>, Condvar)>,
    fail: bool,
    reject: u64,
    sent: Arc<Mutex<Vec<usize>>>,
}

impl Gated {
    fn new(fail: bool) -> Self {
        Self {
            gate: Arc::new((Mutex::new(false), Condvar::new())),
            fail,
            reject: 0,
            sent: Arc::default(),
        }
    }

    fn open(&self) {
        let (open, changed) = &*self.gate;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }
}

impl Transport for Gated {
    async fn send(&mut self, request: Vec<u8>) -> Result<Accepted, ExportFailure> {
        let decoded = ExportTraceServiceRequest::decode(request.as_slice()).expect("valid OTLP");
        let spans = decoded.resource_spans[0].scope_spans[0].spans.len();
        self.sent.lock().unwrap().push(spans);
        let (open, changed) = &*self.gate;
        let mut is_open = open.lock().unwrap();
        while !*is_open {
            is_open = changed.wait(is_open).unwrap();
        }
        if self.fail {
            Err(ExportFailure::Http {
                status: 400,
                retry_after: None,
            })
        } else {
            Ok(Accepted {
                rejected: self.reject,
            })
        }
    }
}

fn provider(exporter: Gated, max_queue_size: usize, stats: &SpanExportStats) -> SdkTracerProvider {
    let config = SpanQueueConfig {
        max_queue_size,
        max_export_batch_size: 4,
        schedule_delay: DEFAULT_SCHEDULE_DELAY,
    };
    SdkTracerProvider::builder()
        .with_span_processor(EncodedBatch::new(exporter, config, stats.clone()).unwrap())
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
fn a_full_batch_leaves_at_once_and_the_rest_at_shutdown() {
    let stats = SpanExportStats::default();
    let exporter = Gated::new(false);
    exporter.open();
    let provider = provider(exporter.clone(), 64, &stats);
    end_spans(&provider, 10);
    provider.shutdown().unwrap();

    assert_eq!(*exporter.sent.lock().unwrap(), [4, 4, 2]);
    assert_eq!(stats.exported(), 10);
}

#[test]
fn spans_a_collector_rejects_are_counted_failed() {
    let stats = SpanExportStats::default();
    let mut exporter = Gated::new(false);
    exporter.reject = 1;
    exporter.open();
    let provider = provider(exporter, 64, &stats);
    end_spans(&provider, 8);
    provider.shutdown().unwrap();

    assert_eq!((stats.exported(), stats.failed()), (6, 2));
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
            schedule_delay: DEFAULT_SCHEDULE_DELAY,
        }
    );
    let set = |name: &str| match name {
        "OTEL_BSP_MAX_QUEUE_SIZE" => Some("1000".to_owned()),
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("5000".to_owned()),
        "OTEL_BSP_SCHEDULE_DELAY" => Some("250".to_owned()),
        _ => None,
    };
    assert_eq!(
        SpanQueueConfig::from_env(&set),
        SpanQueueConfig {
            max_queue_size: 1000,
            max_export_batch_size: 1000,
            schedule_delay: Duration::from_millis(250),
        },
        "a batch never exceeds the queue"
    );
    let junk = |name: &str| (name == "OTEL_BSP_MAX_QUEUE_SIZE").then(|| "0".to_owned());
    assert_eq!(
        SpanQueueConfig::from_env(&junk).max_queue_size,
        DEFAULT_MAX_QUEUE_SIZE
    );
}
