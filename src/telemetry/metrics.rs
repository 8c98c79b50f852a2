//! The Prometheus registry of the gateway and `GET /metrics`.
//!
//! Label values come only from fixed sets: RPC names of the served API (an
//! unknown path is `_OTHER`), gRPC code names, [`Operation`] names, channel
//! names from the configuration, HTTP status codes and the error classes of
//! the REST client (`connect`, `timeout`, ...). Nothing a caller or an end user types ever
//! becomes a label, so neither personal data nor unbounded cardinality can.

use std::{borrow::Cow, fmt, sync::Arc, time::Duration};

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    method: String,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    operation: &'static str,
    channel: String,
    status: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChannelLabels {
    channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectedLabels {
    operation: &'static str,
    channel: String,
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

struct Inner {
    registry: Registry,
    rpc_requests: Family<RpcLabels, Counter>,
    rpc_duration: HistogramFamily<RpcLabels>,
    rpc_in_flight: Family<MethodLabels, Gauge>,
    upstream_requests: Family<UpstreamLabels, Counter>,
    upstream_duration: HistogramFamily<UpstreamLabels>,
    channel_failovers: Family<ChannelLabels, Counter>,
    channel_circuit_state: Family<ChannelLabels, Gauge>,
    webhooks: Family<OutcomeLabels, Counter>,
    http_in_flight: Gauge,
    upstream_rejected: Family<RejectedLabels, Counter>,
    rpc_shed: Family<LimitLabels, Counter>,
    connections_open: Family<ListenerLabels, Gauge>,
    connections_rejected: Family<ListenerLabels, Counter>,
    draining: Gauge,
    cluster: ClusterSeries,
    channel_sessions: Family<ChannelLabels, Counter>,
    channel_session_failures: Family<ChannelLabels, Counter>,
    channel_contingency_answers: Family<ChannelLabels, Counter>,
    watch_journeys: Gauge,
    watch_watchers: Gauge,
    watch_result_reads: Counter,
    watch_notice_timeouts: Counter,
    otel: OtelRed,
}

/// The journey hub's state at scrape time (see [`Metrics::sync_watch`]).
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
}

/// A channel's session counters at scrape time (see
/// [`Metrics::sync_channel_sessions`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChannelSessionCounts {
    /// Sessions started on the channel.
    pub started: u64,
    /// Session starts that failed on the channel.
    pub failed: u64,
    /// Session answers with `isContingency: true`.
    pub contingency: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterOpLabels {
    command: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabels {
    command: &'static str,
}

/// Buckets for calls to the fleet's shared state: loopback Redis answers
/// in tens of microseconds; the default command timeout is 250 ms.
const CLUSTER_BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

fn cluster_histogram() -> Histogram {
    Histogram::new(CLUSTER_BUCKETS)
}

/// The series of the fleet's shared state (`[cluster]`).
struct ClusterSeries {
    up: Gauge,
    operations: Family<ClusterOpLabels, Counter>,
    duration: HistogramFamily<CommandLabels>,
    lag: Histogram,
}

impl ClusterSeries {
    fn register(registry: &mut Registry) -> Self {
        let series = Self {
            up: Gauge::default(),
            operations: Family::default(),
            duration: HistogramFamily::<CommandLabels>::new_with_constructor(cluster_histogram),
            lag: cluster_histogram(),
        };
        // A single process's shared state is its memory: always up.
        series.up.set(1);
        registry.register(
            "idgate_cluster_up",
            "1 while the fleet's shared state (Redis) answers, 0 while it does not; always 1 without [cluster]",
            series.up.clone(),
        );
        registry.register(
            "idgate_cluster_operations",
            "Calls to the fleet's shared state, by Redis command and outcome (ok, timeout, unavailable, error)",
            series.operations.clone(),
        );
        registry.register_with_unit(
            "idgate_cluster_operation_duration",
            "Latency of calls to the fleet's shared state, by Redis command",
            Unit::Seconds,
            series.duration.clone(),
        );
        registry.register_with_unit(
            "idgate_cluster_pubsub_lag",
            "Time from a replica publishing a fleet message to this replica receiving it",
            Unit::Seconds,
            series.lag.clone(),
        );
        series
    }
}

/// The RED series again as OpenTelemetry instruments, for OTLP metrics
/// export (`OTEL_METRICS_EXPORTER=otlp`). They come from the global meter
/// provider when the metrics are created: without one installed they are
/// no-ops.
struct OtelRed {
    rpc_requests: opentelemetry::metrics::Counter<u64>,
    rpc_duration: opentelemetry::metrics::Histogram<f64>,
    upstream_requests: opentelemetry::metrics::Counter<u64>,
    upstream_duration: opentelemetry::metrics::Histogram<f64>,
}

impl OtelRed {
    fn new() -> Self {
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
    /// A registry with every series family registered, and the channel
    /// series of `channels` (their names from the configuration) present at
    /// zero / closed, so dashboards see a channel before its first failure.
    pub fn new<I, S>(channels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut registry = Registry::default();
        let rpc_requests = Family::<RpcLabels, Counter>::default();
        let rpc_duration = HistogramFamily::<RpcLabels>::new_with_constructor(latency_histogram);
        let rpc_in_flight = Family::<MethodLabels, Gauge>::default();
        let upstream_requests = Family::<UpstreamLabels, Counter>::default();
        let upstream_duration =
            HistogramFamily::<UpstreamLabels>::new_with_constructor(latency_histogram);
        let channel_failovers = Family::<ChannelLabels, Counter>::default();
        let channel_circuit_state = Family::<ChannelLabels, Gauge>::default();
        let webhooks = Family::<OutcomeLabels, Counter>::default();
        let http_in_flight = Gauge::default();
        let upstream_rejected = Family::<RejectedLabels, Counter>::default();
        let rpc_shed = Family::<LimitLabels, Counter>::default();
        let connections_open = Family::<ListenerLabels, Gauge>::default();
        let connections_rejected = Family::<ListenerLabels, Counter>::default();
        let draining = Gauge::default();
        let channel_sessions = Family::<ChannelLabels, Counter>::default();
        let channel_session_failures = Family::<ChannelLabels, Counter>::default();
        let channel_contingency_answers = Family::<ChannelLabels, Counter>::default();
        let watch_journeys = Gauge::default();
        let watch_watchers = Gauge::default();
        let watch_result_reads = Counter::default();
        let watch_notice_timeouts = Counter::default();
        let cluster = ClusterSeries::register(&mut registry);

        registry.register(
            "idgate_rpc_requests",
            "gRPC requests served, by method and gRPC code",
            rpc_requests.clone(),
        );
        registry.register_with_unit(
            "idgate_rpc_duration",
            "gRPC request latency until the last response byte, by method and gRPC code",
            Unit::Seconds,
            rpc_duration.clone(),
        );
        registry.register(
            "idgate_rpc_in_flight",
            "gRPC requests being served, by method",
            rpc_in_flight.clone(),
        );
        registry.register(
            "idgate_upstream_requests",
            "Upstream REST calls, by operation, channel and HTTP status or error class",
            upstream_requests.clone(),
        );
        registry.register_with_unit(
            "idgate_upstream_duration",
            "Upstream REST call latency, by operation, channel and HTTP status or error class",
            Unit::Seconds,
            upstream_duration.clone(),
        );
        registry.register(
            "idgate_channel_failovers",
            "3D sessions that failed on a channel and moved to the next one, by the failed channel",
            channel_failovers.clone(),
        );
        registry.register(
            "idgate_channel_circuit_state",
            "Circuit breaker state per channel: 0 closed, 1 half-open, 2 open",
            channel_circuit_state.clone(),
        );
        registry.register(
            "idgate_webhooks",
            "Webhook notices, by outcome",
            webhooks.clone(),
        );
        registry.register(
            "idgate_http_in_flight",
            "HTTP requests being served by the gateway's HTTP listener",
            http_in_flight.clone(),
        );
        registry.register(
            "idgate_upstream_rejected",
            "Upstream calls refused before sending because the upstream's or channel's bulkhead was full",
            upstream_rejected.clone(),
        );
        registry.register(
            "idgate_rpc_shed",
            "gRPC calls answered RESOURCE_EXHAUSTED/OVERLOADED at once, by the limit reached (in_flight, streams)",
            rpc_shed.clone(),
        );
        registry.register(
            "idgate_connections_open",
            "Open connections, by listener (grpc, http, admin)",
            connections_open.clone(),
        );
        registry.register(
            "idgate_connections_rejected",
            "Connections closed at accept because the listener's cap or the process-wide descriptor budget was reached, by listener",
            connections_rejected.clone(),
        );
        registry.register(
            "idgate_draining",
            "1 from the stop signal until exit: health says NOT_SERVING",
            draining.clone(),
        );
        for limit in ["in_flight", "streams"] {
            drop(rpc_shed.get_or_create(&LimitLabels { limit }));
        }
        for listener in ["grpc", "http", "admin"] {
            drop(connections_open.get_or_create(&ListenerLabels { listener }));
            drop(connections_rejected.get_or_create(&ListenerLabels { listener }));
        }
        registry.register(
            "idgate_channel_sessions",
            "3D sessions started, by channel",
            channel_sessions.clone(),
        );
        registry.register(
            "idgate_channel_session_failures",
            "3D session starts that failed, by channel",
            channel_session_failures.clone(),
        );
        registry.register(
            "idgate_channel_contingency_answers",
            "3D session answers in contingency mode (isContingency), by channel",
            channel_contingency_answers.clone(),
        );
        registry.register(
            "idgate_watch_journeys",
            "Journeys with at least one WatchJourney stream",
            watch_journeys.clone(),
        );
        registry.register(
            "idgate_watch_watchers",
            "WatchJourney streams open",
            watch_watchers.clone(),
        );
        registry.register(
            "idgate_watch_result_reads",
            "Journey result reads started by watches (notice or poll)",
            watch_result_reads.clone(),
        );
        registry.register(
            "idgate_watch_notice_timeouts",
            "Watches that got no completion notice within the grace period and fell back to polling",
            watch_notice_timeouts.clone(),
        );

        for channel in channels {
            let labels = ChannelLabels {
                channel: channel.into(),
            };
            drop(channel_failovers.get_or_create(&labels));
            drop(channel_circuit_state.get_or_create(&labels));
            drop(channel_sessions.get_or_create(&labels));
            drop(channel_session_failures.get_or_create(&labels));
            drop(channel_contingency_answers.get_or_create(&labels));
        }

        Metrics {
            inner: Arc::new(Inner {
                registry,
                rpc_requests,
                rpc_duration,
                rpc_in_flight,
                upstream_requests,
                upstream_duration,
                channel_failovers,
                channel_circuit_state,
                webhooks,
                http_in_flight,
                upstream_rejected,
                rpc_shed,
                connections_open,
                connections_rejected,
                draining,
                channel_sessions,
                channel_session_failures,
                channel_contingency_answers,
                watch_journeys,
                watch_watchers,
                watch_result_reads,
                watch_notice_timeouts,
                otel: OtelRed::new(),
                cluster,
            }),
        }
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.inner.registry)?;
        Ok(out)
    }

    /// Counts one RPC as in flight until the guard drops. `method` must be
    /// a known method name or `_OTHER` (see [`super::grpc`]).
    pub fn rpc_in_flight(&self, method: &str) -> InFlight {
        let gauge = self
            .inner
            .rpc_in_flight
            .get_or_create(&MethodLabels {
                method: method.to_owned(),
            })
            .clone();
        InFlight::start(gauge)
    }

    /// Records one finished RPC.
    pub fn record_rpc(&self, method: &str, code: tonic::Code, elapsed: Duration) {
        let labels = RpcLabels {
            method: method.to_owned(),
            code: grpc_code_name(code),
        };
        self.inner.rpc_requests.get_or_create(&labels).inc();
        self.inner
            .rpc_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
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

    /// Records one finished upstream call. `channel` is the 3D channel's
    /// configured name, `None` for the core service ([`CORE_CHANNEL`]);
    /// `status` is the HTTP status code or an error class (see
    /// [`super::UpstreamCall`], which calls this).
    pub fn record_upstream(
        &self,
        operation: Operation,
        channel: Option<&str>,
        status: Cow<'static, str>,
        elapsed: Duration,
    ) {
        let labels = UpstreamLabels {
            operation: operation.as_str(),
            channel: channel.unwrap_or(CORE_CHANNEL).to_owned(),
            status,
        };
        self.inner.upstream_requests.get_or_create(&labels).inc();
        self.inner
            .upstream_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        let attributes = [
            KeyValue::new("operation", labels.operation),
            KeyValue::new("channel", labels.channel),
            KeyValue::new("status", labels.status),
        ];
        self.inner.otel.upstream_requests.add(1, &attributes);
        self.inner
            .otel
            .upstream_duration
            .record(elapsed.as_secs_f64(), &attributes);
    }

    /// Brings the failover counter of `channel` up to `total`, the count
    /// kept by the router (the source of truth), at scrape time.
    pub fn sync_channel_failovers(&self, channel: &str, total: u64) {
        let counter = self.inner.channel_failovers.get_or_create(&ChannelLabels {
            channel: channel.to_owned(),
        });
        catch_up(&counter, total);
    }

    /// Brings the session counters of `channel` up to `counts`, kept by
    /// the router, at scrape time.
    pub fn sync_channel_sessions(&self, channel: &str, counts: ChannelSessionCounts) {
        let labels = ChannelLabels {
            channel: channel.to_owned(),
        };
        catch_up(
            &self.inner.channel_sessions.get_or_create(&labels),
            counts.started,
        );
        catch_up(
            &self.inner.channel_session_failures.get_or_create(&labels),
            counts.failed,
        );
        catch_up(
            &self
                .inner
                .channel_contingency_answers
                .get_or_create(&labels),
            counts.contingency,
        );
    }

    /// Sets the watch gauges and brings the watch counters up to `counts`,
    /// kept by the journey hub, at scrape time.
    pub fn sync_watch(&self, counts: WatchCounts) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.watch_journeys.set(gauge(counts.journeys));
        self.inner.watch_watchers.set(gauge(counts.watchers));
        catch_up(&self.inner.watch_result_reads, counts.result_reads);
        catch_up(&self.inner.watch_notice_timeouts, counts.notice_timeouts);
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

    /// Sets the circuit breaker gauge of `channel`: 0 closed, 1 half-open,
    /// 2 open (higher is worse, for alerts).
    pub fn set_channel_circuit_state(&self, channel: &str, value: i64) {
        self.inner
            .channel_circuit_state
            .get_or_create(&ChannelLabels {
                channel: channel.to_owned(),
            })
            .set(value);
    }

    /// Counts an upstream call refused by a full bulkhead.
    pub fn record_upstream_rejected(&self, operation: Operation, channel: Option<&str>) {
        self.inner
            .upstream_rejected
            .get_or_create(&RejectedLabels {
                operation: operation.as_str(),
                channel: channel.unwrap_or(CORE_CHANNEL).to_owned(),
            })
            .inc();
    }

    /// Counts a call shed at admission; `limit` is `in_flight` or `streams`.
    pub fn record_rpc_shed(&self, limit: &'static str) {
        self.inner
            .rpc_shed
            .get_or_create(&LimitLabels { limit })
            .inc();
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

    /// Records the pub/sub lag of one fleet message.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_channels_are_exposed_before_any_event() {
        let m = Metrics::new(["primary", "alternative"]);
        let text = m.encode().unwrap();
        assert!(
            text.contains(r#"idgate_channel_circuit_state{channel="primary"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"idgate_channel_failovers_total{channel="alternative"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"idgate_channel_contingency_answers_total{channel="primary"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn series_carry_their_labels_and_values() {
        let m = Metrics::default();
        m.record_rpc(
            "idgate.v1.JourneyService/CreateJourney",
            tonic::Code::NotFound,
            Duration::from_millis(20),
        );
        m.record_upstream(
            Operation::Liveness3D,
            Some("alternative"),
            "503".into(),
            Duration::from_millis(7),
        );
        m.sync_channel_failovers("primary", 1);
        m.set_channel_circuit_state("primary", 2);
        m.sync_webhooks("rejected_signature_invalid", 1);
        m.sync_channel_sessions(
            "primary",
            ChannelSessionCounts {
                started: 3,
                failed: 2,
                contingency: 1,
            },
        );
        m.sync_watch(WatchCounts {
            journeys: 2,
            watchers: 5,
            result_reads: 4,
            notice_timeouts: 1,
        });
        let guard = m.http_in_flight();
        let text = m.encode().unwrap();
        drop(guard);
        for line in [
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/CreateJourney",code="NOT_FOUND"} 1"#,
            r#"idgate_rpc_duration_seconds_count{method="idgate.v1.JourneyService/CreateJourney",code="NOT_FOUND"} 1"#,
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="alternative",status="503"} 1"#,
            r#"idgate_channel_failovers_total{channel="primary"} 1"#,
            r#"idgate_channel_circuit_state{channel="primary"} 2"#,
            r#"idgate_webhooks_total{outcome="rejected_signature_invalid"} 1"#,
            "idgate_http_in_flight 1",
            r#"idgate_channel_sessions_total{channel="primary"} 3"#,
            r#"idgate_channel_session_failures_total{channel="primary"} 2"#,
            r#"idgate_channel_contingency_answers_total{channel="primary"} 1"#,
            "idgate_watch_journeys 2",
            "idgate_watch_watchers 5",
            "idgate_watch_result_reads_total 4",
            "idgate_watch_notice_timeouts_total 1",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        assert!(m.encode().unwrap().contains("idgate_http_in_flight 0"));
    }
}
