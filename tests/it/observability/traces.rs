//! Tracing of a journey: one trace per call from the caller's context down
//! to the sandbox, each upstream call under its RPC, the journey reference
//! on every span (the customer reference only when opted in), and the
//! webhook linked to the result read it triggers.

use std::collections::HashMap;

use idgate::domain::{Appkey, JourneyRef};

use super::*;
use crate::support::{gateway, otlp_collector::kind};

const SERVICE_ROOT: &str = "/service/captcha";

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
