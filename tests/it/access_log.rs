//! Log lines that join their trace, and the access log: a JSON line
//! written inside an RPC carries the trace and span ids the collector
//! received, and the access log line of each RPC tells its method, code,
//! duration, journey and peer, and no value of the request.

use idgate::{
    config::Config, proto::v1::journey_service_client::JourneyServiceClient, sandbox::samples,
    telemetry::CapturedLogs,
};

use crate::support::{
    gateway::{connect, happy_person, start_gateway as start, test_config},
    otlp_collector::Collector,
    process::{ServeProcess, quick_serve_config},
    telemetry::{collected_until, exported_telemetry, quiet_telemetry_at},
    wait::EVENT_WAIT,
};

const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

/// The JSON log lines written so far.
fn json_lines(logs: &CapturedLogs) -> Vec<serde_json::Value> {
    logs.contents()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a JSON line ({e}): {l}")))
        .collect()
}

/// The access log lines of `method` (`idgate.v1.JourneyService/CreateJourney`).
fn access_lines(logs: &CapturedLogs, method: &str) -> Vec<serde_json::Value> {
    json_lines(logs)
        .into_iter()
        .filter(|l| l["target"] == "idgate::access" && l["method"] == method)
        .collect()
}

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

fn access_on() -> Config {
    let mut config = test_config();
    config.telemetry.access_log = true;
    config
}

#[tokio::test]
async fn a_json_log_line_inside_an_rpc_carries_the_trace_and_span_the_collector_received() {
    let collector = Collector::start().await;
    let (telemetry, logs, _default) = exported_telemetry(&collector);
    let gw = start(access_on()).await;
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    JourneyServiceClient::new(connect(gw.grpc_url()).await)
        .create_journey(traced(&trace_id, happy_person()))
        .await
        .expect("create journey");
    let spans = collected_until(&telemetry, &collector, |spans| {
        spans
            .iter()
            .any(|s| s.name == CREATE && s.trace_id == trace_id)
    })
    .await;
    let server = spans
        .iter()
        .find(|s| s.name == CREATE && s.trace_id == trace_id)
        .expect("server span");
    assert_eq!(server.parent_span_id, "00f067aa0ba902b7");
    assert!(
        server.events.iter().all(|(name, _)| name != "rpc"),
        "the access line stays in the logs, not in the trace: {server:?}"
    );

    let lines = access_lines(&logs, CREATE);
    assert_eq!(lines.len(), 1, "one access line per RPC: {lines:?}");
    assert_eq!(lines[0]["trace_id"], trace_id.as_str());
    assert_eq!(lines[0]["span_id"], server.span_id.as_str());
    // Every line written inside the RPC joins the same trace.
    for line in json_lines(&logs)
        .iter()
        .filter(|l| l["span"]["name"] == "grpc.server")
    {
        assert_eq!(line["trace_id"], trace_id.as_str(), "{line}");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn the_access_log_tells_method_code_duration_journey_and_peer_and_no_request_value() {
    let (logs, _default) = quiet_telemetry_at("info");
    let gw = start(access_on()).await;
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let mut journeys = JourneyServiceClient::new(connect(gw.grpc_url()).await);
    journeys
        .create_journey(traced(&trace_id, happy_person()))
        .await
        .expect("create journey");
    let mut bad = happy_person();
    bad.cpf = "52110000138".into();
    let refused = journeys
        .create_journey(bad)
        .await
        .expect_err("an invalid CPF is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    let lines = access_lines(&logs, CREATE);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let ok = &lines[0];
    assert_eq!(ok["code"], 0);
    assert_eq!(ok["status"], "Ok");
    assert!(ok["duration_ms"].as_f64().is_some_and(|d| d > 0.0), "{ok}");
    assert!(
        ok["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{ok}"
    );
    assert!(
        ok["span"]["idgate.journey_ref"]
            .as_str()
            .is_some_and(|j| j.starts_with("j-")),
        "the journey reference is on the access line: {ok}"
    );
    // Without export, the trace id is the caller's.
    assert_eq!(ok["trace_id"], trace_id.as_str());
    assert_eq!(lines[1]["code"], tonic::Code::InvalidArgument as i32);
    assert!(
        lines[1].get("trace_id").is_none(),
        "an untraced call has no trace id"
    );

    let text = logs.contents();
    let p = samples::HAPPY_PERSON;
    let reference = happy_person().customer_reference;
    for value in [p.cpf, p.name, p.birth_date, "52110000138", &reference] {
        assert!(!text.contains(value), "a request value reached the logs");
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn idgate_serve_writes_every_access_line_of_its_calls_to_stdout_before_it_exits() {
    // The serving threads batch their lines (telemetry::log_lines): none
    // may be left in a batch when the process ends.
    let dir = crate::support::temp::dir("access-lines");
    let config = quick_serve_config(dir.path(), "[telemetry]\naccess_log = true\n");
    let mut serve = ServeProcess::start(&config);
    let grpc = serve.field("idgate listening", "grpc");
    let mut journeys = JourneyServiceClient::new(connect(format!("http://{grpc}")).await);
    const CALLS: usize = 25;
    for _ in 0..CALLS {
        journeys
            .create_journey(happy_person())
            .await
            .expect("create journey");
    }
    drop(journeys);

    serve.signal("TERM");
    let status = serve
        .exit_within(EVENT_WAIT)
        .await
        .expect("idgate serve exits after SIGTERM");
    assert!(status.success(), "{status}");
    let access = serve
        .lines_to_end(EVENT_WAIT)
        .into_iter()
        .filter(|l| l.contains("idgate::access") && l.contains(CREATE))
        .count();
    assert_eq!(
        access, CALLS,
        "one access line per call, none left unwritten"
    );
}
