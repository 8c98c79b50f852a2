//! Bounds on what one peer can hold or send (issue 25), over real
//! sockets: a watch on a journey the service keeps answering 404 for ends,
//! every stream ends at its lifetime, one connection cannot hold every
//! watch slot; the HTTP listener caps its requests in flight (but for
//! `/healthz`), and a webhook with wrong Basic credentials is refused
//! before its body is read. Ends are awaited on the stream or the socket
//! itself, never by sleeping.

use base64::Engine as _;
use idgate::proto::v1;
use idgate::testing::GatewayParts as _;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};
use tonic::Code;

use crate::support::{
    gateway::*,
    metrics,
    net::http_client,
    wait::{EVENT_WAIT, eventually},
    webhook::{PASSWORD, USER, status_code},
};

/// A gateway whose webhook receiver takes HTTP Basic only, and whose
/// sandbox sends no notices of its own (the tests post them).
async fn basic_only(edit: impl FnOnce(&mut idgate::config::Config)) -> TestGateway {
    TestGateway::start_with(|c| {
        c.webhook.basic_user = Some(USER.into());
        c.webhook.basic_password_file = Some(secret_file(PASSWORD));
        c.sandbox.webhook.enabled = false;
        edit(c);
    })
    .await
}

/// Sends the head of a webhook POST announcing a 1000-byte body, with
/// Basic credentials `user:password`, and none of the body.
async fn webhook_head_only(gw: &TestGateway, password: &str) -> TcpStream {
    let addr = gw.gateway.http_addr();
    let credentials =
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    let head = format!(
        "POST {WEBHOOK_PATH} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Basic {credentials}\r\n\
         content-type: application/json\r\ncontent-length: 1000\r\n\r\n"
    );
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.expect("send head");
    conn
}

#[tokio::test]
async fn a_stream_that_reaches_its_lifetime_ends_unavailable_and_may_watch_again() {
    let gw = TestGateway::start_with(|c| {
        c.watch.max_stream_secs = 1;
        c.watch.webhook_grace_secs = 3600;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    // No deadline of the caller's own: only the lifetime ends it.
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let (items, end) = drain(watcher).await;
    // At most the current state (still processing), never a result.
    assert_only_processing(&items);
    let end = end.expect("the stream ends with an error");
    assert_error(&end, Code::Unavailable, "WATCH_LIFETIME_REACHED");
    assert!(retryable(&end), "RetryInfo: watching again is safe");
    let watches = gw.gateway.watches();
    eventually("the watcher is released", EVENT_WAIT, async || {
        watches.stats().watchers == 0
    })
    .await;

    // Watching again goes on from the journey's latest state.
    let again = gw.watch(by_ref(&journey.journey_ref)).await;
    gw.finish_processing();
    let (items, _) = drain(again).await;
    assert_eq!(
        items.last().map(v1::WatchJourneyResponse::status),
        Some(v1::JourneyStatus::Complete)
    );
    gw.stop().await;
}

#[tokio::test]
async fn watch_streams_past_the_per_connection_cap_are_refused_while_other_connections_watch() {
    let gw = TestGateway::start_with(|c| {
        c.serving.max_streams_per_connection = 2;
        c.watch.webhook_grace_secs = 3600;
    })
    .await;
    let journey = gw.journey_in_processing().await;
    let first = gw.watch(by_appkey(&journey.appkey)).await;
    let _second = gw.watch(by_ref(&journey.journey_ref)).await;

    // Same connection (the test gateway's one channel): refused at once.
    let refused = gw
        .journeys()
        .watch_journey(by_appkey(&journey.appkey))
        .await
        .expect_err("the third stream on one connection is refused");
    assert_error(&refused, Code::ResourceExhausted, "WATCH_LIMIT_REACHED");
    assert_eq!(
        metrics::value(
            &gw.metrics_text().await,
            "idgate_rpc_shed_total",
            &[("limit", "streams_per_connection")]
        ),
        1.0,
        "counted"
    );

    // Another connection has slots of its own.
    let other = connect(gw.gateway.grpc_url()).await;
    let mut client = v1::journey_service_client::JourneyServiceClient::new(other);
    let _third = client
        .watch_journey(by_appkey(&journey.appkey))
        .await
        .expect("another connection watches");

    // A slot freed on the first connection is usable again.
    drop(first);
    eventually("the slot is freed", EVENT_WAIT, async || {
        gw.journeys()
            .watch_journey(by_appkey(&journey.appkey))
            .await
            .is_ok()
    })
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_webhook_with_wrong_basic_credentials_is_refused_before_its_body_is_read() {
    let gw = basic_only(|_| {}).await;
    // The body is announced and never sent: only a refusal on the headers
    // can answer (reading it would wait, then answer 400, not 401).
    let mut conn = webhook_head_only(&gw, "not-the-webhook-password").await;
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(EVENT_WAIT, conn.read(&mut answer))
        .await
        .expect("answered without the body")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert_eq!(status_code(&answer), 401, "{answer}");
    assert!(answer.contains("credentials_invalid"), "{answer}");
    assert_eq!(gw.webhook_metric("rejected_credentials_invalid").await, 1);
    assert_eq!(gw.webhook_metric("body_read").await, 0, "no body read");

    // Missing credentials: refused the same way.
    let missing = http_client()
        .post(gw.webhook_url())
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(missing.status(), 401);
    assert_eq!(gw.webhook_metric("body_read").await, 0);

    // The right credentials: the body is read (and found malformed).
    let right = http_client()
        .post(gw.webhook_url())
        .basic_auth(USER, Some(PASSWORD))
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(right.status(), 400);
    assert_eq!(gw.webhook_metric("body_read").await, 1);
    gw.stop().await;
}

#[tokio::test]
async fn the_http_listener_answers_503_past_its_in_flight_cap_while_healthz_answers() {
    let gw = basic_only(|c| c.serving.http_max_in_flight = 1).await;
    let client = http_client();
    let metrics = format!("{}/metrics", gw.http_url());
    // Authenticated, waiting for a body that does not come: in flight.
    let held = webhook_head_only(&gw, PASSWORD).await;
    eventually("/metrics is refused", EVENT_WAIT, async || {
        let r = client.get(&metrics).send().await.expect("answer");
        r.status() == 503 && r.headers().get("retry-after").is_some()
    })
    .await;
    let healthz = client
        .get(format!("{}/healthz", gw.http_url()))
        .send()
        .await
        .expect("healthz answers");
    assert_eq!(healthz.status(), 200);

    drop(held);
    eventually("the slot is freed", EVENT_WAIT, async || {
        client.get(&metrics).send().await.expect("answer").status() == 200
    })
    .await;
    let text = gw.metrics_text().await;
    let shed = metrics::series(&text, "idgate_http_shed_total");
    assert!(shed >= 1.0, "{text}");
    gw.stop().await;
}
