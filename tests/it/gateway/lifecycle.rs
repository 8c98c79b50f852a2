//! The lifecycle of `docs/upstream.md#timing-and-state-rules`, as the
//! gateway's callers see it:
//! credential refresh, appkey expiry, the 60 s challenge window, binding by
//! `/captcha`, the single use of `/3d/liveness`, document re-uploads and
//! the result before a liveness proof. Time moves on the sandbox's
//! `ManualClock`; nothing sleeps.

use idgate::testing::{CredentialsParts as _, GatewayParts as _};
use std::time::Duration;

use crate::support::gateway::*;
use idgate::{
    domain::Operation,
    proto::v1,
    sandbox::samples::{self, DocumentType, LivenessOutcome},
};
use tonic::Code;

/// Just past the sandbox's credential validity (3 h).
const PAST_CREDENTIAL_TTL: Duration = Duration::from_secs(3 * 3600 + 1);
/// Just past the sandbox's appkey validity (5 min).
const PAST_APPKEY_TTL: Duration = Duration::from_secs(5 * 60 + 1);

#[tokio::test]
async fn a_credential_expired_upstream_is_refreshed_on_the_401_with_one_extra_exchange() {
    let gw = TestGateway::start().await;
    let credentials = gw.gateway.core().credentials();
    gw.create_journey().await;
    assert_eq!(credentials.exchanges(), 1);
    assert_eq!(gw.calls(Operation::Credential), 1);

    // The sandbox's token expires; the gateway's cache still holds it.
    gw.clock.advance(PAST_CREDENTIAL_TTL);
    let appkey = gw.create_journey().await;

    assert_eq!(credentials.exchanges(), 2, "exactly one extra exchange");
    assert_eq!(gw.calls(Operation::Credential), 2);
    // The stale token's /appkey answered 401, then one retry.
    assert_eq!(gw.calls(Operation::Appkey), 3);
    // The new appkey is alive.
    gw.challenges(&appkey).await.expect("new appkey works");
    gw.stop().await;
}

#[tokio::test]
async fn a_credential_expired_in_the_cache_is_exchanged_again_before_appkey() {
    let gw = TestGateway::start().await;
    let credentials = gw.gateway.core().credentials();
    gw.create_journey().await;
    gw.create_journey().await;
    assert_eq!(credentials.exchanges(), 1, "cached between journeys");

    credentials.expire_now();
    let appkey = gw.create_journey().await;

    assert_eq!(credentials.exchanges(), 2);
    assert_eq!(gw.calls(Operation::Credential), 2);
    assert_eq!(gw.calls(Operation::Appkey), 3, "no 401 round trip");
    gw.challenges(&appkey).await.expect("new appkey works");
    gw.stop().await;
}

#[tokio::test]
async fn an_expired_appkey_is_unauthenticated_appkey_expired_everywhere() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.clock.advance(PAST_APPKEY_TTL);

    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert!(!retryable(&err));
    assert!(!err.message().contains(&appkey));

    let err = gw
        .run_3d(&appkey, samples::USER_AGENT_VALID)
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");

    let err = gw
        .submit_images(&appkey, &document_pair(DocumentType::Rg))
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");

    let err = gw
        .submit_licence(
            &appkey,
            v1::submit_digital_licence_request::Licence::Pdf(samples::digital_licence_pdf().into()),
        )
        .await
        .unwrap_err();
    assert_error(
        &err,
        Code::Unauthenticated,
        "APPKEY_EXPIRED_OR_LICENCE_REJECTED",
    );

    // Each was sent once: a 401 is not retried, and a 3D session refused
    // with 401 does not fail over to the other channel.
    assert_eq!(gw.calls(Operation::Challenge), 1);
    assert_eq!(gw.calls(Operation::DocumentImages), 1);
    assert_eq!(gw.calls(Operation::DigitalLicence), 1);
    let sessions: u64 = gw
        .sandbox()
        .all_calls()
        .iter()
        .filter(|c| c.operation == Operation::SessionToken3D.as_str())
        .map(|c| c.count)
        .sum();
    assert_eq!(sessions, 1);
    gw.stop().await;
}

#[tokio::test]
async fn challenges_are_void_after_60_seconds_and_new_ones_can_be_generated() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let ch = gw.challenges(&appkey).await.expect("challenges");
    gw.clock.advance(Duration::from_secs(61));

    let err = gw
        .answer_challenges(&appkey, &ch, LivenessOutcome::Valid)
        .await
        .unwrap_err();
    // A 401 from /captcha: the documented mapping of a 401 on an appkey
    // operation (the appkey or its challenges are expired or void).
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert!(!retryable(&err));
    assert_eq!(gw.calls(Operation::Captcha), 1, "sent once, not retried");

    // The appkey is not bound: new challenges work within their window.
    let fresh = gw.challenges(&appkey).await.expect("new challenges");
    gw.clock.advance(Duration::from_secs(59));
    let verdict = gw
        .answer_challenges(&appkey, &fresh, LivenessOutcome::Valid)
        .await
        .expect("proof inside the window");
    assert!(verdict.valid);
    gw.stop().await;
}

#[tokio::test]
async fn a_bound_appkey_refuses_a_second_captcha_new_challenges_and_3d_sessions() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let ch = gw.challenges(&appkey).await.expect("challenges");
    let verdict = gw
        .answer_challenges(&appkey, &ch, LivenessOutcome::Valid)
        .await
        .expect("first proof");
    assert!(verdict.valid);

    let err = gw
        .answer_challenges(&appkey, &ch, LivenessOutcome::Valid)
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");

    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");

    let err = gw
        .run_3d(&appkey, samples::USER_AGENT_VALID)
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");

    assert_eq!(gw.calls(Operation::Captcha), 2);
    // The first proof stands.
    let state = gw.sandbox().appkey_state(&appkey).expect("known appkey");
    assert_eq!(state.liveness, Some(LivenessOutcome::Valid));
    gw.stop().await;
}

#[tokio::test]
async fn a_second_3d_liveness_is_refused_and_the_appkey_is_finished() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let mut l = gw.liveness();
    let session = l
        .start_session3_d(v1::StartSession3DRequest {
            appkey: appkey.clone(),
            user_agent: samples::USER_AGENT_VALID.into(),
        })
        .await
        .expect("session")
        .into_inner();
    let verify = v1::VerifyLiveness3DRequest {
        appkey: appkey.clone(),
        session_token: session.session_token.clone(),
        channel: session.channel.clone(),
    };
    let first = l
        .verify_liveness3_d(verify.clone())
        .await
        .expect("first verification")
        .into_inner()
        .verdict
        .expect("verdict");
    assert!(first.valid);

    let err = l.verify_liveness3_d(verify).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert_eq!(
        gw.sandbox()
            .calls(Operation::Liveness3D, Some(session.channel.as_str())),
        2,
        "each verification sent once, on the issuing channel"
    );

    // A new 3D session needs a new appkey.
    let err = gw
        .run_3d(&appkey, samples::USER_AGENT_VALID)
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    let other = gw.create_journey().await;
    assert!(gw.run_3d(&other, samples::USER_AGENT_VALID).await.is_ok());
    gw.stop().await;
}

#[tokio::test]
async fn an_unusable_document_upload_keeps_the_appkey_usable_until_it_expires() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;

    let err = gw
        .submit_images(&appkey, &[samples::no_document_image()])
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "DOCUMENT_UNUSABLE");
    assert!(!retryable(&err));

    // Same appkey, new images: accepted and processed.
    let images = document_pair(DocumentType::Dni);
    gw.submit_images(&appkey, &images).await.expect("accepted");
    gw.finish_processing();
    let result = gw.result(&appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    assert!(result.document_analysis.unwrap().ocr.unwrap().dni.is_some());

    // ... until the appkey expires: then 401.
    let other = gw.create_journey().await;
    gw.pass_3d(&other).await;
    let err = gw
        .submit_images(&other, &[samples::no_document_image()])
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "DOCUMENT_UNUSABLE");
    gw.clock.advance(PAST_APPKEY_TTL);
    let err = gw.submit_images(&other, &images).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert_eq!(gw.calls(Operation::DocumentImages), 4, "each sent once");

    // The first journey's result stays readable after its appkey expired.
    let result = gw.result(&appkey).await.expect("result after expiry");
    assert_eq!(result.status(), v1::JourneyStatus::Complete);
    gw.stop().await;
}

#[tokio::test]
async fn the_result_before_any_liveness_proof_is_not_found() {
    // The unknown appkey below reaches the sandbox only when foreign
    // appkeys are accepted (else JOURNEY_UNKNOWN: tests/it/auth/foreign.rs).
    let gw = TestGateway::start_with(|c| c.journeys.accept_foreign_appkeys = true).await;
    let appkey = gw.create_journey().await;
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::NotFound, "RESULT_NOT_AVAILABLE");
    assert!(!retryable(&err));

    let err = gw.result("unknown-appkey-0000").await.unwrap_err();
    assert_error(&err, Code::NotFound, "RESULT_NOT_AVAILABLE");
    assert_eq!(gw.calls(Operation::Result), 2, "a 404 is not retried");

    // Once the proof is made, the result is there (documents not yet).
    gw.pass_3d(&appkey).await;
    let result = gw.result(&appkey).await.expect("result");
    assert_eq!(result.status(), v1::JourneyStatus::NotProcessed);
    assert!(result.document_analysis.is_none());
    gw.stop().await;
}

#[tokio::test]
async fn an_appkey_generates_many_challenges_before_the_captcha() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let mut sets = Vec::new();
    for _ in 0..5 {
        sets.push(gw.challenges(&appkey).await.expect("challenges"));
    }
    let keys: std::collections::HashSet<_> = sets.iter().map(|s| &s.challenge_key).collect();
    assert_eq!(keys.len(), 5, "each set has its own key");
    assert_eq!(
        gw.sandbox().appkey_state(&appkey).unwrap().open_challenges,
        5
    );

    // Any of them can carry the proof, which then binds the appkey.
    let chosen = &sets[2];
    let verdict = gw
        .answer_challenges(&appkey, chosen, LivenessOutcome::Valid)
        .await
        .expect("proof");
    assert!(verdict.valid);
    let state = gw.sandbox().appkey_state(&appkey).unwrap();
    assert_eq!(state.open_challenges, 0);
    assert_eq!(state.liveness, Some(LivenessOutcome::Valid));
    gw.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_journeys_on_a_fresh_gateway_share_one_credential_exchange() {
    let gw = TestGateway::start().await;
    let calls = (0..50).map(|_| {
        let mut client = gw.journeys();
        async move { client.create_journey(happy_person()).await }
    });
    let results = futures_util::future::join_all(calls).await;
    let appkeys: std::collections::HashSet<String> = results
        .into_iter()
        .map(|r| r.expect("journey created").into_inner().appkey)
        .collect();
    assert_eq!(appkeys.len(), 50, "fifty distinct appkeys");
    assert_eq!(gw.calls(Operation::Credential), 1, "one /credencial");
    assert_eq!(gw.gateway.core().credentials().exchanges(), 1);
    assert_eq!(gw.calls(Operation::Appkey), 50);
    gw.stop().await;
}
