//! Every series family, registered once with its name and help text.

use super::*;
use crate::telemetry::span_queue::SpanExportStats;

impl Metrics {
    /// A registry with every series family registered, and the channel
    /// series of `channels` (their names from the configuration) present at
    /// zero / closed, so dashboards see a channel before its first failure.
    pub fn new<I, S>(channels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_span_export(channels, None)
    }

    /// [`Metrics::new`], and with span export on the series of `spans`
    /// (`idgate_trace_spans_total`, `idgate_trace_queue_spans`).
    pub fn with_span_export<I, S>(channels: I, spans: Option<&SpanExportStats>) -> Self
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
        let webhooks = Family::<OutcomeLabels, Counter>::default();
        let http_in_flight = Gauge::default();
        let upstream_rejected = Family::<RejectedLabels, Counter>::default();
        let rpc_shed = Family::<LimitLabels, Counter>::default();
        let http_shed = Counter::default();
        let connections_open = Family::<ListenerLabels, Gauge>::default();
        let connections_rejected = Family::<ListenerLabels, Counter>::default();
        let connections_aged = Family::<ListenerLabels, Counter>::default();
        let draining = Gauge::default();
        let idle_poll = IdlePollSeconds::default();
        let watch_journeys = Gauge::default();
        let watch_watchers = Gauge::default();
        let watch_result_reads = Counter::default();
        let watch_notice_timeouts = Counter::default();
        let watch_fleet_results = Counter::default();
        let audit_write_failures = Counter::default();
        let audit_export = Family::<OutcomeLabels, Counter>::default();
        let cluster = ClusterSeries::register(&mut registry);
        let spend = SpendSeries::register(&mut registry);
        let rollout = RolloutSeries::register(&mut registry);
        let channel_series = ChannelSeries::register(&mut registry);
        let plaintext_hops = plaintext_hops::register(&mut registry);
        let auth = AuthSeries::register(&mut registry);
        let callers = CallerSeries::register(&mut registry);
        let tls = TlsSeries::register(&mut registry);
        let config = ConfigSeries::register(&mut registry);

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
            "gRPC calls answered RESOURCE_EXHAUSTED at once, by the limit reached (in_flight, streams, streams_per_connection, body_bytes)",
            rpc_shed.clone(),
        );
        registry.register(
            "idgate_http_shed",
            "HTTP listener requests answered 503 at once because serving.http_max_in_flight requests were in flight",
            http_shed.clone(),
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
            "idgate_connections_aged",
            "gRPC connections told to go away (GOAWAY) at their maximum age (serving.max_connection_age_secs), by listener",
            connections_aged.clone(),
        );
        registry.register(
            "idgate_draining",
            "1 from the stop signal until exit: health says NOT_SERVING",
            draining.clone(),
        );
        registry.register_with_unit(
            "idgate_serving_idle_poll",
            "Wall time serving threads spent polling for the next call event instead of sleeping (serving.idle_poll_us)",
            Unit::Seconds,
            idle_poll.clone(),
        );
        for limit in ["in_flight", "streams", "streams_per_connection"] {
            drop(rpc_shed.get_or_create(&LimitLabels { limit }));
        }
        for listener in ["grpc", "http", "admin"] {
            drop(connections_open.get_or_create(&ListenerLabels { listener }));
            drop(connections_rejected.get_or_create(&ListenerLabels { listener }));
        }
        for listener in ["grpc", "admin"] {
            drop(connections_aged.get_or_create(&ListenerLabels { listener }));
        }
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
        registry.register(
            "idgate_watch_fleet_results",
            "Final journey results read here, once for all watchers here, because another replica read them on its turn and announced them",
            watch_fleet_results.clone(),
        );
        registry.register(
            "idgate_audit_write_failures",
            "Audit records that could not be written to stdout",
            audit_write_failures.clone(),
        );
        registry.register(
            "idgate_audit_export_records",
            "Audit records handed to the OTLP log export ([audit] otlp), by outcome: exported, failed, dropped",
            audit_export.clone(),
        );

        if let Some(spans) = spans {
            spans.register(&mut registry);
        }

        let labels_interner = LabelInterner::default();
        for channel in channels {
            let name: String = channel.into();
            channel_series.preset(&name, labels_interner.channel(&name));
        }

        Metrics {
            inner: Arc::new(Inner {
                registry,
                rpc_requests,
                rpc_duration,
                rpc_in_flight,
                upstream_requests,
                upstream_duration,
                rpc_handles: Default::default(),
                in_flight_handles: Default::default(),
                upstream_handles: Default::default(),
                webhooks,
                http_in_flight,
                upstream_rejected,
                rpc_shed,
                http_shed,
                connections_open,
                connections_rejected,
                connections_aged,
                draining,
                idle_poll,
                watch_journeys,
                watch_watchers,
                watch_result_reads,
                watch_notice_timeouts,
                watch_fleet_results,
                audit_write_failures,
                audit_export,
                plaintext_hops,
                otel: OtelRed::new(),
                cluster,
                spend,
                rollout,
                channels: channel_series,
                auth,
                callers,
                caller_meters: CallerMeters::default(),
                tls,
                config,
                core_label: labels_interner.channel(CORE_CHANNEL),
                labels: labels_interner,
            }),
        }
    }
}
