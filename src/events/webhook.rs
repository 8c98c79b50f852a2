//! The completion-notice receiver: an axum router for the gateway's HTTP
//! listener.
//!
//! A delivery is read with a size bound, authenticated (HTTP Basic or a
//! Standard Webhooks signature: either suffices when both are configured,
//! because the service itself sends only Basic), parsed, deduplicated and
//! handed to the [`JourneyWatches`], which never blocks; the answer (202) does
//! not wait for the result to be read. Refusals are JSON with a reason and
//! are counted by reason. Neither the appkey nor the body is ever logged.
//!
//! With only Basic configured the credentials are checked on the headers,
//! before a byte of the body is read: an unauthenticated peer gets its 401
//! without the gateway buffering anything for it. A signature covers the
//! body, so with HMAC configured the body is read first (bounded, as
//! always). Refusals are logged at WARN at most once per
//! [`REFUSAL_LOG_INTERVAL`], with the count left out since; every refusal
//! is counted in the metrics either way.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use crate::telemetry::spans::SpanExt as _;
use axum::Extension;
use axum::{
    Json, Router,
    body::Body,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use http_body_util::BodyExt as _;
use serde::Deserialize;
use tracing::Span;

use self::config::WebhookSettings;
use super::{
    Notice, NoticeStatus,
    delivery_proof::{self, AuthFailure},
    watches::JourneyWatches,
};
use crate::{
    cluster::{DedupeStore, DeliveryKey, FleetNotice, FleetNotices, MemoryDedupe},
    config_source::ConfigError,
    domain::{Appkey, JourneyRef},
    telemetry::{ServerSpan, log_throttle::LogThrottle, record_journey},
};

/// How long a sender may take to send its (small) body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// At most one WARN line about refused deliveries per this long.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Why a delivery was refused. Each has its own counter and HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// No credentials of a configured kind (401).
    CredentialsMissing,
    /// HTTP Basic credentials that do not match (401).
    CredentialsInvalid,
    /// Signature headers malformed or no signature matches (401).
    SignatureInvalid,
    /// Correct signature, timestamp outside the replay window (401).
    TimestampOutOfWindow,
    /// Body over `max_body_bytes` (413).
    PayloadTooLarge,
    /// The body could not be read: the sender aborted or stalled (400).
    BodyUnreadable,
    /// Not a JSON object with string `Status` and `Appkey` (400).
    MalformedBody,
    /// `Status` is neither `Completo` nor `Erro` (422).
    UnknownStatus,
}

impl RejectReason {
    /// Every reason, for metric pre-registration.
    pub const ALL: [RejectReason; 8] = [
        RejectReason::CredentialsMissing,
        RejectReason::CredentialsInvalid,
        RejectReason::SignatureInvalid,
        RejectReason::TimestampOutOfWindow,
        RejectReason::PayloadTooLarge,
        RejectReason::BodyUnreadable,
        RejectReason::MalformedBody,
        RejectReason::UnknownStatus,
    ];

    /// The label in responses, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::CredentialsMissing => "credentials_missing",
            RejectReason::CredentialsInvalid => "credentials_invalid",
            RejectReason::SignatureInvalid => "signature_invalid",
            RejectReason::TimestampOutOfWindow => "timestamp_out_of_window",
            RejectReason::PayloadTooLarge => "payload_too_large",
            RejectReason::BodyUnreadable => "body_unreadable",
            RejectReason::MalformedBody => "malformed_body",
            RejectReason::UnknownStatus => "unknown_status",
        }
    }

    /// The `outcome` label of the refusal in `idgate_webhooks_total`.
    pub fn metric_label(self) -> &'static str {
        match self {
            RejectReason::CredentialsMissing => "rejected_credentials_missing",
            RejectReason::CredentialsInvalid => "rejected_credentials_invalid",
            RejectReason::SignatureInvalid => "rejected_signature_invalid",
            RejectReason::TimestampOutOfWindow => "rejected_timestamp_out_of_window",
            RejectReason::PayloadTooLarge => "rejected_payload_too_large",
            RejectReason::BodyUnreadable => "rejected_body_unreadable",
            RejectReason::MalformedBody => "rejected_malformed_body",
            RejectReason::UnknownStatus => "rejected_unknown_status",
        }
    }

    /// The HTTP status of the refusal.
    pub fn http_status(self) -> StatusCode {
        match self {
            RejectReason::CredentialsMissing
            | RejectReason::CredentialsInvalid
            | RejectReason::SignatureInvalid
            | RejectReason::TimestampOutOfWindow => StatusCode::UNAUTHORIZED,
            RejectReason::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            RejectReason::BodyUnreadable | RejectReason::MalformedBody => StatusCode::BAD_REQUEST,
            RejectReason::UnknownStatus => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    fn message(self) -> &'static str {
        match self {
            RejectReason::CredentialsMissing => "authentication required",
            RejectReason::CredentialsInvalid => "invalid credentials",
            RejectReason::SignatureInvalid => {
                "webhook-id, webhook-timestamp and a matching v1 webhook-signature are required"
            }
            RejectReason::TimestampOutOfWindow => "webhook-timestamp is outside the replay window",
            RejectReason::PayloadTooLarge => "body exceeds the size limit",
            RejectReason::BodyUnreadable => "body could not be read",
            RejectReason::MalformedBody => {
                "body must be a JSON object with string fields `Status` and `Appkey` (non-empty)"
            }
            RejectReason::UnknownStatus => "`Status` must be `Completo` or `Erro`",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl From<AuthFailure> for RejectReason {
    fn from(f: AuthFailure) -> Self {
        match f {
            AuthFailure::Missing => RejectReason::CredentialsMissing,
            AuthFailure::InvalidCredentials => RejectReason::CredentialsInvalid,
            AuthFailure::InvalidSignature => RejectReason::SignatureInvalid,
            AuthFailure::StaleTimestamp => RejectReason::TimestampOutOfWindow,
        }
    }
}

/// A snapshot of the receiver's counters, for telemetry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookStats {
    /// Deliveries received (every request to the path).
    pub received: u64,
    /// Deliveries accepted and handed to the watches.
    pub accepted: u64,
    /// Authenticated deliveries dropped as duplicates (answered 202).
    pub duplicates: u64,
    /// Deliveries whose body was read (with only Basic configured, only
    /// those whose credentials matched).
    pub bodies_read: u64,
    rejected: [u64; RejectReason::ALL.len()],
}

impl WebhookStats {
    /// Deliveries refused for `reason`.
    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.rejected[reason.index()]
    }

    /// Deliveries refused for any reason.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().sum()
    }
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    accepted: AtomicU64,
    duplicates: AtomicU64,
    bodies_read: AtomicU64,
    rejected: [AtomicU64; RejectReason::ALL.len()],
}

/// The webhook receiver. Cheap to clone (shared).
#[derive(Clone)]
pub struct WebhookReceiver {
    inner: Arc<ReceiverInner>,
}

struct ReceiverInner {
    settings: WebhookSettings,
    watches: JourneyWatches,
    /// The deliveries seen, by this process or the fleet.
    dedupe: Arc<dyn DedupeStore>,
    /// The other replicas, told of each notice accepted; `None` for one
    /// process.
    fleet: Option<FleetNotices>,
    counters: Counters,
    refusal_log: LogThrottle,
}

impl WebhookReceiver {
    /// A receiver that hands notices to `watches`. Refuses settings without
    /// authentication unless `allow_unauthenticated` is set.
    pub fn new(settings: WebhookSettings, watches: JourneyWatches) -> Result<Self, ConfigError> {
        let dedupe = Arc::new(MemoryDedupe::new(
            settings.dedupe_ttl,
            settings.dedupe_max_entries,
        ));
        Self::with_stores(settings, watches, dedupe, None)
    }

    /// A receiver on the gateway's stores: deliveries deduped in `dedupe`
    /// (the fleet's, in a fleet) and, in a fleet, each notice accepted
    /// told to the other replicas through `fleet`.
    pub fn with_stores(
        settings: WebhookSettings,
        watches: JourneyWatches,
        dedupe: Arc<dyn DedupeStore>,
        fleet: Option<FleetNotices>,
    ) -> Result<Self, ConfigError> {
        settings.validate()?;
        if settings.basic.is_none() && settings.hmac.is_none() {
            tracing::warn!(
                path = %settings.path,
                "webhook receiver accepts unauthenticated notices (allow_unauthenticated = true)"
            );
        }
        Ok(Self {
            inner: Arc::new(ReceiverInner {
                settings,
                watches,
                dedupe,
                fleet,
                counters: Counters::default(),
                refusal_log: LogThrottle::new(REFUSAL_LOG_INTERVAL),
            }),
        })
    }

    /// The router to mount on the HTTP listener: `POST {path}`. Generic
    /// over the state of the router it is merged into.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        Router::new()
            .route(&self.inner.settings.path, post(receive))
            .with_state(self.clone())
    }

    /// The configured path.
    pub fn path(&self) -> &str {
        &self.inner.settings.path
    }

    /// The counters.
    pub fn stats(&self) -> WebhookStats {
        let c = &self.inner.counters;
        WebhookStats {
            received: c.received.load(Ordering::Relaxed),
            accepted: c.accepted.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            bodies_read: c.bodies_read.load(Ordering::Relaxed),
            rejected: std::array::from_fn(|i| c.rejected[i].load(Ordering::Relaxed)),
        }
    }

    fn reject(&self, reason: RejectReason) -> Response {
        self.inner.counters.rejected[reason.index()].fetch_add(1, Ordering::Relaxed);
        if let Some(suppressed) = self.inner.refusal_log.admit(tokio::time::Instant::now()) {
            tracing::warn!(
                reason = reason.as_str(),
                suppressed,
                "webhook delivery refused (at most one line per {} s; `suppressed` refusals since the last, all counted in idgate_webhooks_total)",
                REFUSAL_LOG_INTERVAL.as_secs()
            );
        }
        let body = Json(serde_json::json!({
            "error": { "reason": reason.as_str(), "message": reason.message() }
        }));
        let mut response = (reason.http_status(), body).into_response();
        if reason.http_status() == StatusCode::UNAUTHORIZED && self.inner.settings.basic.is_some() {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"idgate-webhook\", charset=\"UTF-8\""),
            );
        }
        response
    }

    /// Either configured method suffices; with none configured (explicit
    /// opt-out, checked at construction) everything passes. The reported
    /// failure is the most specific one seen.
    fn authenticate(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), AuthFailure> {
        let settings = &self.inner.settings;
        if settings.basic.is_none() && settings.hmac.is_none() {
            return Ok(());
        }
        let mut failure = AuthFailure::Missing;
        if let Some(secret) = &settings.hmac {
            if delivery_proof::has_signature_headers(headers) {
                match delivery_proof::check_signature(
                    headers,
                    body,
                    secret,
                    time::OffsetDateTime::now_utc().unix_timestamp(),
                    settings.replay_window.as_secs(),
                ) {
                    Ok(()) => return Ok(()),
                    Err(f) => failure = f,
                }
            }
        }
        if let Some(basic) = &settings.basic {
            match delivery_proof::check_basic(headers, basic) {
                Some(true) => return Ok(()),
                Some(false) if failure == AuthFailure::Missing => {
                    failure = AuthFailure::InvalidCredentials;
                }
                _ => {}
            }
        }
        Err(failure)
    }

    /// True the first time a delivery is seen within the dedupe TTL (by
    /// any replica of the fleet).
    async fn first_delivery(&self, key: &DeliveryKey) -> bool {
        self.inner.dedupe.first_delivery(key).await
    }

    /// Tells the other replicas of the fleet, whose watchers of the
    /// journey then read the result themselves. One process has no one
    /// to tell.
    async fn fan_out(&self, journey: &JourneyRef, status: NoticeStatus, key: &DeliveryKey) {
        let Some(fleet) = &self.inner.fleet else {
            return;
        };
        let notice = FleetNotice {
            journey: journey.clone(),
            status: status.as_str().to_owned(),
            delivery: key.digest(),
        };
        if fleet.publish(notice).await.is_err() {
            tracing::warn!(journey = %journey, "completion notice not fanned out to the fleet; other replicas' watchers will poll");
        }
    }
}

impl std::fmt::Debug for WebhookReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookReceiver")
            .field("path", &self.inner.settings.path)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The body the service sends. Other fields are ignored (the spec does not
/// show them); the lower-case spellings are accepted too.
#[derive(Deserialize)]
struct WireNotice {
    #[serde(rename = "Status", alias = "status")]
    status: String,
    #[serde(rename = "Appkey", alias = "appkey")]
    appkey: String,
}

/// Parses a body into a notice. Errors carry a reason only: serde messages
/// can quote values, so they are never surfaced.
fn parse_notice(body: &[u8]) -> Result<Notice, RejectReason> {
    // Through `Value` first: serde would also accept a JSON array as a struct.
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| RejectReason::MalformedBody)?;
    if !value.is_object() {
        return Err(RejectReason::MalformedBody);
    }
    let wire = WireNotice::deserialize(value).map_err(|_| RejectReason::MalformedBody)?;
    let appkey = Appkey::parse(&wire.appkey).map_err(|_| RejectReason::MalformedBody)?;
    let status = NoticeStatus::parse(&wire.status).ok_or(RejectReason::UnknownStatus)?;
    Ok(Notice { appkey, status })
}

async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<bytes::Bytes, RejectReason> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(RejectReason::PayloadTooLarge);
    }
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(BODY_READ_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(RejectReason::PayloadTooLarge)
        }
        Ok(Err(_)) | Err(_) => Err(RejectReason::BodyUnreadable),
    }
}

async fn receive(
    State(receiver): State<WebhookReceiver>,
    server_span: Option<Extension<ServerSpan>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // The request's server span (HttpServerLayer), else the current one.
    let span = server_span.map_or_else(Span::current, |Extension(ServerSpan(s))| s);
    let counters = &receiver.inner.counters;
    counters.received.fetch_add(1, Ordering::Relaxed);
    let settings = &receiver.inner.settings;
    let early =
        delivery_proof::basic_only(&headers, settings.basic.as_ref(), settings.hmac.is_some());
    if let Some(Err(failure)) = early {
        // Refused on the headers: the body is never read.
        return receiver.reject(failure.into());
    }
    let limit = settings.max_body_bytes;
    counters.bodies_read.fetch_add(1, Ordering::Relaxed);
    let body = match read_body(body, &headers, limit).await {
        Ok(b) => b,
        Err(reason) => return receiver.reject(reason),
    };
    if early.is_none() {
        if let Err(failure) = receiver.authenticate(&headers, &body) {
            return receiver.reject(failure.into());
        }
    }
    let notice = match parse_notice(&body) {
        Ok(n) => n,
        Err(reason) => return receiver.reject(reason),
    };
    let journey = JourneyRef::from_appkey(&notice.appkey);
    record_journey(&span, &journey);
    let key = match delivery_proof::delivery_id(&headers) {
        Some(id) => DeliveryKey::Id(id.to_owned()),
        None => DeliveryKey::Journey(journey.clone(), notice.status.as_str()),
    };
    if !receiver.first_delivery(&key).await {
        counters.duplicates.fetch_add(1, Ordering::Relaxed);
        tracing::info!(journey = %journey, "duplicate webhook delivery ignored");
        return (
            StatusCode::ACCEPTED,
            Json(serde_json::json!({ "status": "duplicate" })),
        )
            .into_response();
    }
    let status = notice.status;
    let link = span.span_context();
    let watched = receiver.inner.watches.notify_traced(notice, Some(link));
    receiver.fan_out(&journey, status, &key).await;
    counters.accepted.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        journey = %journey,
        status = status.as_str(),
        watched,
        "completion notice accepted"
    );
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "status": "accepted" })),
    )
        .into_response()
}

pub mod config;

#[cfg(test)]
mod tests;
