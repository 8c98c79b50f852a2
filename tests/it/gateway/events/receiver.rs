//! The webhook receiver: a forged, unauthenticated, stale, malformed or
//! oversize notice is refused with its own reason and wakes nothing, and
//! the same delivery twice is processed once.

use base64::Engine as _;
use idgate::proto::v1;
use idgate::testing::GatewayParts as _;
use reqwest::StatusCode;

use super::{assert_ends_complete, basic};
use crate::support::{
    gateway::*,
    net::http_client,
    webhook::{
        PASSWORD as BASIC_PASSWORD, SECRET, USER as BASIC_USER, notice as notice_body, now_unix,
        post_chunked,
    },
};

async fn json(response: reqwest::Response) -> serde_json::Value {
    let bytes = response.bytes().await.expect("response body");
    serde_json::from_slice(&bytes).expect("a JSON answer")
}

/// A notice signed with `secret`, as a Standard Webhooks sender sends it.
fn signed(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &str,
) -> reqwest::RequestBuilder {
    crate::support::webhook::signed(client.post(url), secret, id, timestamp, body)
}

/// A gateway that authenticates notices by Basic and by signature, whose
/// sandbox does not send its own (the tests post them), with one journey
/// watched (by `watch`) from before its proof and whose processing is
/// finished: the watch waits for a notice, and any notice that got
/// through would complete it at once.
async fn gateway_with_finished_journey(
    edit: impl FnOnce(&mut idgate::config::Config),
    watch: impl FnOnce(&v1::CreateJourneyResponse) -> v1::WatchJourneyRequest,
) -> (
    TestGateway,
    v1::CreateJourneyResponse,
    tonic::Streaming<v1::WatchJourneyResponse>,
) {
    let gw = TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(BASIC_USER.into());
        c.webhook.basic_password_file = Some(secret_file(BASIC_PASSWORD));
        c.webhook.hmac_secret_file = Some(secret_file(SECRET));
        c.watch.webhook_grace_secs = 3600;
        c.sandbox.webhook.enabled = false;
        edit(c);
    })
    .await;
    let (journey, watcher) = gw.watched_journey_in_processing(watch).await;
    gw.finish_processing();
    (gw, journey, watcher)
}

#[tokio::test]
async fn forged_unauthenticated_stale_or_oversize_webhooks_are_refused_and_trigger_nothing() {
    let (gw, journey, watcher) = gateway_with_finished_journey(
        |c| c.webhook.max_body_bytes = 1024,
        |j| by_appkey(&j.appkey),
    )
    .await;
    let client = http_client();
    let url = gw.webhook_url();
    let body = notice_body("Completo", &journey.appkey);
    let other_secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([7u8; 32])
    );
    let oversize = serde_json::json!({
        "Status": "Completo",
        "Appkey": journey.appkey,
        "Padding": "x".repeat(2048),
    })
    .to_string();

    let refusals: Vec<(&str, reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            "no credentials",
            client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone()),
            StatusCode::UNAUTHORIZED,
            "credentials_missing",
        ),
        (
            "wrong Basic password",
            basic(&client, &url, "guessed", &body),
            StatusCode::UNAUTHORIZED,
            "credentials_invalid",
        ),
        (
            "signed with another secret",
            signed(
                &client,
                &url,
                &other_secret,
                "msg_forged",
                now_unix(),
                &body,
            ),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "body changed after signing",
            signed(&client, &url, SECRET, "msg_tampered", now_unix(), &body)
                .body(notice_body("Erro", &journey.appkey)),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "signature without its id and timestamp",
            client
                .post(&url)
                .header("webhook-signature", "v1,AAAA")
                .body(body.clone()),
            StatusCode::UNAUTHORIZED,
            "signature_invalid",
        ),
        (
            "signed ten minutes ago",
            signed(&client, &url, SECRET, "msg_stale", now_unix() - 600, &body),
            StatusCode::UNAUTHORIZED,
            "timestamp_out_of_window",
        ),
        (
            "signed ten minutes ahead",
            signed(&client, &url, SECRET, "msg_future", now_unix() + 600, &body),
            StatusCode::UNAUTHORIZED,
            "timestamp_out_of_window",
        ),
        (
            "not JSON",
            basic(&client, &url, BASIC_PASSWORD, "Status=Completo"),
            StatusCode::BAD_REQUEST,
            "malformed_body",
        ),
        (
            "a status that is not an ending",
            basic(
                &client,
                &url,
                BASIC_PASSWORD,
                &notice_body("Em processamento", &journey.appkey),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_status",
        ),
        (
            "oversize body with valid credentials",
            basic(&client, &url, BASIC_PASSWORD, &oversize),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
    ];
    for (case, request, status, reason) in refusals {
        let response = request.send().await.expect("the gateway answers");
        assert_eq!(response.status(), status, "{case}");
        assert!(response.status().is_client_error(), "{case}");
        let answer = json(response).await;
        assert_eq!(answer["error"]["reason"], reason, "{case}");
        let answer = answer.to_string();
        assert!(!answer.contains(&journey.appkey), "{case}: {answer}");
    }

    // Oversize without a declared length: the limit applies while reading.
    let chunked = chunked_post(&gw, &oversize).await;
    assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");
    assert!(chunked.contains("payload_too_large"), "{chunked}");

    // The watches was never told, so nothing was read and the watcher sleeps.
    let stats = gw.gateway.watches().stats();
    assert_eq!(stats.notices_received, 0);
    assert_eq!(stats.result_reads, 0);
    assert_eq!(gw.result_reads(), 0);
    assert_eq!((stats.journeys, stats.watchers), (1, 1));
    assert_eq!(gw.webhook_metric("accepted").await, 0);
    assert_eq!(
        gw.webhook_metric("rejected_timestamp_out_of_window").await,
        2
    );
    assert_eq!(gw.webhook_metric("rejected_signature_invalid").await, 3);
    assert_eq!(gw.webhook_metric("rejected_payload_too_large").await, 2);
    assert_eq!(gw.webhook_metric("rejected_credentials_missing").await, 1);
    assert_eq!(gw.webhook_metric("rejected_credentials_invalid").await, 1);
    assert_eq!(gw.webhook_metric("rejected_malformed_body").await, 1);
    assert_eq!(gw.webhook_metric("rejected_unknown_status").await, 1);

    // The same notice, correctly signed and fresh, is what wakes it.
    let response = signed(&client, &url, SECRET, "msg_genuine", now_unix(), &body)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let watched = drain(watcher).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(watched.0.len(), 1);
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
}

/// POSTs `body` with valid Basic credentials in chunked encoding (no
/// content-length) to the gateway's webhook path; returns the raw answer.
async fn chunked_post(gw: &TestGateway, body: &str) -> String {
    post_chunked(gw.gateway.http_addr(), WEBHOOK_PATH, body.as_bytes()).await
}

#[tokio::test]
async fn the_same_delivery_twice_is_processed_once() {
    let (gw, journey, watcher) =
        gateway_with_finished_journey(|_| {}, |j| by_ref(&j.journey_ref)).await;
    let client = http_client();
    let url = gw.webhook_url();
    let body = notice_body("Completo", &journey.appkey);
    let ts = now_unix();

    let mut answers = Vec::new();
    for _ in 0..2 {
        let response = signed(&client, &url, SECRET, "msg_once", ts, &body)
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let answer = json(response).await;
        answers.push(answer["status"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(answers, ["accepted", "duplicate"]);
    // Without a webhook-id (the service's own deliveries), the journey and
    // status identify the delivery.
    for expected in ["accepted", "duplicate"] {
        let response = basic(
            &client,
            &url,
            BASIC_PASSWORD,
            &notice_body("Erro", &journey.appkey),
        )
        .send()
        .await
        .expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let answer = json(response).await;
        assert_eq!(answer["status"], expected);
    }

    let watched = drain(watcher).await;
    assert_ends_complete(&watched, &journey.journey_ref);
    assert_eq!(watched.0.len(), 1);
    assert_eq!(gw.gateway.watches().stats().notices_received, 2);
    assert_eq!(gw.webhook_metric("duplicate").await, 2);
    assert_eq!(gw.webhook_metric("accepted").await, 2);
    assert_eq!(gw.result_reads(), 1);
    gw.stop().await;
}
