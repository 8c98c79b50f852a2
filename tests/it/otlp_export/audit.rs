//! `[audit] otlp = true`: each audit record also reaches the spans'
//! collector as an OTLP log record, over gRPC and over HTTP/protobuf, with
//! its fields, its trace id and no value; without an OTLP endpoint the
//! setting is refused rather than silently dropped.

use idgate::{
    config::TelemetryConfig,
    proto::v1::{self, journey_service_client::JourneyServiceClient},
    telemetry::{OtlpProtocol, TelemetryBuilder},
};

use crate::support::{
    gateway::{connect, happy_person, start_gateway as start, test_config},
    otlp_collector::Collector,
    telemetry::{SPAN_WAIT, exported_telemetry_with},
    wait::eventually,
};

/// `message` in the trace `trace_id`.
fn traced<T>(trace_id: &str, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    req
}

/// One `CreateJourney` and one `GetJourneyResult` in a trace of the
/// test's; their two audit records arrive at `collector` as logs.
async fn audit_records_reach(builder: TelemetryBuilder, collector: &Collector) {
    let (telemetry, _logs, _default) = exported_telemetry_with(builder.audit_otlp(true));
    let gw = start(test_config()).await;
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let mut client = JourneyServiceClient::new(connect(gw.grpc_url()).await);
    let created = client
        .create_journey(traced(&trace_id, happy_person()))
        .await
        .expect("create journey")
        .into_inner();
    let _ = client
        .get_journey_result(traced(
            &trace_id,
            v1::GetJourneyResultRequest {
                appkey: created.appkey.clone(),
            },
        ))
        .await;
    let exporters = telemetry.exporters();
    eventually("both audit records exported", SPAN_WAIT, async || {
        exporters.force_flush().await.expect("flush");
        collector
            .logs()
            .iter()
            .filter(|l| l.trace_id == trace_id)
            .count()
            == 2
    })
    .await;
    let logs: Vec<_> = collector
        .logs()
        .into_iter()
        .filter(|l| l.trace_id == trace_id)
        .collect();
    let operations: Vec<_> = logs.iter().map(|l| l.attr("operation")).collect();
    assert_eq!(
        operations,
        [Some("create_journey"), Some("read_result")],
        "{logs:#?}"
    );
    for log in &logs {
        assert_eq!(log.body, "personal data access");
        assert_eq!(log.scope, "idgate.audit");
        assert_eq!(log.attr("journey_ref"), Some(created.journey_ref.as_str()));
        assert!(!log.service.is_empty(), "the spans' resource");
        let text = format!("{log:?}");
        let person = idgate::sandbox::samples::HAPPY_PERSON;
        for value in [created.appkey.as_str(), person.cpf, person.name] {
            assert!(
                !text.contains(value),
                "a value in an exported record: {text}"
            );
        }
    }
    gw.shutdown().await;
    telemetry.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn audit_records_reach_the_collector_as_logs_over_grpc() {
    let collector = Collector::start().await;
    let builder = TelemetryBuilder::new(&TelemetryConfig::default())
        .otlp_endpoint(collector.endpoint())
        .otlp_protocol(OtlpProtocol::Grpc);
    audit_records_reach(builder, &collector).await;
}

#[tokio::test]
async fn audit_records_reach_the_collector_as_logs_over_http_protobuf() {
    let collector = Collector::start_http().await;
    let builder = TelemetryBuilder::new(&TelemetryConfig::default())
        .otlp_endpoint(format!("{}/v1/traces", collector.endpoint()))
        .otlp_protocol(OtlpProtocol::HttpProtobuf);
    audit_records_reach(builder, &collector).await;
}

#[test]
fn audit_export_without_an_otlp_endpoint_is_refused_naming_the_setting() {
    let err = TelemetryBuilder::new(&TelemetryConfig::default())
        .without_export()
        .audit_otlp(true)
        .build()
        .map(drop)
        .expect_err("nowhere to export to");
    assert!(err.to_string().contains("[audit] otlp"), "{err}");
}
