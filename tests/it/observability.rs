//! Observability end to end, on the real gateway and its embedded sandbox:
//! one trace per call from the caller down to the sandbox, the journey
//! reference on every span of a journey, the webhook linked to the result
//! read it triggers, no personal data or secret anywhere in logs, spans,
//! metrics or errors, and `/metrics` after a journey.
//!
//! Each test installs its subscriber for its own thread
//! ([`Traced::start`]) on the current-thread runtime of `#[tokio::test]`:
//! every task the gateway and the sandbox spawn runs on that thread and
//! reports to that test's collector, and [`Traced::start`] keeps the other
//! tests of the process from switching its spans off.

use std::{collections::HashMap, time::Duration};

use base64::Engine as _;
use idgate::{
    config::Config,
    domain::{Appkey, JourneyRef},
    proto::v1,
    sandbox::{OperatorConfig, samples},
};
use tokio_stream::StreamExt as _;

use crate::support::{
    gateway::{self, TestGateway, reason},
    metrics,
    otlp_collector::{CollectedSpan, kind},
    telemetry::Traced,
};

const WAIT: Duration = Duration::from_secs(20);
const SERVICE_ROOT: &str = "/service/captcha";

// Canaries: values that must never leave the request and response bodies.
const CANARY_NAME: &str = "Zefirina Canarinho Quaresma";
const CANARY_REFERENCE: &str = "CANARYREF8841";
const CANARY_OPERATOR: &str = "canary-operator";
const CANARY_PASSWORD: &str = "CANARY-OPERATOR-PASSWORD-5e1d";
const CANARY_IMAGE_TEXT: &str = "CANARY-IMAGE-TEXT-77b3";
const CANARY_BAD_CPF: &str = "52110000138";
const CANARY_BAD_NAME: &str = "Canary\u{7}Bell Name";
const CANARY_FAKE_APPKEY: &str = "CANARY-FAKE-APPKEY-0c4a";
const CANARY_FAKE_SESSION: &str = "CANARY-FAKE-SESSION-TOKEN-2b9f";

/// A test's telemetry and its gateway.
struct Observed {
    traced: Traced,
    gw: TestGateway,
}

/// Telemetry to an in-process collector and logs at TRACE into memory,
/// installed for this thread, then a gateway on the embedded sandbox.
async fn observe(edit: impl FnOnce(&mut Config)) -> Observed {
    let traced = Traced::start("idgate-e2e", "trace").await;
    let gw = TestGateway::start_with(edit).await;
    Observed { traced, gw }
}

impl Observed {
    /// Flushes until `done` holds for the spans received.
    async fn spans_until(&self, done: impl Fn(&[CollectedSpan]) -> bool) -> Vec<CollectedSpan> {
        self.traced.spans_until(done).await
    }

    async fn finish(self) {
        let Observed { gw, traced } = self;
        gw.stop().await;
        traced.finish().await;
    }
}

/// The W3C context a traced caller sends with one call.
struct Caller {
    trace_id: String,
    span_id: String,
}

impl Caller {
    fn new() -> Self {
        Caller {
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            span_id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        req.metadata_mut().insert(
            "traceparent",
            format!("00-{}-{}-01", self.trace_id, self.span_id)
                .parse()
                .expect("traceparent"),
        );
        req
    }
}

fn is_sandbox_server(s: &CollectedSpan) -> bool {
    s.kind == kind::SERVER
        && s.str("http.route")
            .is_some_and(|r| r.starts_with(SERVICE_ROOT))
}

fn port_of(url: &str) -> i64 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in URL")
}

/// One RPC of the journey: what its trace must hold.
struct Step {
    caller: Caller,
    method: &'static str,
    /// Upstream operations, with the sandbox route each lands on.
    upstream: Vec<(&'static str, String)>,
}

impl Step {
    fn new(caller: Caller, method: &'static str, upstream: &[(&'static str, &str)]) -> Self {
        Step {
            caller,
            method,
            upstream: upstream
                .iter()
                .map(|(op, path)| (*op, format!("{SERVICE_ROOT}{path}")))
                .collect(),
        }
    }

    fn in_trace<'a>(&self, spans: &'a [CollectedSpan]) -> Vec<&'a CollectedSpan> {
        spans
            .iter()
            .filter(|s| s.trace_id == self.caller.trace_id)
            .collect()
    }

    /// True once the server span, each client span and the sandbox span
    /// under each have arrived.
    fn complete(&self, spans: &[CollectedSpan]) -> bool {
        let trace = self.in_trace(spans);
        trace
            .iter()
            .any(|s| s.kind == kind::SERVER && s.name == self.method)
            && self.upstream.iter().all(|(op, route)| {
                trace.iter().any(|c| {
                    c.kind == kind::CLIENT
                        && c.str("idgate.operation") == Some(op)
                        && trace.iter().any(|s| {
                            is_sandbox_server(s)
                                && s.parent_span_id == c.span_id
                                && s.str("http.route") == Some(route)
                        })
                })
            })
    }
}

#[tokio::test]
async fn a_journey_is_one_trace_per_call_down_to_the_sandbox_with_its_reference_on_every_span() {
    let o = observe(|c| c.telemetry.record_customer_reference = true).await;
    let gw = &o.gw;
    let mut steps = Vec::new();

    let caller = Caller::new();
    let created = gw
        .journeys()
        .create_journey(caller.request(gateway::happy_person()))
        .await
        .expect("CreateJourney")
        .into_inner();
    let journey = JourneyRef::from_appkey(&Appkey::new(created.appkey.as_str()));
    assert_eq!(created.journey_ref, journey.as_str());
    let appkey = created.appkey;
    steps.push(Step::new(
        caller,
        "idgate.v1.JourneyService/CreateJourney",
        &[("credential", "/credencial"), ("appkey", "/appkey")],
    ));

    let caller = Caller::new();
    let session = gw
        .liveness()
        .start_session3_d(caller.request(v1::StartSession3DRequest {
            appkey: appkey.clone(),
            user_agent: samples::USER_AGENT_VALID.into(),
        }))
        .await
        .expect("StartSession3D")
        .into_inner();
    assert_eq!(session.channel, "primary");
    steps.push(Step::new(
        caller,
        "idgate.v1.LivenessService/StartSession3D",
        &[("session_token_3d", "/3d/session-token")],
    ));

    let caller = Caller::new();
    gw.liveness()
        .verify_liveness3_d(caller.request(v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: session.session_token,
            channel: session.channel,
        }))
        .await
        .expect("VerifyLiveness3D");
    steps.push(Step::new(
        caller,
        "idgate.v1.LivenessService/VerifyLiveness3D",
        &[("liveness_3d", "/3d/liveness")],
    ));

    let caller = Caller::new();
    gw.documents()
        .submit_document_images(caller.request(v1::SubmitDocumentImagesRequest {
            appkey: appkey.clone(),
            images: gateway::rg_images(),
        }))
        .await
        .expect("SubmitDocumentImages");
    steps.push(Step::new(
        caller,
        "idgate.v1.DocumentService/SubmitDocumentImages",
        &[("document_images", "/document")],
    ));

    // Processing ends; the sandbox posts its notice to the gateway.
    let mut delivered = gw.sandbox().watch_webhook_stats();
    gw.finish_processing();
    tokio::time::timeout(WAIT, delivered.wait_for(|s| s.delivered >= 1))
        .await
        .expect("webhook delivered in time")
        .expect("sandbox running");

    let caller = Caller::new();
    let result = gw
        .journeys()
        .get_journey_result(caller.request(v1::GetJourneyResultRequest {
            appkey: appkey.clone(),
        }))
        .await
        .expect("GetJourneyResult")
        .into_inner()
        .result
        .expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    steps.push(Step::new(
        caller,
        "idgate.v1.JourneyService/GetJourneyResult",
        &[("result", "/document/result")],
    ));

    // A watcher after the notice: its task reads the result at once.
    let watcher = Caller::new();
    let mut stream = gw
        .journeys()
        .watch_journey(watcher.request(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::JourneyRef(
                journey.to_string(),
            )),
        }))
        .await
        .expect("WatchJourney")
        .into_inner();
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = event.expect("watch event").result;
    }
    assert_eq!(
        last.expect("final result").status(),
        v1::JourneyStatus::Complete
    );

    let j = journey.as_str();
    let is_webhook = |s: &CollectedSpan| {
        s.kind == kind::SERVER
            && s.str("http.route") == Some("/webhooks/journey")
            && s.str("idgate.journey_ref") == Some(j)
    };
    let is_read = |s: &CollectedSpan| {
        s.name == "idgate.journey.result_read"
            && s.str("idgate.journey_ref") == Some(j)
            && s.str("idgate.trigger") == Some("notice")
    };
    let spans = o
        .spans_until(|spans| {
            steps.iter().all(|step| step.complete(spans))
                && spans.iter().any(is_webhook)
                && spans.iter().filter(|s| is_read(s)).any(|read| {
                    spans.iter().any(|c| {
                        c.parent_span_id == read.span_id
                            && c.kind == kind::CLIENT
                            && spans
                                .iter()
                                .any(|s| is_sandbox_server(s) && s.parent_span_id == c.span_id)
                    })
                })
        })
        .await;
    let by_id: HashMap<&str, &CollectedSpan> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let sandbox = gw.sandbox();
    let primary_port = port_of(&sandbox.channels()[0].base_url);
    let result_port = port_of(&sandbox.result_base_url());
    let core_port = port_of(&sandbox.base_url());

    for step in &steps {
        let trace = step.in_trace(&spans);
        let what = step.method;
        // The caller's trace continues: the server span is the caller's
        // child, and every other span hangs off a span of the same trace.
        let server = trace
            .iter()
            .find(|s| s.kind == kind::SERVER && s.name == step.method)
            .unwrap();
        assert_eq!(server.parent_span_id, step.caller.span_id, "{what}");
        assert_eq!(server.resource_str("service.name"), Some("idgate-e2e"));
        for span in &trace {
            if span.span_id != server.span_id {
                let parent = by_id.get(span.parent_span_id.as_str());
                assert!(
                    parent.is_some_and(|p| p.trace_id == span.trace_id),
                    "{what}: {} has no parent in the trace",
                    span.name
                );
            }
        }
        // Handlers open no span of their own: the call's upstream client
        // spans are the server span's children.
        assert!(
            trace.iter().all(|s| s.kind == kind::SERVER
                || s.parent_span_id != server.span_id
                || s.kind == kind::CLIENT),
            "{what}: only client spans under the server span"
        );
        if step.method.ends_with("/StartSession3D") {
            assert_eq!(server.str("idgate.channel"), Some("primary"), "{what}");
        }
        for (op, route) in &step.upstream {
            let client = trace
                .iter()
                .find(|c| c.kind == kind::CLIENT && c.str("idgate.operation") == Some(op))
                .unwrap();
            assert_eq!(client.parent_span_id, server.span_id, "{what}: {op}");
            assert_eq!(client.int("http.response.status_code"), Some(200), "{op}");
            let upstream = trace
                .iter()
                .find(|s| is_sandbox_server(s) && s.parent_span_id == client.span_id)
                .unwrap();
            assert_eq!(upstream.str("http.route"), Some(route.as_str()), "{op}");
            assert_eq!(upstream.int("http.response.status_code"), Some(200));
            let expected_port = match *op {
                "session_token_3d" | "liveness_3d" => {
                    assert_eq!(client.str("idgate.channel"), Some("primary"));
                    primary_port
                }
                "result" => result_port,
                _ => core_port,
            };
            assert_eq!(client.int("server.port"), Some(expected_port), "{op}");
            // The sandbox's own span of the operation, under its server span.
            assert!(
                trace.iter().any(|s| s.name == "sandbox.call"
                    && s.parent_span_id == upstream.span_id
                    && s.str("operation") == Some(op)),
                "{op}: no sandbox.call span"
            );
        }
        // Every span of the journey carries its reference, except the
        // operator's credential exchange, which serves every journey.
        for span in &trace {
            let credential = span.str("idgate.operation") == Some("credential")
                || span.str("operation") == Some("credential")
                || span.str("http.route") == Some("/service/captcha/credencial")
                || by_id
                    .get(span.parent_span_id.as_str())
                    .is_some_and(|p| p.str("idgate.operation") == Some("credential"))
                || by_id
                    .get(span.parent_span_id.as_str())
                    .is_some_and(|p| p.str("http.route") == Some("/service/captcha/credencial"));
            if credential {
                assert_eq!(span.str("idgate.journey_ref"), None, "{}", span.name);
            } else {
                assert_eq!(
                    span.str("idgate.journey_ref"),
                    Some(j),
                    "{what}: span {} ({:?}) lacks the journey",
                    span.name,
                    span.attributes
                );
            }
        }
    }

    // Opt-in customer reference: on the CreateJourney server span.
    let create_server = spans
        .iter()
        .find(|s| s.name == "idgate.v1.JourneyService/CreateJourney")
        .unwrap();
    assert_eq!(
        create_server.str("idgate.customer_reference"),
        Some("TESTREF1")
    );

    // The webhook: its server span continues the sandbox's delivery span
    // and names the journey; the result read it triggered links to it.
    let webhook = spans.iter().find(|s| is_webhook(s)).unwrap();
    let delivery = by_id
        .get(webhook.parent_span_id.as_str())
        .expect("the webhook continues the sandbox's delivery trace");
    assert_eq!(delivery.kind, kind::CLIENT);
    assert_eq!(delivery.str("idgate.journey_ref"), Some(j));
    assert_eq!(webhook.int("http.response.status_code"), Some(202));
    let read = spans
        .iter()
        .filter(|s| is_read(s))
        .find(|r| spans.iter().any(|c| c.parent_span_id == r.span_id))
        .unwrap();
    assert!(
        read.links
            .contains(&(webhook.trace_id.clone(), webhook.span_id.clone())),
        "the result read links the webhook span: {read:#?}"
    );
    let watch_server = spans
        .iter()
        .find(|s| s.trace_id == watcher.trace_id && s.kind == kind::SERVER)
        .expect("WatchJourney server span");
    assert_eq!(watch_server.name, "idgate.v1.JourneyService/WatchJourney");
    assert!(
        read.links.iter().any(|(t, _)| t == &watcher.trace_id),
        "the result read links the WatchJourney call: {read:#?}"
    );
    // The read's upstream call and the sandbox's span carry the journey.
    let read_client = spans
        .iter()
        .find(|c| c.parent_span_id == read.span_id && c.kind == kind::CLIENT)
        .unwrap();
    assert_eq!(read_client.str("idgate.operation"), Some("result"));
    assert_eq!(read_client.str("idgate.journey_ref"), Some(j));
    let read_upstream = spans
        .iter()
        .find(|s| is_sandbox_server(s) && s.parent_span_id == read_client.span_id)
        .unwrap();
    assert_eq!(read_upstream.str("idgate.journey_ref"), Some(j));
    o.finish().await;
}

/// Runs a whole 3D journey with documents, the result and a watch (which
/// ends after the webhook). Returns the appkey and the session token.
async fn run_3d_journey(
    gw: &TestGateway,
    person: v1::CreateJourneyRequest,
    images: Vec<v1::DocumentImage>,
) -> (String, String) {
    let appkey = gw.create_journey_for(person).await.appkey;
    let mut l = gw.liveness();
    let session = l
        .start_session3_d(v1::StartSession3DRequest {
            appkey: appkey.clone(),
            user_agent: samples::USER_AGENT_VALID.into(),
        })
        .await
        .expect("StartSession3D")
        .into_inner();
    let token = session.session_token.clone();
    let verdict = l
        .verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: session.session_token,
            channel: session.channel,
        })
        .await
        .expect("VerifyLiveness3D")
        .into_inner();
    assert!(verdict.verdict.expect("verdict").valid);
    gw.documents()
        .submit_document_images(v1::SubmitDocumentImagesRequest {
            appkey: appkey.clone(),
            images,
        })
        .await
        .expect("SubmitDocumentImages");
    let mut stream = gw
        .journeys()
        .watch_journey(v1::WatchJourneyRequest {
            journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.clone())),
        })
        .await
        .expect("WatchJourney")
        .into_inner();
    let mut delivered = gw.sandbox().watch_webhook_stats();
    let before = delivered.borrow().delivered;
    gw.finish_processing();
    tokio::time::timeout(WAIT, delivered.wait_for(|s| s.delivered > before))
        .await
        .expect("webhook delivered in time")
        .expect("sandbox running");
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = event.expect("watch event").result;
    }
    assert_eq!(
        last.expect("final result").status(),
        v1::JourneyStatus::Complete
    );
    let result = gw
        .journeys()
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: appkey.clone(),
        })
        .await
        .expect("GetJourneyResult")
        .into_inner();
    assert_eq!(
        result.result.expect("result").status(),
        v1::JourneyStatus::Complete
    );
    (appkey, token)
}

#[tokio::test]
async fn metrics_after_a_journey_count_each_rpc_upstream_call_channel_and_webhook() {
    let o = observe(|_| {}).await;
    let gw = &o.gw;
    let (appkey, _) = run_3d_journey(gw, gateway::happy_person(), gateway::rg_images()).await;

    let text = reqwest::get(format!("{}/metrics", gw.http_url()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    let get = |series: &str| -> f64 { metrics::series(&text, series) };
    for method in [
        "idgate.v1.JourneyService/CreateJourney",
        "idgate.v1.LivenessService/StartSession3D",
        "idgate.v1.LivenessService/VerifyLiveness3D",
        "idgate.v1.DocumentService/SubmitDocumentImages",
        "idgate.v1.JourneyService/WatchJourney",
        "idgate.v1.JourneyService/GetJourneyResult",
    ] {
        let labels = format!(r#"method="{method}",code="OK""#);
        assert_eq!(
            get(&format!("idgate_rpc_requests_total{{{labels}}}")),
            1.0,
            "{method}"
        );
        assert_eq!(
            get(&format!("idgate_rpc_duration_seconds_count{{{labels}}}")),
            1.0
        );
        assert!(get(&format!("idgate_rpc_duration_seconds_sum{{{labels}}}")) > 0.0);
        assert_eq!(
            get(&format!(r#"idgate_rpc_in_flight{{method="{method}"}}"#)),
            0.0
        );
    }
    for (operation, channel, at_least) in [
        ("credential", "core", 1.0),
        ("appkey", "core", 1.0),
        ("session_token_3d", "primary", 1.0),
        ("liveness_3d", "primary", 1.0),
        ("document_images", "core", 1.0),
        // GetJourneyResult and the watch's read after the webhook.
        ("result", "core", 2.0),
    ] {
        let labels = format!(r#"operation="{operation}",channel="{channel}",status="200""#);
        let count = get(&format!("idgate_upstream_requests_total{{{labels}}}"));
        assert!(count >= at_least, "{operation}: {count}");
        assert_eq!(
            get(&format!(
                "idgate_upstream_duration_seconds_count{{{labels}}}"
            )),
            count
        );
    }
    assert!(
        metrics::label_sets(&text, "idgate_upstream_requests_total")
            .iter()
            .all(|labels| labels.contains(&("status".to_owned(), "200".to_owned()))),
        "a healthy journey makes no failed upstream call:\n{text}"
    );
    for channel in ["primary", "alternative"] {
        assert_eq!(
            get(&format!(
                r#"idgate_channel_circuit_state{{channel="{channel}"}}"#
            )),
            0.0
        );
        assert_eq!(
            get(&format!(
                r#"idgate_channel_failovers_total{{channel="{channel}"}}"#
            )),
            0.0
        );
    }
    assert!(get(r#"idgate_webhooks_total{outcome="received"}"#) >= 1.0);
    assert!(get(r#"idgate_webhooks_total{outcome="accepted"}"#) >= 1.0);
    assert_eq!(
        get(r#"idgate_webhooks_total{outcome="rejected_credentials_invalid"}"#),
        0.0
    );
    // The scrape itself is the one request in flight.
    assert_eq!(get("idgate_http_in_flight"), 1.0);
    // Labels never carry the journey: neither its appkey nor its person.
    let journey = JourneyRef::from_appkey(&Appkey::new(appkey.as_str()));
    for secret in [
        appkey.as_str(),
        journey.as_str(),
        samples::HAPPY_PERSON.cpf,
        samples::HAPPY_PERSON.name,
    ] {
        assert!(!text.contains(secret), "{secret} in metrics:\n{text}");
    }
    o.finish().await;
}

/// An image that carries `CANARY_IMAGE_TEXT` after its last byte (still
/// the same image to a decoder, and to the sandbox's marker scan).
fn with_canary(mut image: Vec<u8>, tag: &str) -> Vec<u8> {
    image.extend_from_slice(format!("\n{CANARY_IMAGE_TEXT}-{tag}\n").as_bytes());
    image
}

#[tokio::test]
async fn no_secret_or_personal_data_reaches_logs_spans_metrics_or_errors() {
    let o = observe(|c| {
        // A non-default operator whose password is a canary: the gateway
        // logs in with it at /credencial.
        c.sandbox.operators = vec![OperatorConfig {
            login: CANARY_OPERATOR.into(),
            password: CANARY_PASSWORD.into(),
        }];
    })
    .await;
    let gw = &o.gw;
    let person = v1::CreateJourneyRequest {
        name: CANARY_NAME.into(),
        customer_reference: CANARY_REFERENCE.into(),
        ..gateway::happy_person()
    };
    let mut secrets: Vec<String> = vec![
        samples::HAPPY_PERSON.cpf.into(),
        CANARY_NAME.into(),
        CANARY_REFERENCE.into(),
        CANARY_PASSWORD.into(),
        CANARY_IMAGE_TEXT.into(),
        CANARY_BAD_CPF.into(),
        "Canary\u{7}Bell".into(),
        "Bell Name".into(),
        CANARY_FAKE_APPKEY.into(),
        CANARY_FAKE_SESSION.into(),
        samples::HAPPY_PERSON.birth_date.into(),
        gateway::happy_person().birth_date,
    ];
    let mut images: Vec<Vec<u8>> = Vec::new();
    let mut errors: Vec<tonic::Status> = Vec::new();

    // A 3D journey with documents, a watch, the webhook and the result.
    let rg: Vec<Vec<u8>> = gateway::rg_images()
        .into_iter()
        .enumerate()
        .map(|(i, img)| with_canary(img.content.to_vec(), &format!("rg{i}")))
        .collect();
    images.extend(rg.iter().cloned());
    let (appkey, token) = run_3d_journey(
        gw,
        person.clone(),
        rg.into_iter()
            .map(|content| v1::DocumentImage {
                content: content.into(),
            })
            .collect(),
    )
    .await;
    secrets.push(appkey);
    secrets.push(token);

    // A 2D journey with a digital licence.
    let appkey = gw.create_journey_for(person.clone()).await.appkey;
    secrets.push(appkey.clone());
    let mut l = gw.liveness();
    let challenges = l
        .create_challenges(v1::CreateChallengesRequest {
            appkey: appkey.clone(),
        })
        .await
        .expect("CreateChallenges")
        .into_inner();
    let snapshot = with_canary(samples::selfie(), "snapshot");
    images.push(snapshot.clone());
    let verdict = l
        .submit_challenge_response(v1::SubmitChallengeResponseRequest {
            appkey: appkey.clone(),
            challenge_key: challenges.challenge_key.clone(),
            snapshots: challenges
                .challenges
                .iter()
                .filter_map(|c| c.face_type.as_ref())
                .map(|f| v1::Snapshot {
                    image: snapshot.clone().into(),
                    face_type_code: f.code.clone(),
                })
                .collect(),
        })
        .await
        .expect("SubmitChallengeResponse")
        .into_inner();
    assert!(verdict.verdict.expect("verdict").valid);
    let licence = with_canary(samples::digital_licence_image(), "licence");
    images.push(licence.clone());
    gw.documents()
        .submit_digital_licence(v1::SubmitDigitalLicenceRequest {
            appkey: appkey.clone(),
            licence: Some(v1::submit_digital_licence_request::Licence::QrImage(
                licence.into(),
            )),
        })
        .await
        .expect("SubmitDigitalLicence");
    gw.finish_processing();
    gw.journeys()
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: appkey.clone(),
        })
        .await
        .expect("GetJourneyResult");

    // Failing calls: bad input, unknown keys and tokens.
    let mut j = gw.journeys();
    errors.push(
        j.create_journey(v1::CreateJourneyRequest {
            cpf: CANARY_BAD_CPF.into(),
            name: CANARY_BAD_NAME.into(),
            birth_date: "1985-02-30".into(),
            customer_reference: "CANARY REF WITH SPACES".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        })
        .await
        .unwrap_err(),
    );
    secrets.push("1985-02-30".into());
    secrets.push("CANARY REF WITH SPACES".into());
    errors.push(
        j.get_journey_result(v1::GetJourneyResultRequest {
            appkey: CANARY_FAKE_APPKEY.into(),
        })
        .await
        .unwrap_err(),
    );
    errors.push(
        l.verify_liveness3_d(v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: CANARY_FAKE_SESSION.into(),
            channel: "primary".into(),
        })
        .await
        .unwrap_err(),
    );
    let unusable = with_canary(b"GIF89a not a document at all".to_vec(), "unusable");
    images.push(unusable.clone());
    errors.push(
        gw.documents()
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey: CANARY_FAKE_APPKEY.into(),
                images: vec![v1::DocumentImage {
                    content: unusable.into(),
                }],
            })
            .await
            .unwrap_err(),
    );
    // An appkey past its lifetime.
    let expiring = gw.create_journey_for(person).await.appkey;
    secrets.push(expiring.clone());
    gw.clock.advance(Duration::from_secs(
        Config::default().sandbox.appkey_ttl_secs + 60,
    ));
    let expired = l
        .create_challenges(v1::CreateChallengesRequest {
            appkey: expiring.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&expired), "APPKEY_EXPIRED", "{expired:?}");
    errors.push(expired);
    let expired_journey = JourneyRef::from_appkey(&Appkey::new(expiring.as_str()));

    for image in &images {
        let b64 = base64::engine::general_purpose::STANDARD.encode(image);
        // The whole image, and its tail (which encodes the canary text).
        secrets.push(b64[b64.len() - 32..].to_owned());
        secrets.push(b64);
    }

    let metrics = reqwest::get(format!("{}/metrics", gw.http_url()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body");
    let spans = o
        .spans_until(|spans| {
            spans.iter().any(|s| {
                s.name == "idgate.v1.LivenessService/CreateChallenges"
                    && s.str("idgate.journey_ref") == Some(expired_journey.as_str())
            }) && spans
                .iter()
                .any(|s| s.str("http.route") == Some("/webhooks/journey"))
        })
        .await;
    let logs = o.traced.logs.contents();
    // The net is cast: logs at TRACE and spans of every kind are there.
    assert!(logs.contains("completion notice accepted"), "{logs}");
    assert!(logs.contains(expired_journey.as_str()));
    assert!(logs.lines().count() > 500, "TRACE logging is on");
    for name in [
        "idgate.v1.LivenessService/SubmitChallengeResponse",
        "idgate.v1.DocumentService/SubmitDigitalLicence",
        "idgate.v1.DocumentService/SubmitDocumentImages",
        "idgate.journey.result_read",
        "POST webhook",
    ] {
        assert!(spans.iter().any(|s| s.name == name), "no span {name}");
    }
    let error_text: Vec<String> = errors
        .iter()
        .map(|e| format!("{} {:?} {:?}", e.message(), e.details(), e.metadata()))
        .collect();

    for secret in &secrets {
        assert!(!logs.contains(secret.as_str()), "{secret:?} logged");
        for span in &spans {
            let dump = format!("{span:?}");
            assert!(!dump.contains(secret.as_str()), "{secret:?} on span {dump}");
        }
        assert!(!metrics.contains(secret.as_str()), "{secret:?} in metrics");
        for error in &error_text {
            assert!(
                !error.contains(secret.as_str()),
                "{secret:?} in error {error}"
            );
        }
    }
    o.finish().await;
}

/// A plaintext hop off loopback (here an `http://` channel on a TEST-NET
/// address) is a WARN at start naming the key, and a gauge by kind; the
/// embedded sandbox's loopback hops are not. No URL in either.
#[tokio::test]
async fn plaintext_hops_off_loopback_are_warned_at_start_and_counted_by_kind() {
    let (logs, _default) = crate::support::telemetry::quiet_telemetry();
    let mut config = gateway::test_config();
    config.channels = vec![idgate::channels::ChannelSpec::new(
        "far",
        "http://192.0.2.10:8080/vendor",
        0,
    )];
    let gw = gateway::start_gateway(config).await;
    let exposition = metrics::of(gw.metrics());
    for (hop, count) in [
        ("channel", 1.0),
        ("upstream", 0.0),
        ("redis", 0.0),
        ("otlp", 0.0),
    ] {
        assert_eq!(
            metrics::value(&exposition, "idgate_plaintext_hops", &[("hop", hop)]),
            count,
            "{hop}"
        );
    }
    gw.shutdown().await;
    let logs = logs.contents();
    let warned: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("plaintext hop off loopback"))
        .collect();
    assert_eq!(warned.len(), 1, "{logs}");
    assert!(
        warned[0].contains("channels[0].base_url") && warned[0].contains("WARN"),
        "{logs}"
    );
    assert!(!logs.contains("192.0.2.10"), "{logs}");

    // The embedded sandbox alone: every hop on loopback, nothing warned.
    let (logs, _default) = crate::support::telemetry::quiet_telemetry();
    let gw = gateway::start_gateway(gateway::test_config()).await;
    let exposition = metrics::of(gw.metrics());
    assert_eq!(
        metrics::value(&exposition, "idgate_plaintext_hops", &[("hop", "channel")]),
        0.0
    );
    gw.shutdown().await;
    assert!(
        !logs.contents().contains("plaintext hop"),
        "{}",
        logs.contents()
    );
}
