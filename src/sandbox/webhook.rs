//! Completion notices: a background driver notices journeys that finished
//! (processing is evaluated lazily, so something has to look) and posts
//! `{"Status", "Appkey"}` to the customer, retrying with backoff.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::header::CONTENT_TYPE;
use sha2::Sha256;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::{backoff::Backoff, telemetry::spans::SpanExt as _};
use tracing::Instrument as _;

use super::app::App;
use super::config::WebhookConfig;
use super::error::SandboxError;
use super::journey::JourneyStatus;
use crate::domain::{Appkey, JourneyRef};
use crate::telemetry::journey::with_journey_baggage;
use crate::telemetry::propagation::inject_into_http;

/// A validated webhook target.
#[derive(Clone)]
pub(crate) struct Target {
    url: String,
    basic: Option<(String, String)>,
    signing_key: Option<Vec<u8>>,
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    timeout: Duration,
}

impl Target {
    /// The target of `config`, `None` when notices are off.
    pub(crate) fn from_config(config: &WebhookConfig) -> Result<Option<Self>, SandboxError> {
        let Some(url) = config.url.clone().filter(|_| config.enabled) else {
            return Ok(None);
        };
        let signing_key = config
            .signing_secret
            .as_deref()
            .map(|s| {
                s.strip_prefix("whsec_")
                    .and_then(|b64| STANDARD.decode(b64).ok())
                    .filter(|k| !k.is_empty())
                    .ok_or(SandboxError::Config(
                        "webhook signing_secret must be whsec_<base64>",
                    ))
            })
            .transpose()?;
        Ok(Some(Self {
            url,
            basic: config
                .basic_user
                .clone()
                .map(|u| (u, config.basic_password.clone().unwrap_or_default())),
            signing_key,
            max_attempts: config.max_attempts.max(1),
            initial_backoff: Duration::from_millis(config.initial_backoff_ms),
            max_backoff: Duration::from_millis(config.max_backoff_ms),
            timeout: Duration::from_millis(config.timeout_ms.max(1)),
        }))
    }
}

/// The HTTP client for notices.
pub(crate) fn client() -> Result<reqwest::Client, SandboxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .map_err(SandboxError::WebhookClient)
}

/// Standard Webhooks signature: `v1,<base64 HMAC-SHA256("{id}.{ts}.{body}")>`.
/// `None` only if the key is refused, which HMAC never does.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// Runs until `shutdown` turns true: wakes on the clock (a manual clock
/// notifies on `advance`), on new activity, or when the next journey is
/// due, then queues a notice for each journey that finished.
pub(crate) async fn drive(
    app: Arc<App>,
    target: Target,
    client: reqwest::Client,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut clock_rx = app.clock.watch();
    let follows_real_time = clock_rx.is_none();
    let mut deliveries = JoinSet::new();
    loop {
        let now = app.clock.now();
        let (finished, next_due) = app.store.take_finished(now);
        for (appkey, status) in finished {
            app.webhook_stats.send_modify(|s| s.queued += 1);
            deliveries.spawn(deliver(
                app.clone(),
                target.clone(),
                client.clone(),
                appkey,
                status,
            ));
        }
        app.webhook_stats.send_if_modified(|s| {
            let moved = s.swept_to != now.unix_timestamp();
            s.swept_to = now.unix_timestamp();
            moved
        });
        let wait_real = async {
            match next_due {
                Some(due) if follows_real_time => {
                    let left = (due - now).max(time::Duration::ZERO);
                    tokio::time::sleep(left.try_into().unwrap_or(Duration::ZERO)).await;
                }
                _ => std::future::pending::<()>().await,
            }
        };
        let clock_moved = async {
            let moved = match clock_rx.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => false,
            };
            if !moved {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            () = app.activity.notified() => {}
            () = clock_moved => {}
            () = wait_real => {}
            Some(_) = deliveries.join_next(), if !deliveries.is_empty() => {}
        }
    }
    deliveries.shutdown().await;
}

async fn deliver(
    app: Arc<App>,
    target: Target,
    client: reqwest::Client,
    appkey: String,
    status: JourneyStatus,
) {
    let body = serde_json::json!({ "Status": status.as_wire(), "Appkey": appkey }).to_string();
    let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let journey = JourneyRef::from_appkey(&Appkey::new(appkey));
    let mut backoff = Backoff::new(target.initial_backoff, target.max_backoff);
    for attempt in 1..=target.max_attempts {
        app.webhook_stats.send_modify(|s| s.attempts += 1);
        // A client span per attempt, its own trace (a background task has
        // no caller); the receiver continues it and links its result read.
        let span = tracing::info_span!(
            parent: None,
            "sandbox.webhook",
            otel.name = "POST webhook",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            http.request.method = "POST",
            http.response.status_code = tracing::field::Empty,
            idgate.journey_ref = journey.as_str(),
            attempt,
        );
        let mut trace_headers = http::HeaderMap::new();
        inject_into_http(
            &with_journey_baggage(&span.context(), &journey),
            &mut trace_headers,
        );
        let mut request = client
            .post(&target.url)
            .timeout(target.timeout)
            .headers(trace_headers)
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some((user, password)) = &target.basic {
            request = request.basic_auth(user, Some(password));
        }
        if let Some(key) = &target.signing_key {
            // Transport time, not journey time: receivers check it against
            // their own wall clock.
            let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
            request = request
                .header("webhook-id", &id)
                .header("webhook-timestamp", timestamp.to_string());
            if let Some(signature) = sign(key, &id, timestamp, body.as_bytes()) {
                request = request.header("webhook-signature", signature);
            }
        }
        let sent = request.send().instrument(span.clone()).await;
        let delivered = span.in_scope(|| match sent {
            Ok(response) => {
                let status = response.status();
                span.record("http.response.status_code", i64::from(status.as_u16()));
                if status.is_success() {
                    tracing::info!(attempt, "completion notice delivered");
                    return true;
                }
                span.record("otel.status_code", "ERROR");
                tracing::warn!(
                    attempt,
                    status = status.as_u16(),
                    "completion notice refused"
                );
                false
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                tracing::warn!(
                    attempt,
                    timeout = e.is_timeout(),
                    connect = e.is_connect(),
                    "completion notice failed"
                );
                false
            }
        });
        if delivered {
            app.webhook_stats.send_modify(|s| s.delivered += 1);
            return;
        }
        if attempt < target.max_attempts {
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
    tracing::warn!(
        attempts = target.max_attempts,
        "completion notice abandoned"
    );
    app.webhook_stats.send_modify(|s| s.abandoned += 1);
}

#[cfg(test)]
mod tests {
    use super::sign;

    #[test]
    fn signature_matches_the_standard_webhooks_example() {
        // From the Standard Webhooks specification's test vectors.
        let key = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        .expect("valid base64");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }
}
