//! Who may deliver a notice: Basic credentials, HMAC signatures over the
//! raw body within the replay window, either when both are configured, and
//! no receiver at all without one unless explicitly allowed. A refused
//! notice wakes nothing and reads nothing.

use std::sync::atomic::Ordering;

use idgate::events::{JourneyWatches, RejectReason, WebhookReceiver, WebhookSettings};

use super::{
    CountingSource, assert_complete, basic, body, collect, hmac, now, send, start, watch_settings,
    webhook,
};
use crate::support::webhook::{PASSWORD, USER};

#[tokio::test]
async fn a_notice_with_valid_basic_credentials_is_accepted_and_completes_the_watcher() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let stream = gw.watch("key-1");
    let (status, json) = send(gw.post_basic(body("Completo", "key-1"))).await;
    assert_eq!(status, 202);
    assert_eq!(json["status"], "accepted");
    assert_complete(&collect(stream).await);
    assert_eq!(gw.source.reads("key-1"), 1);
    let stats = gw.receiver.stats();
    assert_eq!((stats.received, stats.accepted), (1, 1));
}

#[tokio::test]
async fn missing_or_forged_credentials_are_refused_and_trigger_nothing() {
    let gw = start(
        webhook(basic(), None),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");
    let response = gw.post(body("Completo", "key-1")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert!(response.headers().contains_key("www-authenticate"));
    let json: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(json["error"]["reason"], "credentials_missing");

    let forged = gw
        .post(body("Completo", "key-1"))
        .basic_auth(USER, Some("guessed"));
    let (status, json) = send(forged).await;
    assert_eq!(status, 401);
    assert_eq!(json["error"]["reason"], "credentials_invalid");
    // A signature is no substitute when HMAC is not configured.
    let (status, _) = send(gw.post_signed("msg_1", now(), body("Completo", "key-1"))).await;
    assert_eq!(status, 401);

    // The handler hands notices to the watches before it answers: none came.
    assert_eq!(gw.watches.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::CredentialsMissing), 2);
    assert_eq!(stats.rejected(RejectReason::CredentialsInvalid), 1);
    assert_eq!(stats.accepted, 0);
}

#[tokio::test]
async fn signed_notices_are_verified_over_the_raw_body_and_the_replay_window() {
    let gw = start(
        webhook(None, hmac()),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");

    let mut signature_over_other_body = gw.post_signed("msg_1", now(), body("Erro", "key-1"));
    signature_over_other_body = signature_over_other_body.body(body("Completo", "key-1"));
    let (status, json) = send(signature_over_other_body).await;
    assert_eq!(
        (status, json["error"]["reason"].as_str()),
        (401, Some("signature_invalid"))
    );

    // Re-serialised JSON is a different raw body, even if it means the same.
    let pretty =
        serde_json::to_vec_pretty(&serde_json::json!({"Status": "Completo", "Appkey": "key-1"}))
            .unwrap();
    let reformatted = gw
        .post_signed("msg_2", now(), body("Completo", "key-1"))
        .body(pretty);
    assert_eq!(send(reformatted).await.0, 401);

    for skew in [-600, 600] {
        let (status, json) =
            send(gw.post_signed("msg_3", now() + skew, body("Completo", "key-1"))).await;
        assert_eq!(status, 401);
        assert_eq!(json["error"]["reason"], "timestamp_out_of_window");
    }
    let unsigned = gw
        .post(body("Completo", "key-1"))
        .basic_auth(USER, Some(PASSWORD));
    assert_eq!(send(unsigned).await.0, 401);
    assert_eq!(gw.watches.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);

    let (status, _) = send(gw.post_signed("msg_4", now() - 60, body("Completo", "key-1"))).await;
    assert_eq!(status, 202);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::SignatureInvalid), 2);
    assert_eq!(stats.rejected(RejectReason::TimestampOutOfWindow), 2);
    assert_eq!(stats.rejected(RejectReason::CredentialsMissing), 1);
    assert_eq!(stats.accepted, 1);
}

#[tokio::test]
async fn either_method_is_enough_when_both_are_configured() {
    let gw = start(
        webhook(basic(), hmac()),
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    assert_eq!(
        send(gw.post_signed("msg_1", now(), body("Completo", "key-2")))
            .await
            .0,
        202
    );
    let (status, json) = send(gw.post(body("Completo", "key-3"))).await;
    assert_eq!(
        (status, json["error"]["reason"].as_str()),
        (401, Some("credentials_missing"))
    );
    assert_eq!(gw.watches.stats().notices_received, 2);
}

#[tokio::test]
async fn a_receiver_without_authentication_is_refused_unless_explicitly_allowed() {
    let watches = JourneyWatches::new(CountingSource::default(), watch_settings());
    let err = WebhookReceiver::new(webhook(None, None), watches.clone()).unwrap_err();
    assert!(err.to_string().contains("allow_unauthenticated"), "{err}");

    let open = WebhookSettings {
        allow_unauthenticated: true,
        ..webhook(None, None)
    };
    let gw = start(open, watch_settings(), CountingSource::default()).await;
    assert_eq!(send(gw.post(body("Completo", "key-1"))).await.0, 202);
}
