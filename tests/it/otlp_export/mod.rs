//! Export over OTLP as operators run it: traces reach a collector over
//! HTTPS, gRPC or HTTP/protobuf, that the gateway trusts through a private
//! CA file, and the RED metrics reach a collector beside the Prometheus
//! endpoint.

mod audit;
mod settings;

use idgate::testing::GatewayParts as _;
use idgate::{
    proto::v1::journey_service_client::JourneyServiceClient,
    telemetry::{OtlpProtocol, TelemetryBuilder},
};

use crate::support::{
    gateway::{connect, happy_person, start_gateway as start, test_config},
    metrics,
    otlp_collector::{Collector, MetricPoint},
    telemetry::{SPAN_WAIT as WAIT, collected_until, exported_telemetry_with, telemetry_config},
    tls::TestCa,
};

const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

/// Runs one traced `CreateJourney` on a gateway exporting through
/// `builder`, and waits for its server span at `collector`.
async fn journey_span_reaches(builder: TelemetryBuilder, collector: &Collector) {
    let (telemetry, _logs, _default) = exported_telemetry_with(builder);
    let gw = start(test_config()).await;
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let mut req = tonic::Request::new(happy_person());
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    JourneyServiceClient::new(connect(gw.grpc_url()).await)
        .create_journey(req)
        .await
        .expect("create journey");
    let spans = collected_until(&telemetry, collector, |spans| {
        spans
            .iter()
            .any(|s| s.name == CREATE && s.trace_id == trace_id)
    })
    .await;
    assert!(
        spans
            .iter()
            .any(|s| s.trace_id == trace_id && s.name.starts_with("POST ")),
        "the upstream client spans arrive too"
    );
    gw.shutdown().await;
    telemetry.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn traces_reach_an_https_collector_over_grpc_trusting_a_private_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let collector = Collector::start_grpc_tls(&ca.leaf(&["localhost", "127.0.0.1"])).await;
    let builder = TelemetryBuilder::new(&telemetry_config())
        .otlp_endpoint(collector.https_endpoint())
        .otlp_protocol(OtlpProtocol::Grpc)
        .otlp_ca_file(ca.ca_file());
    journey_span_reaches(builder, &collector).await;
}

#[tokio::test]
async fn traces_reach_an_https_collector_over_http_protobuf_trusting_a_private_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new();
    let collector = Collector::start_http_tls(&ca.leaf(&["localhost", "127.0.0.1"])).await;
    let builder = TelemetryBuilder::new(&telemetry_config())
        .otlp_endpoint(format!("{}/v1/traces", collector.https_endpoint()))
        .otlp_protocol(OtlpProtocol::HttpProtobuf)
        .otlp_ca_file(ca.ca_file());
    journey_span_reaches(builder, &collector).await;
}

#[tokio::test]
async fn every_span_the_collector_received_is_counted_exported_on_metrics_and_none_dropped() {
    let collector = Collector::start().await;
    let builder = TelemetryBuilder::new(&telemetry_config())
        .otlp_endpoint(collector.endpoint())
        .otlp_protocol(OtlpProtocol::Grpc);
    let (telemetry, _logs, _default) = exported_telemetry_with(builder);
    let gw = idgate::server::start_with(
        test_config(),
        idgate::server::StartOptions {
            span_export: telemetry.exporters().span_export_stats(),
            ..Default::default()
        },
    )
    .await
    .expect("gateway starts");
    let mut journeys = JourneyServiceClient::new(connect(gw.grpc_url()).await);
    for _ in 0..5 {
        journeys
            .create_journey(happy_person())
            .await
            .expect("create journey");
    }

    // Each flush exports what has ended; the counts agree once nothing
    // more ends (the sandbox's spans are this process's too).
    let deadline = tokio::time::Instant::now() + WAIT;
    let (received, text) = loop {
        telemetry.exporters().force_flush().await.expect("flush");
        let received = collector.spans().len();
        let text = metrics::of(gw.metrics());
        if metrics::value(
            &text,
            "idgate_trace_spans_total",
            &[("outcome", "exported")],
        ) == received as f64
        {
            break (received, text);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "exported never matched the {received} spans received:\n{text}"
        );
        tokio::task::yield_now().await;
    };
    assert!(received >= 5 * 2, "a server and a client span per call");
    for outcome in ["dropped", "failed"] {
        assert_eq!(
            metrics::value(&text, "idgate_trace_spans_total", &[("outcome", outcome)]),
            0.0,
            "{outcome}"
        );
    }
    assert_eq!(metrics::value(&text, "idgate_trace_queue_spans", &[]), 0.0);
    gw.shutdown().await;
    telemetry.shutdown().await.expect("shutdown");
}

fn has(points: &[MetricPoint], name: &str, key: &str, value: &str) -> bool {
    points.iter().any(|p| {
        p.name == name && p.value > 0 && p.attributes.iter().any(|(k, v)| k == key && v == value)
    })
}

#[tokio::test]
async fn red_metrics_reach_an_otlp_collector_beside_the_prometheus_endpoint() {
    let collector = Collector::start().await;
    let (telemetry, _logs, _default) = exported_telemetry_with(
        TelemetryBuilder::new(&telemetry_config())
            .without_export()
            .otlp_metrics_endpoint(collector.endpoint()),
    );
    // Process-wide: the gateway's metrics take their instruments from it.
    telemetry.install_meter_provider();
    let gw = start(test_config()).await;
    JourneyServiceClient::new(connect(gw.grpc_url()).await)
        .create_journey(happy_person())
        .await
        .expect("create journey");

    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        telemetry.exporters().force_flush().await.expect("flush");
        let got = collector.points();
        if has(
            &got,
            "idgate.rpc.requests",
            "method",
            "idgate.v1.JourneyService/CreateJourney",
        ) && has(&got, "idgate.rpc.duration", "code", "OK")
            && has(&got, "idgate.upstream.requests", "operation", "appkey")
            && has(&got, "idgate.upstream.duration", "channel", "core")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "RED metrics never arrived: {got:?}"
        );
        tokio::task::yield_now().await;
    }
    // And /metrics still serves the same series.
    let text = crate::support::metrics::of(gw.metrics());
    assert!(
        crate::support::metrics::sum(
            &text,
            "idgate_rpc_requests_total",
            &[("method", "idgate.v1.JourneyService/CreateJourney")],
        ) >= 1.0,
        "{text}"
    );
    gw.shutdown().await;
}
