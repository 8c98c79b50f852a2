//! Personal data and secrets stay in the request and response bodies:
//! canary values sent through whole 3D and 2D journeys, failing calls and
//! an expired appkey must not appear in logs, spans, metrics or errors.

use base64::Engine as _;
use idgate::{
    domain::{Appkey, JourneyRef},
    sandbox::OperatorConfig,
};

use super::*;
use crate::support::gateway::{self, reason};

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
