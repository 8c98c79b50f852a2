//! The Prometheus registry of the gateway and `GET /metrics`.
//!
//! Label values come only from fixed sets: RPC names of the served API (an
//! unknown path is `_OTHER`), gRPC code names, [`Operation`] names, channel
//! names from the configuration, HTTP status codes and the error classes of
//! the REST client (`connect`, `timeout`, ...), and configured caller names
//! (`callers`: the caller table bounds them). Nothing a caller or an end
//! user types ever becomes a label, so neither personal data nor unbounded
//! cardinality can.

use std::{borrow::Cow, fmt, hash::Hash, sync::Arc, time::Duration};

use axum::{
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use opentelemetry::KeyValue;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

use crate::domain::Operation;

/// Seconds spent polling instead of sleeping, counted by the serving
/// threads (`idgate_serving_idle_poll_seconds_total`).
pub type IdlePollSeconds = Counter<f64, std::sync::atomic::AtomicU64>;

/// Content type of the OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Channel label of upstream calls that go to the core service rather than
/// to a 3D vendor channel.
pub const CORE_CHANNEL: &str = "core";

/// Latency buckets in seconds: from a cached local call to the 10 s default
/// upstream timeout, and a long tail for streams and slow vendors.
const LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

// Labels recorded on every call hold `&'static str` or a shared
// [`ChannelLabel`] only: building them allocates nothing. Method names are
// the served API's (`grpc::method_of`), channel names are interned once per
// registry ([`Metrics::channel_label`]).

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    method: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

/// The name of a gRPC code as the `code` label shows it (`OK`,
/// `INVALID_ARGUMENT`, ...): the names of `google.rpc.Code`.
pub fn grpc_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Counts one call and its duration in the series of `labels`, asking the
/// families only the first time the label set is seen ([`Handles`]).
fn record_call<L: Clone + Hash + Eq>(
    handles: &Handles<L, (Counter, Histogram)>,
    (requests, duration): (&Family<L, Counter>, &HistogramFamily<L>),
    labels: &L,
    elapsed: Duration,
) {
    let (count, histogram) = handles.get(labels, |labels| {
        (
            requests.get_or_create(labels).clone(),
            duration.get_or_create(labels).clone(),
        )
    });
    count.inc();
    histogram.observe(elapsed.as_secs_f64());
}

struct Inner {
    registry: Registry,
    rpc_requests: Family<RpcLabels, Counter>,
    rpc_duration: HistogramFamily<RpcLabels>,
    rpc_in_flight: Family<MethodLabels, Gauge>,
    upstream_requests: Family<UpstreamLabels, Counter>,
    upstream_duration: HistogramFamily<UpstreamLabels>,
    /// The series of the families above, by label set ([`Handles`]).
    rpc_handles: Handles<RpcLabels, (Counter, Histogram)>,
    in_flight_handles: Handles<MethodLabels, Gauge>,
    upstream_handles: Handles<UpstreamLabels, (Counter, Histogram)>,
    webhooks: Family<OutcomeLabels, Counter>,
    http_in_flight: Gauge,
    upstream_rejected: Family<RejectedLabels, Counter>,
    rpc_shed: Family<LimitLabels, Counter>,
    http_shed: Counter,
    connections_open: Family<ListenerLabels, Gauge>,
    connections_rejected: Family<ListenerLabels, Counter>,
    connections_aged: Family<ListenerLabels, Counter>,
    draining: Gauge,
    idle_poll: IdlePollSeconds,
    cluster: ClusterSeries,
    spend: SpendSeries,
    rollout: RolloutSeries,
    auth: AuthSeries,
    /// The series by configured caller, and each caller's resolved once.
    callers: CallerSeries,
    caller_meters: CallerMeters,
    tls: TlsSeries,
    config: ConfigSeries,
    watch_journeys: Gauge,
    watch_watchers: Gauge,
    watch_result_reads: Counter,
    watch_notice_timeouts: Counter,
    watch_fleet_results: Counter,
    audit_write_failures: Counter,
    audit_export: Family<OutcomeLabels, Counter>,
    plaintext_hops: Family<plaintext_hops::HopLabels, Gauge>,
    otel: OtelRed,
    channels: ChannelSeries,
    /// Channel label values, by name.
    labels: LabelInterner,
    /// The label of the core service ([`CORE_CHANNEL`]).
    core_label: ChannelLabel,
}

/// The journey watches' state at scrape time (see [`Metrics::sync_watch`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchCounts {
    /// Journeys with at least one `WatchJourney` stream.
    pub journeys: usize,
    /// `WatchJourney` streams open.
    pub watchers: usize,
    /// Result reads started since start.
    pub result_reads: u64,
    /// Watches that found no completion notice within the grace period and
    /// fell back to polling, since start.
    pub notice_timeouts: u64,
    /// Final results read here because another replica announced them,
    /// since start.
    pub fleet_results: u64,
}

/// The gateway's metrics. Cloning is cheap and every clone updates the same
/// series.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(std::iter::empty::<&str>())
    }
}

impl Metrics {
    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.inner.registry)?;
        Ok(out)
    }

    /// Counts one RPC as in flight until the guard drops. `method` must be
    /// a known method name or `_OTHER` (see [`super::grpc`]).
    pub fn rpc_in_flight(&self, method: &'static str) -> InFlight {
        let inner = &self.inner;
        let gauge = inner
            .in_flight_handles
            .get(&MethodLabels { method }, |labels| {
                inner.rpc_in_flight.get_or_create(labels).clone()
            });
        InFlight::start(gauge)
    }

    /// Records one finished RPC.
    pub fn record_rpc(&self, method: &'static str, code: tonic::Code, elapsed: Duration) {
        let labels = RpcLabels {
            method,
            code: grpc_code_name(code),
        };
        let inner = &self.inner;
        record_call(
            &inner.rpc_handles,
            (&inner.rpc_requests, &inner.rpc_duration),
            &labels,
            elapsed,
        );
        let attributes = [
            KeyValue::new("method", labels.method),
            KeyValue::new("code", labels.code),
        ];
        self.inner.otel.rpc_requests.add(1, &attributes);
        self.inner
            .otel
            .rpc_duration
            .record(elapsed.as_secs_f64(), &attributes);
    }

    /// Sets the watch gauges and brings the watch counters up to `counts`,
    /// kept by the journey watches, at scrape time.
    pub fn sync_watch(&self, counts: WatchCounts) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.watch_journeys.set(gauge(counts.journeys));
        self.inner.watch_watchers.set(gauge(counts.watchers));
        catch_up(&self.inner.watch_result_reads, counts.result_reads);
        catch_up(&self.inner.watch_notice_timeouts, counts.notice_timeouts);
        catch_up(&self.inner.watch_fleet_results, counts.fleet_results);
    }

    /// Brings the count of audit records that could not be written up to
    /// `total` (`telemetry::log_lines::audit_write_failures`), at scrape
    /// time.
    pub fn sync_audit_write_failures(&self, total: u64) {
        catch_up(&self.inner.audit_write_failures, total);
    }

    /// Brings the audit export's count of `outcome` up to `total`
    /// (`telemetry::audit_export::totals`), at scrape time; nothing is
    /// shown while no record was ever handed to the export.
    pub fn sync_audit_export(&self, outcome: &'static str, total: u64) {
        if total > 0 {
            let counter = self
                .inner
                .audit_export
                .get_or_create(&OutcomeLabels { outcome });
            catch_up(&counter, total);
        }
    }

    /// Brings the webhook counter of `outcome` up to `total`, the count
    /// kept by the receiver, at scrape time. `outcome` comes from a fixed
    /// set (`received`, `accepted`, `duplicate`, `rejected_<reason>`).
    pub fn sync_webhooks(&self, outcome: &'static str, total: u64) {
        let counter = self
            .inner
            .webhooks
            .get_or_create(&OutcomeLabels { outcome });
        catch_up(&counter, total);
    }

    /// Counts a call shed at admission, by the limit reached.
    pub fn record_rpc_shed(&self, limit: &'static str) {
        self.inner
            .rpc_shed
            .get_or_create(&LimitLabels { limit })
            .inc();
    }

    /// Counts a request the HTTP listener answered 503 at once because
    /// `http_max_in_flight` requests were in flight.
    pub fn record_http_shed(&self) {
        self.inner.http_shed.inc();
    }

    /// Counts one open connection of `listener` until the guard drops.
    pub fn connection_open(&self, listener: &'static str) -> InFlight {
        InFlight::start(
            self.inner
                .connections_open
                .get_or_create(&ListenerLabels { listener })
                .clone(),
        )
    }

    /// Counts a connection refused by `listener`'s cap.
    pub fn record_connection_rejected(&self, listener: &'static str) {
        self.inner
            .connections_rejected
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    /// Counts a connection of `listener` told to go away at its maximum
    /// age (`serving.max_connection_age_secs`).
    pub fn record_connection_aged(&self, listener: &'static str) {
        self.inner
            .connections_aged
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    /// The counter of the time serving threads spend polling instead of
    /// sleeping, for them to add to.
    pub fn idle_poll_seconds(&self) -> IdlePollSeconds {
        self.inner.idle_poll.clone()
    }

    /// Sets the draining gauge.
    pub fn set_draining(&self, draining: bool) {
        self.inner.draining.set(i64::from(draining));
    }

    /// Sets `idgate_cluster_up`.
    pub fn set_cluster_up(&self, up: bool) {
        self.inner.cluster.up.set(i64::from(up));
    }

    /// Records one call to the fleet's shared state. `command` is a Redis
    /// command name (a fixed set), `outcome` one of `ok`, `timeout`,
    /// `unavailable`, `error`.
    pub fn record_cluster_op(
        &self,
        command: &'static str,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        let c = &self.inner.cluster;
        c.operations
            .get_or_create(&ClusterOpLabels { command, outcome })
            .inc();
        c.duration
            .get_or_create(&CommandLabels { command })
            .observe(elapsed.as_secs_f64());
    }

    /// Records how late one fleet event was read (`idgate_cluster_event_lag`).
    pub fn record_cluster_lag(&self, lag: Duration) {
        self.inner.cluster.lag.observe(lag.as_secs_f64());
    }

    /// Counts one HTTP request of the gateway's listener as in flight until
    /// the guard drops.
    pub fn http_in_flight(&self) -> InFlight {
        InFlight::start(self.inner.http_in_flight.clone())
    }
}

/// Decrements an in-flight gauge when dropped, however the request ends
/// (completed, failed, or its future dropped by a disconnecting client).
#[derive(Debug)]
pub struct InFlight(Gauge);

impl InFlight {
    fn start(gauge: Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Raises a monotonic counter to `total` (never lowers it).
fn catch_up(counter: &Counter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

/// `GET /metrics`: the registry in the OpenMetrics text format. Works in
/// any router whose state yields a [`Metrics`] (`FromRef`).
pub async fn metrics_handler(State(metrics): State<Metrics>) -> Response {
    match metrics.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A router serving only `GET /metrics`, to merge into a listener's router.
pub fn metrics_router<S>(metrics: Metrics) -> axum::Router<S> {
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics_handler))
        .with_state(metrics)
}

mod auth;
mod callers;
mod channel;
mod cluster;
mod config;
#[cfg(test)]
#[allow(dead_code)] // Shared with tests/it, which uses the rest.
pub(crate) mod exposition;
mod handles;
mod labels;
mod otel;
mod plaintext_hops;
mod registry;
mod rollout;
mod spend;
#[cfg(test)]
mod tests;
mod tls;
mod upstream;

pub use auth::ADMIN_REFUSAL_CAUSES;
use auth::AuthSeries;
pub use callers::{BudgetGauges, CallerMeter};
use callers::{CallerMeters, CallerSeries};
use channel::ChannelSeries;
pub use channel::ChannelSessionEnd;
use cluster::{ClusterOpLabels, ClusterSeries, CommandLabels};
use config::ConfigSeries;
use handles::Handles;
use labels::LabelInterner;
pub use labels::{ChannelLabel, http_status_label};
pub use plaintext_hops::PLAINTEXT_HOP_KINDS;
use rollout::RolloutSeries;
use spend::SpendSeries;
use tls::TlsSeries;

use otel::OtelRed;
use upstream::{RejectedLabels, UpstreamLabels};
pub use upstream::{UpstreamEnd, UpstreamOutcome};

impl Metrics {
    /// `name` (a channel's configured name) as a label value: the one this
    /// registry keeps, made the first time; allocates nothing after.
    pub fn channel_label(&self, name: &str) -> ChannelLabel {
        self.inner.labels.channel(name)
    }
}
