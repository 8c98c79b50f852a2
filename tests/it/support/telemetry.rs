//! Telemetry for one test: an in-process OTLP collector, logs captured in
//! memory, and a subscriber installed for the test's own thread.
//!
//! Tests that observe telemetry run on the current-thread runtime of
//! `#[tokio::test]`: every task their servers spawn runs on that thread and
//! reports to that test's subscriber, never to another test's.
//!
//! One hazard remains when such tests share a process with tests that
//! install no subscriber: `tracing` caches per callsite whether anyone is
//! interested, and while at most one dispatcher is registered it asks the
//! *current thread's* one. A thread without a subscriber that reached a
//! span's callsite first would cache "never" and switch that span off for
//! the observing test. [`Traced::start`] therefore first installs, once per
//! process, a global dispatcher that enables nothing but answers
//! "sometimes" for every callsite: from then on every callsite's interest
//! is "ask the current thread's subscriber on each use", whoever reached it
//! first, and tests without a subscriber still record nothing.

use std::{sync::Once, time::Duration};

use idgate::{
    config::TelemetryConfig,
    telemetry::{CapturedLogs, LogFormat, OtelEnv, Telemetry, TelemetryBuilder},
};
use tracing::{
    Dispatch, Metadata,
    dispatcher::DefaultGuard,
    span::{Attributes, Id, Record},
    subscriber::Interest,
};

use super::otlp_collector::{CollectedSpan, Collector};

/// Longest a test waits for spans to arrive.
pub const SPAN_WAIT: Duration = Duration::from_secs(20);

/// The global dispatcher of the test process: enables nothing, and makes
/// every callsite's interest "sometimes" (see the module documentation).
struct AskEveryTime;

impl tracing::Subscriber for AskEveryTime {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &tracing::Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Installs [`AskEveryTime`] as the process's global dispatcher, once. Its
/// registration rebuilds the interest of every callsite already reached.
pub fn keep_callsites_asking() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::dispatcher::set_global_default(Dispatch::new(AskEveryTime))
            .expect("no other global subscriber in the test process");
    });
}

/// A test's telemetry: its collector, its telemetry and its log buffer,
/// installed for the current thread until dropped.
pub struct Traced {
    /// Where spans are exported.
    pub collector: Collector,
    /// The subscriber and its span export.
    pub telemetry: Telemetry,
    /// Every log line, at `log_filter`, as JSON.
    pub logs: CapturedLogs,
    _default: DefaultGuard,
}

impl Traced {
    /// Starts a collector and installs, for this thread, telemetry named
    /// `service_name` that exports to it and logs at `log_filter` as JSON.
    pub async fn start(service_name: &str, log_filter: &str) -> Self {
        keep_callsites_asking();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let collector = Collector::start().await;
        let logs = CapturedLogs::new();
        let telemetry = TelemetryBuilder::new(&TelemetryConfig {
            service_name: service_name.into(),
            ..telemetry_config()
        })
        .otlp_endpoint(collector.endpoint())
        .log_format(LogFormat::Json)
        .log_filter(log_filter)
        .log_writer(logs.clone())
        .build()
        .expect("telemetry");
        let default = telemetry.set_default();
        Traced {
            collector,
            telemetry,
            logs,
            _default: default,
        }
    }

    /// Flushes until `done` holds for the spans received (at most
    /// [`SPAN_WAIT`]); returns every span received.
    pub async fn spans_until(&self, done: impl Fn(&[CollectedSpan]) -> bool) -> Vec<CollectedSpan> {
        collected_until(&self.telemetry, &self.collector, done).await
    }

    /// Exports what is left and stops the exporter.
    pub async fn finish(self) {
        let Traced { telemetry, .. } = self;
        telemetry.shutdown().await.expect("shutdown");
    }
}

/// `[telemetry]` as the defaults, with no `OTEL_*` variable: the test
/// process's environment (a developer's shell exporting
/// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_SERVICE_NAME`) is never read by a
/// test's telemetry or in-process gateway.
pub fn telemetry_config() -> TelemetryConfig {
    TelemetryConfig {
        otel_env: OtelEnv::none(),
        ..TelemetryConfig::default()
    }
}

/// Logs of one test at WARN, kept in memory as JSON, with no span export:
/// installed for the test's thread before anything starts.
pub fn quiet_telemetry() -> (CapturedLogs, DefaultGuard) {
    quiet_telemetry_at("warn")
}

/// [`quiet_telemetry`] with log filter `directives`.
pub fn quiet_telemetry_at(directives: &str) -> (CapturedLogs, DefaultGuard) {
    keep_callsites_asking();
    let logs = CapturedLogs::new();
    let telemetry = TelemetryBuilder::new(&telemetry_config())
        .without_export()
        .log_format(LogFormat::Json)
        .log_filter(directives)
        .log_writer(logs.clone())
        .build()
        .expect("telemetry");
    (logs, telemetry.set_default())
}

/// Telemetry exporting spans to `collector` (OTLP/gRPC), JSON logs at INFO
/// into memory, installed for the test's thread.
pub fn exported_telemetry(collector: &Collector) -> (Telemetry, CapturedLogs, DefaultGuard) {
    exported_telemetry_with(
        TelemetryBuilder::new(&telemetry_config()).otlp_endpoint(collector.endpoint()),
    )
}

/// `builder` (its export already set up) with JSON logs at INFO into
/// memory, installed for the test's thread.
pub fn exported_telemetry_with(
    builder: TelemetryBuilder,
) -> (Telemetry, CapturedLogs, DefaultGuard) {
    keep_callsites_asking();
    let logs = CapturedLogs::new();
    let telemetry = builder
        .log_format(LogFormat::Json)
        .log_filter("info")
        .log_writer(logs.clone())
        .build()
        .expect("telemetry");
    let guard = telemetry.set_default();
    (telemetry, logs, guard)
}

/// Flushes `telemetry` until `done` holds for the spans `collector`
/// received (at most [`SPAN_WAIT`]); returns every span received.
pub async fn collected_until(
    telemetry: &Telemetry,
    collector: &Collector,
    done: impl Fn(&[CollectedSpan]) -> bool,
) -> Vec<CollectedSpan> {
    let exporters = telemetry.exporters();
    collector
        .wait_until(
            SPAN_WAIT,
            || async {
                exporters.force_flush().await.expect("flush");
            },
            done,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}
