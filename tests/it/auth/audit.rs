//! The audit trail over real sockets: one `idgate::audit` record per call
//! that submits or releases personal data (and one per result a watch
//! delivers), logged even at WARN, naming caller, operation, journey
//! reference, view and outcome, and never a value.

use idgate::{proto::v1, sandbox::samples};
use serde_json::Value;

use super::owners::with_owners;
use crate::support::{
    gateway::{TestGateway, by_ref, drain_within, happy_person, rg_images},
    jwt::{TestKey, bearer, jwks_file, jwt_auth},
    telemetry::quiet_telemetry,
    wait::EVENT_WAIT,
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
