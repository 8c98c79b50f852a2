//! The completion webhook: delivery, retry, authentication, signature.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine as _;
use idgate::sandbox::samples::{
    self, DocumentKind, DocumentType, HAPPY_PERSON, LivenessOutcome, Side,
};
use idgate::sandbox::{SandboxConfig, WebhookConfig, WebhookStats, sign_webhook};
use tokio::sync::mpsc;

use crate::support::{
    net::{RefusingPort, http_client, serve},
    sandbox::{Env, config, start_on, start_with},
    wait::EVENT_WAIT,
};

/// One request the receiver saw.
#[derive(Debug)]
struct Seen {
    headers: HeaderMap,
    body: serde_json::Value,
    raw: bytes::Bytes,
}

struct Receiver {
    fail_first: usize,
    attempts: AtomicUsize,
    tx: mpsc::UnboundedSender<Seen>,
}

/// A webhook receiver on 127.0.0.1:0 that answers 500 to its first
/// `fail_first` requests, then 204; every request is reported on the
/// returned channel.
async fn receiver(fail_first: usize) -> (String, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = Arc::new(Receiver {
        fail_first,
        attempts: AtomicUsize::new(0),
        tx,
    });
    let app = Router::new()
        .route(
            "/hook",
            post(
                |State(s): State<Arc<Receiver>>, headers: HeaderMap, raw: bytes::Bytes| async move {
                    let n = s.attempts.fetch_add(1, Ordering::SeqCst);
                    let body = serde_json::from_slice(&raw).unwrap_or_default();
                    let _ = s.tx.send(Seen { headers, body, raw });
                    if n < s.fail_first {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::NO_CONTENT
                    }
                },
            ),
        )
        .with_state(state);
    let url = format!("http://{}/hook", serve(app).await);
    (url, rx)
}

fn webhook_config(url: String) -> SandboxConfig {
    SandboxConfig {
        webhook: WebhookConfig {
            url: Some(url),
            initial_backoff_ms: 10,
            max_backoff_ms: 20,
            ..WebhookConfig::default()
        },
        ..config()
    }
}

/// Awaits the next request, with a generous guard so a bug fails the test
/// instead of hanging it.
async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("webhook arrives")
        .expect("receiver alive")
}

/// Asserts that nothing more goes out, from the sandbox's own counters
/// rather than by listening for a while: once its driver has looked for
/// finished journeys at the clock's current time and no notice is in
/// flight (`idle`), the counters equal `expected` (no notice queued, no
/// attempt made since) and the receiver has seen nothing more (each
/// attempt reaches the receiver before its answer is counted).
async fn assert_no_more(env: &Env, rx: &mut mpsc::UnboundedReceiver<Seen>, expected: WebhookStats) {
    let now = idgate::sandbox::Clock::now(env.clock.as_ref()).unix_timestamp();
    let mut stats = env.sandbox.watch_webhook_stats();
    let settled = *tokio::time::timeout(
        EVENT_WAIT,
        stats.wait_for(|s| s.swept_to >= now && s.idle()),
    )
    .await
    .expect("the webhook driver settles")
    .expect("sandbox running");
    assert_eq!(
        WebhookStats {
            swept_to: settled.swept_to,
            ..expected
        },
        settled,
        "nothing more queued or attempted"
    );
    if let Ok(late) = rx.try_recv() {
        panic!("a late request reached the receiver: {late:?}");
    }
}

async fn finish_journey(env: &Env, image: Vec<u8>) -> String {
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    assert_eq!(env.upload(&appkey, &[image]).await.status, 200);
    env.advance(5);
    appkey
}

fn rg() -> Vec<u8> {
    samples::document_image(DocumentKind::new(DocumentType::Rg, Side::Front))
}

#[tokio::test]
async fn completion_webhook_is_retried_after_a_failed_attempt() {
    let (url, mut rx) = receiver(1).await;
    let env = start_with(webhook_config(url)).await;
    let appkey = finish_journey(&env, rg()).await;
    let first = next(&mut rx).await;
    let second = next(&mut rx).await;
    for seen in [&first, &second] {
        assert_eq!(seen.body["Status"], "Completo");
        assert_eq!(seen.body["Appkey"], appkey.as_str());
        assert_eq!(seen.headers["content-type"], "application/json");
    }
    let mut stats = env.sandbox.watch_webhook_stats();
    let stats = *stats.wait_for(|s| s.delivered == 1).await.expect("stats");
    assert_eq!((stats.queued, stats.attempts, stats.abandoned), (1, 2, 0));
    // The journey is announced once, however far the clock moves on.
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
    env.advance(60);
    assert_no_more(&env, &mut rx, stats).await;
}

#[tokio::test]
async fn webhook_is_not_sent_before_the_journey_finishes() {
    let (url, mut rx) = receiver(0).await;
    let env = start_with(webhook_config(url)).await;
    let early = env.appkey(HAPPY_PERSON).await;
    let late = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&early, LivenessOutcome::Valid).await;
    env.liveness_2d(&late, LivenessOutcome::Valid).await;
    env.upload(&early, &[rg()]).await;
    env.advance(3);
    env.upload(&late, &[rg()]).await;
    env.advance(2);
    // Only the early journey has finished: the driver's pass at this time
    // queues it alone.
    assert_eq!(next(&mut rx).await.body["Appkey"], early.as_str());
    let mut stats = env.sandbox.watch_webhook_stats();
    let now = *stats.wait_for(|s| s.delivered == 1).await.expect("stats");
    assert_eq!(now.queued, 1);
    env.advance(3);
    assert_eq!(next(&mut rx).await.body["Appkey"], late.as_str());
}

#[tokio::test]
async fn journey_resubmitted_while_processing_is_announced_once() {
    let (url, mut rx) = receiver(0).await;
    let env = start_with(webhook_config(url)).await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    assert_eq!(env.upload(&appkey, &[rg()]).await.status, 200);
    env.advance(3);
    // New images restart processing: the first submission never finishes.
    assert_eq!(env.upload(&appkey, &[rg()]).await.status, 200);
    env.advance(2);
    env.advance(3);
    let seen = next(&mut rx).await;
    assert_eq!(seen.body["Appkey"], appkey.as_str());
    assert_eq!(seen.body["Status"], "Completo");
    let mut stats = env.sandbox.watch_webhook_stats();
    let delivered = *stats.wait_for(|s| s.delivered == 1).await.expect("stats");
    assert_eq!((delivered.queued, delivered.attempts), (1, 1));
    env.advance(60);
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
    assert_no_more(&env, &mut rx, delivered).await;
}

#[tokio::test]
async fn webhook_reports_erro_when_processing_fails() {
    let (url, mut rx) = receiver(0).await;
    let env = start_with(webhook_config(url)).await;
    let image =
        samples::unreadable_document_image(DocumentKind::new(DocumentType::Rg, Side::Front));
    finish_journey(&env, image).await;
    assert_eq!(next(&mut rx).await.body["Status"], "Erro");
}

#[tokio::test]
async fn webhook_sends_basic_auth_and_standard_webhooks_signature() {
    let (url, mut rx) = receiver(0).await;
    let key = b"0123456789abcdef0123456789abcdef";
    let mut cfg = webhook_config(url);
    cfg.webhook.basic_user = Some("vendor".into());
    cfg.webhook.basic_password = Some("hook-pass".into());
    cfg.webhook.signing_secret = Some(format!("whsec_{}", samples::base64(key)));
    let env = start_with(cfg).await;
    finish_journey(&env, rg()).await;
    let seen = next(&mut rx).await;
    let auth = seen.headers["authorization"].to_str().expect("ascii");
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("vendor:hook-pass")
    );
    assert_eq!(auth, expected);
    let id = seen.headers["webhook-id"].to_str().expect("ascii");
    let ts: i64 = seen.headers["webhook-timestamp"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("unix seconds");
    let signature = seen.headers["webhook-signature"].to_str().expect("ascii");
    assert_eq!(
        Some(signature.to_owned()),
        sign_webhook(key, id, ts, &seen.raw)
    );
    assert!(signature.starts_with("v1,"));
}

#[tokio::test]
async fn webhook_gives_up_after_the_configured_attempts() {
    let (url, mut rx) = receiver(usize::MAX).await;
    let mut cfg = webhook_config(url);
    cfg.webhook.max_attempts = 3;
    let env = start_with(cfg).await;
    finish_journey(&env, rg()).await;
    let mut stats = env.sandbox.watch_webhook_stats();
    let stats = *stats.wait_for(|s| s.abandoned == 1).await.expect("stats");
    assert_eq!(stats.attempts, 3);
    for _ in 0..3 {
        next(&mut rx).await;
    }
    env.advance(60);
    assert_no_more(&env, &mut rx, stats).await;
}

#[tokio::test]
async fn webhook_retries_when_the_endpoint_refuses_connections() {
    // A port held bound but never listening: connections are refused.
    let refusing = RefusingPort::bind();
    let mut cfg = webhook_config(format!("http://{}/hook", refusing.addr()));
    cfg.webhook.max_attempts = 2;
    let env = start_with(cfg).await;
    finish_journey(&env, rg()).await;
    let mut stats = env.sandbox.watch_webhook_stats();
    let stats = *stats.wait_for(|s| s.abandoned == 1).await.expect("stats");
    assert_eq!(stats.attempts, 2);
}

#[tokio::test]
async fn disabled_webhook_sends_nothing() {
    let (url, mut rx) = receiver(0).await;
    let mut cfg = webhook_config(url);
    cfg.webhook.enabled = false;
    let env = start_with(cfg).await;
    let appkey = finish_journey(&env, rg()).await;
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
    // Nothing runs that could send: the driver is not started at all, so
    // it never looks for finished journeys (`swept_to` stays 0).
    env.advance(60);
    assert_eq!(env.sandbox.webhook_stats(), WebhookStats::default());
    assert!(rx.try_recv().is_err(), "nothing reached the receiver");
}

#[tokio::test]
async fn invalid_signing_secret_is_refused_at_start() {
    let mut cfg = webhook_config("http://127.0.0.1:9/hook".into());
    cfg.webhook.signing_secret = Some("not-whsec".into());
    let clock = Arc::new(idgate::sandbox::ManualClock::new());
    let err = idgate::sandbox::Sandbox::start(cfg, clock)
        .await
        .expect_err("refused");
    assert!(matches!(err, idgate::sandbox::SandboxError::Config(_)));
}

#[tokio::test]
async fn webhook_fires_on_time_with_the_system_clock() {
    let (url, mut rx) = receiver(0).await;
    let mut cfg = webhook_config(url);
    cfg.processing_delay_ms = 50;
    let env = Env {
        sandbox: start_on(cfg, Arc::new(idgate::sandbox::SystemClock)).await,
        clock: Arc::new(idgate::sandbox::ManualClock::new()),
        http: http_client(),
    };
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.liveness_2d(&appkey, LivenessOutcome::Valid).await;
    env.upload(&appkey, &[rg()]).await;
    // The driver sleeps until the journey is due, then sends.
    let seen = next(&mut rx).await;
    assert_eq!(seen.body["Appkey"], appkey.as_str());
    assert_eq!(env.result(&appkey).await.body["status"], "Completo");
}
