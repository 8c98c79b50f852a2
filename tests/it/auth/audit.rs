//! The audit trail over real sockets: one `idgate::audit` record per call
//! that submits or releases personal data (and one per result a watch
//! delivers), one per refusal of an authenticated caller, one `cancelled`
//! record for a call its client abandoned, logged even at WARN, written
//! before a SIGKILL can lose it, naming caller, operation, journey
//! reference, view and outcome, and never a value.

use idgate::{proto::v1, sandbox::samples};
use serde_json::Value;

use super::owners::{with_owners, with_owners_text};
use crate::support::{
    gateway::{TestGateway, by_ref, drain_within, happy_person, rg_images},
    jwt::{TestKey, bearer, jwks_file, jwt_auth},
    telemetry::quiet_telemetry,
    wait::{EVENT_WAIT, eventually},
};

#[tokio::test]
async fn one_record_per_personal_data_call_and_none_holds_a_value() {
    // At WARN: audit records are kept whatever the level.
    let (logs, _guard) = quiet_telemetry();
    let key = TestKey::es256("audit");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| with_owners(c, auth)).await;
    let (a, b) = (key.token("svc-a"), key.token("svc-b"));

    let created = gw
        .journeys()
        .create_journey(bearer(&a, happy_person()))
        .await
        .expect("create")
        .into_inner();
    let appkey = created.appkey.clone();
    let read = async |token: &str| {
        gw.journeys()
            .get_journey_result(bearer(
                token,
                v1::GetJourneyResultRequest {
                    appkey: appkey.clone(),
                },
            ))
            .await
    };
    read(&b).await.expect_err("B may not read A's journey");
    let mut l = gw.liveness();
    let s = l
        .start_session3_d(bearer(
            &a,
            v1::StartSession3DRequest {
                appkey: appkey.clone(),
                user_agent: "test".into(),
            },
        ))
        .await
        .expect("session")
        .into_inner();
    let session_token = s.session_token.clone();
    l.verify_liveness3_d(bearer(
        &a,
        v1::VerifyLiveness3DRequest {
            appkey: appkey.clone(),
            session_token: s.session_token,
            channel: s.channel,
        },
    ))
    .await
    .expect("verify");
    gw.documents()
        .submit_document_images(bearer(
            &a,
            v1::SubmitDocumentImagesRequest {
                appkey: appkey.clone(),
                images: rg_images(),
            },
        ))
        .await
        .expect("documents");
    gw.finish_processing();
    read(&a).await.expect("A reads");
    let stream = gw
        .journeys()
        .watch_journey(bearer(&a, by_ref(&created.journey_ref)))
        .await
        .expect("watch")
        .into_inner();
    let (_, end) = drain_within(stream, EVENT_WAIT).await;
    assert!(end.is_none(), "{end:?}");
    gw.stop().await;

    let text = logs.contents();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "idgate::audit")
        .collect();
    let summary: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            assert_eq!(r["journey_ref"], created.journey_ref.as_str(), "{r}");
            (
                r["operation"].as_str().unwrap_or_default().to_owned(),
                r["caller"].as_str().unwrap_or_default().to_owned(),
                r["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let s = |op: &str, caller: &str, outcome: &str| (op.into(), caller.into(), outcome.into());
    assert_eq!(
        summary,
        vec![
            s("create_journey", "caller-a", "ok"),
            s("read_result", "caller-b", "JOURNEY_NOT_OWNED"),
            s("session_3d", "caller-a", "ok"),
            s("verify_3d", "caller-a", "ok"),
            s("documents", "caller-a", "ok"),
            s("read_result", "caller-a", "ok"),
            s("watch", "caller-a", "ok"),
            s("watch_result", "caller-a", "ok"),
        ],
        "{text}"
    );
    let reads: Vec<&Value> = records
        .iter()
        .filter(|r| r["operation"] == "read_result" || r["operation"] == "watch_result")
        .collect();
    assert!(reads.iter().all(|r| r["view"] == "full"), "{reads:?}");
    let person = samples::HAPPY_PERSON;
    for record in &records {
        let line = record.to_string();
        for value in [
            appkey.as_str(),
            session_token.as_str(),
            person.cpf,
            person.name,
            a.as_str(),
            b.as_str(),
            "svc-a",
        ] {
            assert!(!line.contains(value), "a value in an audit record: {line}");
        }
    }
}

/// The `idgate::audit` records among `text`'s JSON lines.
fn audit_records(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "idgate::audit")
        .collect()
}

/// (operation, caller, outcome) of each record.
fn summary(records: &[Value]) -> Vec<(String, String, String)> {
    let field = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_owned();
    records
        .iter()
        .map(|r| {
            (
                field(r, "operation"),
                field(r, "caller"),
                field(r, "outcome"),
            )
        })
        .collect()
}

const REFUSED_CALLERS: &str = r#"
    [[callers]]
    name = "caller-a"
    jwt_subject = "svc-a"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "challenges_2d", "read_result", "watch"]
    max_watch_streams = 1

    [[callers]]
    name = "caller-b"
    jwt_subject = "svc-b"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "read_result"]
"#;

#[tokio::test]
async fn each_refusal_of_an_authenticated_caller_and_create_challenges_leave_one_record_named_as_callers_operations_name_them()
 {
    let (logs, _guard) = quiet_telemetry();
    let key = TestKey::es256("refusals");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| with_owners_text(c, auth, REFUSED_CALLERS)).await;
    let (a, b, stranger) = (key.token("svc-a"), key.token("svc-b"), key.token("svc-z"));
    let created = gw
        .journeys()
        .create_journey(bearer(&a, happy_person()))
        .await
        .expect("create")
        .into_inner();
    let read = |token: &str| {
        bearer(
            token,
            v1::GetJourneyResultRequest {
                appkey: created.appkey.clone(),
            },
        )
    };
    // CALLER_UNKNOWN: a valid token no [[callers]] entry names.
    gw.journeys()
        .get_journey_result(read(&stranger))
        .await
        .expect_err("unknown");
    // OPERATION_NOT_ALLOWED: B may not watch.
    gw.journeys()
        .watch_journey(bearer(&b, by_ref(&created.journey_ref)))
        .await
        .expect_err("not allowed");
    // PROFILE_NOT_ALLOWED: a profile outside B's grant.
    gw.journeys()
        .create_journey(bearer(
            &b,
            v1::CreateJourneyRequest {
                operator_profile: "premium".into(),
                ..happy_person()
            },
        ))
        .await
        .expect_err("profile");
    // JOURNEY_NOT_OWNED.
    gw.journeys()
        .get_journey_result(read(&b))
        .await
        .expect_err("not owned");
    // CALLER_LIMIT_REACHED: A's second watch stream.
    let open = gw
        .journeys()
        .watch_journey(bearer(&a, by_ref(&created.journey_ref)))
        .await
        .expect("A's one stream");
    gw.journeys()
        .watch_journey(bearer(&a, by_ref(&created.journey_ref)))
        .await
        .expect_err("past A's streams");
    drop(open);
    // CreateChallenges is audited like every personal-data call, under
    // the operation [[callers]] allows it by (`challenges_2d`).
    gw.liveness()
        .create_challenges(bearer(
            &a,
            v1::CreateChallengesRequest {
                appkey: created.appkey.clone(),
            },
        ))
        .await
        .expect("A's challenges");
    gw.stop().await;

    let text = logs.contents();
    let records = audit_records(&text);
    let s = |op: &str, caller: &str, outcome: &str| (op.into(), caller.into(), outcome.into());
    assert_eq!(
        summary(&records),
        vec![
            s("create_journey", "caller-a", "ok"),
            // The RPC's operation from the table, as [[callers]] names it.
            s("read_result", "", "CALLER_UNKNOWN"),
            s("watch", "caller-b", "OPERATION_NOT_ALLOWED"),
            s("create_journey", "caller-b", "PROFILE_NOT_ALLOWED"),
            s("read_result", "caller-b", "JOURNEY_NOT_OWNED"),
            s("watch", "caller-a", "ok"),
            s("watch", "caller-a", "CALLER_LIMIT_REACHED"),
            s("challenges_2d", "caller-a", "ok"),
        ],
        "{text}"
    );
    assert_eq!(records[1]["identity"], "jwt", "the identity's kind only");
    let person = samples::HAPPY_PERSON;
    for record in &records {
        let line = record.to_string();
        for value in [
            created.appkey.as_str(),
            person.cpf,
            person.name,
            a.as_str(),
            b.as_str(),
            stranger.as_str(),
            "svc-",
        ] {
            assert!(!line.contains(value), "a value in an audit record: {line}");
        }
    }
}

#[tokio::test]
async fn a_call_its_client_abandoned_after_the_upstream_send_leaves_one_cancelled_record() {
    use idgate::{
        domain::Operation,
        sandbox::{FaultAction, FaultRule},
    };
    let (logs, _guard) = quiet_telemetry();
    let gw = TestGateway::start().await;
    let created = gw.create_journey_for(happy_person()).await;
    // The vendor holds the upload long enough for the client to give up.
    gw.sandbox()
        .add_fault(FaultRule {
            operation: Some(Operation::DocumentImages.as_str().to_owned()),
            latency_ms: 60_000,
            ..FaultRule::new(FaultAction::Delay)
        })
        .expect("fault");
    let mut documents = gw.documents();
    let appkey = created.appkey.clone();
    let upload = tokio::spawn(async move {
        documents
            .submit_document_images(v1::SubmitDocumentImagesRequest {
                appkey,
                images: rg_images(),
            })
            .await
    });
    eventually("the vendor received the upload", EVENT_WAIT, async || {
        gw.sandbox().calls(Operation::DocumentImages, None) == 1
    })
    .await;
    upload.abort();
    let _ = upload.await;
    let documents = || {
        audit_records(&logs.contents())
            .into_iter()
            .filter(|r| r["operation"] == "documents")
            .collect::<Vec<_>>()
    };
    eventually("the cancelled call's record", EVENT_WAIT, async || {
        !documents().is_empty()
    })
    .await;
    gw.stop().await;
    let records = documents();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "cancelled");
    assert_eq!(records[0]["upstream"], "document_images");
    assert_eq!(records[0]["journey_ref"], created.journey_ref.as_str());
}

#[tokio::test]
async fn a_process_killed_right_after_a_call_has_already_written_its_record() {
    use crate::support::process::{ServeProcess, quick_serve_config};
    use idgate::proto::v1::journey_service_client::JourneyServiceClient;
    let dir = crate::support::temp::dir("audit-kill");
    let config = quick_serve_config(dir.path(), "");
    let serve = ServeProcess::start(&config);
    let grpc = serve.field("idgate listening", "grpc");
    let mut client = JourneyServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let created = client
        .create_journey(happy_person())
        .await
        .expect("create")
        .into_inner();
    // Served either way (the result is not there yet: NOT_FOUND).
    let _ = client
        .get_journey_result(v1::GetJourneyResultRequest {
            appkey: created.appkey.clone(),
        })
        .await;
    serve.signal("KILL");
    let lines = serve.lines_to_end(EVENT_WAIT);
    let audited: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("personal data access"))
        .collect();
    assert_eq!(audited.len(), 2, "{lines:#?}");
    assert!(audited[0].contains("create_journey"), "{audited:?}");
    assert!(audited[1].contains("read_result"), "{audited:?}");
    for line in audited {
        assert!(!line.contains(&created.appkey), "{line}");
    }
}

/// `request` carrying `baggage: idgate.journey_ref=<journey>`, and the
/// bearer `token` when given.
fn with_baggage<T>(request: T, token: Option<&str>, journey: &str) -> tonic::Request<T> {
    let mut request = match token {
        Some(token) => bearer(token, request),
        None => tonic::Request::new(request),
    };
    let baggage = format!("idgate.journey_ref={journey}");
    request
        .metadata_mut()
        .insert("baggage", baggage.parse().expect("baggage"));
    request
}

#[tokio::test]
async fn the_journey_reference_in_the_baggage_of_an_unauthenticated_or_unknown_caller_is_in_no_log_line_or_record()
 {
    // Every line: INFO, and the access log on.
    let (logs, _guard) = crate::support::telemetry::quiet_telemetry_at("info");
    let key = TestKey::es256("baggage");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| {
        with_owners_text(c, auth, REFUSED_CALLERS);
        c.telemetry.access_log = true;
    })
    .await;
    let (a, stranger) = (key.token("svc-a"), key.token("svc-z"));
    // Another journey's reference, put in the logs by whoever may not
    // name it; and one sent by a known caller, which its lines carry.
    let (smuggled, trusted) = ("j-5eed5eed5eed5eed", "j-0a0a0a0a0a0a0a0a");
    let read = || v1::GetJourneyResultRequest {
        appkey: "not-an-issued-appkey".into(),
    };
    let refused = gw
        .journeys()
        .get_journey_result(with_baggage(read(), None, smuggled))
        .await
        .expect_err("no credential");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let refused = gw
        .journeys()
        .get_journey_result(with_baggage(read(), Some(&stranger), smuggled))
        .await
        .expect_err("no [[callers]] entry");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    // A path that is no RPC, whose last segment is the reference: the
    // record names no path segment.
    let channel = tonic::transport::Endpoint::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.expect("ready");
    let path = format!("/idgate.v1.JourneyService/{smuggled}");
    let refused = raw
        .unary(
            with_baggage((), Some(&stranger), smuggled),
            http::uri::PathAndQuery::try_from(path).expect("path"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .expect_err("no [[callers]] entry");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    // No appkey: the call names no journey of its own, so its lines keep
    // the baggage's.
    gw.journeys()
        .get_journey_result(with_baggage(
            v1::GetJourneyResultRequest::default(),
            Some(&a),
            trusted,
        ))
        .await
        .expect_err("no appkey");
    gw.stop().await;

    let text = logs.contents();
    assert!(!text.contains(smuggled), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(trusted) && l.contains("read_result")),
        "a known caller's baggage is still recorded: {text}"
    );
    let unknown: Vec<Value> = audit_records(&text)
        .into_iter()
        .filter(|r| r["outcome"] == "CALLER_UNKNOWN")
        .collect();
    let operations: Vec<&str> = unknown
        .iter()
        .map(|r| r["operation"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(operations, ["read_result", "unknown"], "{text}");
    assert!(unknown.iter().all(|r| r["journey_ref"] == ""), "{text}");
}

#[tokio::test]
async fn the_journey_reference_in_the_baggage_of_a_refused_webhook_is_in_no_log_line() {
    // Every line: INFO; the refused delivery is said once.
    let (logs, _guard) = crate::support::telemetry::quiet_telemetry_at("info");
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(crate::support::webhook::USER.into());
        c.webhook.basic_password_file = Some(crate::support::gateway::secret_file(
            crate::support::webhook::PASSWORD,
        ));
        c.sandbox.webhook.enabled = false;
    })
    .await;
    let smuggled = "j-5eed5eed5eed5eed";
    let response = crate::support::net::http_client()
        .post(gw.webhook_url())
        .basic_auth(crate::support::webhook::USER, Some("guessed"))
        .header("baggage", format!("idgate.journey_ref={smuggled}"))
        .header("content-type", "application/json")
        .body(r#"{"appkey":"not-issued","status":"Completo"}"#)
        .send()
        .await
        .expect("the webhook answers");
    assert_eq!(response.status().as_u16(), 401);
    gw.stop().await;
    let text = logs.contents();
    assert!(
        text.lines().any(|l| l.contains("credentials_invalid")
            || l.contains("refused")
            || l.contains("rejected")),
        "the refusal is logged: {text}"
    );
    assert!(!text.contains(smuggled), "{text}");
}
