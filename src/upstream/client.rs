//! [`UpstreamClient`]: one method per REST operation of the wire contract,
//! on a shared pool of keep-alive connections.
//!
//! Every call is bounded three ways: the connect timeout, the per-call
//! timeout (the client's, or a 3D channel's), and the caller's remaining
//! deadline ([`CallContext`]). Response bodies are read chunk by chunk and
//! abandoned past `max_response_bytes`.
//!
//! Retries follow [`Operation::consumes_appkey`]: operations that consume
//! nothing are retried on transient failures up to `safe_attempts`, with a
//! short jittered backoff that never runs past the deadline; operations
//! that bind or spend the appkey are retried only after a connect failure,
//! which proves the request never left.

use std::fmt;
use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use time::PrimitiveDateTime;
use tracing::Instrument as _;

use crate::telemetry::{Metrics, UpstreamCall, UpstreamRequest};
use http::Method;

use crate::config::{FieldsConfig, OperatorProfile, UpstreamConfig};
use crate::domain::{Appkey, CredentialToken, EndUser, ImagePayload, JourneyRef, SessionToken};
use crate::proto::v1 as pb;

use super::body::{self, FormBody};
use super::convert::{self, Session3D};
use super::wire::{self, WireError};
use super::{Operation, UpstreamError};

/// Shortest time worth starting an attempt with: below it, a retry would
/// only turn into a timeout.
const MIN_ATTEMPT_BUDGET: Duration = Duration::from_millis(20);
/// First retry backoff; doubled per attempt, capped, then jittered down to
/// half.
const BACKOFF_BASE: Duration = Duration::from_millis(50);
const BACKOFF_CAP: Duration = Duration::from_millis(800);

/// What the caller allows one upstream operation: its remaining deadline
/// (from the gRPC deadline), if any. Retries and each attempt's timeout
/// are capped by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallContext {
    deadline: Option<Instant>,
}

impl CallContext {
    /// No caller deadline: only the configured timeouts apply.
    pub fn unbounded() -> Self {
        CallContext { deadline: None }
    }

    /// The caller must have an answer by `deadline`.
    pub fn with_deadline(deadline: Instant) -> Self {
        CallContext {
            deadline: Some(deadline),
        }
    }

    /// The caller must have an answer within `timeout` from now.
    pub fn with_timeout(timeout: Duration) -> Self {
        CallContext {
            deadline: Instant::now().checked_add(timeout),
        }
    }

    /// An optional deadline (e.g. from the gRPC `grpc-timeout`).
    pub fn from_deadline(deadline: Option<Instant>) -> Self {
        CallContext { deadline }
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline; `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// A 3D liveness vendor channel's address: where `/3d/session-token` and
/// `/3d/liveness` go. The channel router picks one; the client sends on it
/// with the shared connection pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelEndpoint {
    /// Base URL of the channel (host plus service root path).
    pub base_url: String,
    /// Path of `/3d/session-token`, relative to `base_url`.
    pub session_token_path: String,
    /// Path of `/3d/liveness`, relative to `base_url`.
    pub liveness_path: String,
    /// Timeout of one call on this channel.
    pub timeout: Duration,
    /// Attempts of `/3d/session-token` on this channel (at least 1). A
    /// router that fails over between channels sets 1 and owns retrying;
    /// `/3d/liveness` is never retried once it may have been sent.
    pub session_attempts: u32,
    /// The channel's name, for spans and metrics (`core` when unnamed).
    pub name: String,
}

impl ChannelEndpoint {
    /// A channel with one session-token attempt (the router owns failover).
    pub fn new(
        base_url: impl Into<String>,
        session_token_path: impl Into<String>,
        liveness_path: impl Into<String>,
        timeout: Duration,
    ) -> Self {
        ChannelEndpoint {
            base_url: base_url.into(),
            session_token_path: session_token_path.into(),
            liveness_path: liveness_path.into(),
            timeout,
            session_attempts: 1,
            name: "core".to_owned(),
        }
    }

    /// Names the channel in spans and metrics.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the session-token attempts on this channel.
    pub fn with_session_attempts(mut self, attempts: u32) -> Self {
        self.session_attempts = attempts.max(1);
        self
    }
}

/// An operator credential from `/credencial`.
#[derive(Clone)]
pub struct CredentialGrant {
    /// The whole answer body, which `/appkey` takes back as `token`.
    pub token: CredentialToken,
    /// The answer's `expires` (`dd/MM/yyyy HH:mm:ss`, upstream local
    /// time), if present and readable.
    pub expires: Option<PrimitiveDateTime>,
}

impl fmt::Debug for CredentialGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialGrant")
            .field("token", &self.token)
            .field("has_expiry", &self.expires.is_some())
            .finish()
    }
}

/// An accepted `/document` submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentReceipt {
    /// Unique code of the processed document (`codigoDocumento`).
    pub document_code: i64,
}

/// The client could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    /// A configured URL does not parse.
    #[error("upstream.{key} is not a valid URL")]
    InvalidUrl {
        /// The configuration key.
        key: &'static str,
    },
    /// The HTTP client could not be built (TLS set-up).
    #[error("cannot build the upstream HTTP client: {0}")]
    Http(#[source] reqwest::Error),
}

/// The REST client of the identity-verification service. Cheap to clone:
/// all clones share one connection pool.
#[derive(Clone)]
pub struct UpstreamClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamClient").finish_non_exhaustive()
    }
}

struct Inner {
    http: reqwest::Client,
    urls: Urls,
    default_channel: ChannelEndpoint,
    fields: FieldsConfig,
    timeout: Duration,
    max_response_bytes: usize,
    safe_attempts: u32,
    metrics: Metrics,
}

struct Urls {
    credential: Url,
    appkey: Url,
    challenge: Url,
    captcha: Url,
    document: Url,
    result: Url,
}

/// `base` + `path`, keeping the base's own path (`Url::join` would
/// replace it).
fn join(base: &str, path: &str) -> Option<Url> {
    let base = base.trim_end_matches('/');
    let path = path.trim_start_matches('/');
    Url::parse(&format!("{base}/{path}"))
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
}

/// Reads the journey a call created from its answer body.
type JourneyOfAnswer = fn(&[u8]) -> Option<JourneyRef>;

impl Prepared {
    /// Tags the call with the journey of `appkey` (its reference only).
    fn for_appkey(mut self, appkey: &Appkey) -> Self {
        self.journey = Some(JourneyRef::from_appkey(appkey));
        self
    }
}

/// One request, ready to send (again).
struct Prepared {
    op: Operation,
    url: Url,
    content_type: &'static str,
    body: Bytes,
    timeout: Duration,
    attempts: u32,
    /// The 3D channel, for spans and metrics.
    channel: Option<String>,
    /// The journey, for spans (derived from the appkey, never the appkey).
    journey: Option<JourneyRef>,
    /// For a call that creates the journey (`/appkey`): how its span
    /// learns the journey from the answer.
    journey_from_answer: Option<JourneyOfAnswer>,
}

impl UpstreamClient {
    /// Builds the client and its connection pool from the configuration.
    pub fn new(config: &UpstreamConfig) -> Result<Self, ClientSetupError> {
        Self::with_metrics(config, Metrics::default())
    }

    /// Builds the client, recording every upstream call in `metrics`.
    pub fn with_metrics(
        config: &UpstreamConfig,
        metrics: Metrics,
    ) -> Result<Self, ClientSetupError> {
        // Selects ring as the process's rustls provider if none is yet.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout())
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            // A redirected POST would be replayed as a GET: never follow.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(ClientSetupError::Http)?;
        let url = |key: &'static str, base: &str, path: &str| {
            join(base, path).ok_or(ClientSetupError::InvalidUrl { key })
        };
        let p = &config.paths;
        let base = config.base_url.as_str();
        let urls = Urls {
            credential: url("paths.credential", base, &p.credential)?,
            appkey: url("paths.appkey", base, &p.appkey)?,
            challenge: url("paths.challenge", base, &p.challenge)?,
            captcha: url("paths.captcha", base, &p.captcha)?,
            document: url("paths.document", base, &p.document)?,
            result: url("result_base_url", &config.result_base_url, &p.result)?,
        };
        let default_channel = ChannelEndpoint::new(
            base,
            p.session_token_3d.clone(),
            p.liveness_3d.clone(),
            config.timeout(),
        )
        .with_session_attempts(config.safe_attempts);
        url("paths.session_token_3d", base, &p.session_token_3d)?;
        url("paths.liveness_3d", base, &p.liveness_3d)?;
        Ok(UpstreamClient {
            inner: Arc::new(Inner {
                http,
                urls,
                default_channel,
                fields: config.fields.clone(),
                timeout: config.timeout(),
                max_response_bytes: config.max_response_bytes,
                safe_attempts: config.safe_attempts.max(1),
                metrics,
            }),
        })
    }

    /// The 3D channel of the core upstream itself (`base_url` and the
    /// configured 3D paths), retried up to `safe_attempts`.
    pub fn default_channel(&self) -> ChannelEndpoint {
        self.inner.default_channel.clone()
    }

    /// `POST /credencial`: exchanges the operator's login and password for
    /// a credential token. Retried on transient failures.
    pub async fn credential(
        &self,
        ctx: &CallContext,
        profile: &OperatorProfile,
    ) -> Result<CredentialGrant, UpstreamError> {
        let op = Operation::Credential;
        let f = &self.inner.fields;
        let mut form = FormBody::with_capacity(64);
        form.pair(&f.credential_user, &profile.login)
            .pair(&f.credential_password, profile.password.expose());
        let body = self
            .execute(ctx, self.form(op, &self.inner.urls.credential, form))
            .await?;
        let answer = wire::parse_credential(&body).map_err(|e| malformed(op, e))?;
        Ok(CredentialGrant {
            token: CredentialToken::new(answer.body),
            expires: answer.expires.as_deref().and_then(parse_expires),
        })
    }

    /// `POST /appkey`: a new appkey for `user`, created with the operator
    /// `login` and its credential `token` (sent verbatim). Never retried
    /// once sent: a second attempt could create a second appkey.
    pub async fn appkey(
        &self,
        ctx: &CallContext,
        login: &str,
        token: &CredentialToken,
        user: &EndUser,
    ) -> Result<Appkey, UpstreamError> {
        let op = Operation::Appkey;
        let mut form = FormBody::with_capacity(256 + token.expose().len());
        form.pair("user", login)
            .pair("token", token.expose())
            .pair("cpf", user.cpf.digits())
            .pair("nome", user.name.as_str())
            .pair("nascimento", &user.birth_date.to_wire())
            .pair("idExternoCliente", user.customer_reference.as_str());
        let body = self
            .execute(
                ctx,
                Prepared {
                    journey_from_answer: Some(journey_of_appkey_answer),
                    ..self.form(op, &self.inner.urls.appkey, form)
                },
            )
            .await?;
        let key = wire::parse_appkey(&body).map_err(|e| malformed(op, e))?;
        Ok(Appkey::new(key))
    }

    /// `POST /challenge`: 2D liveness challenges. Consumes nothing, so it
    /// is retried on transient failures.
    pub async fn challenge(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
    ) -> Result<pb::CreateChallengesResponse, UpstreamError> {
        let op = Operation::Challenge;
        let mut form = FormBody::with_capacity(16 + appkey.expose().len());
        form.pair("appkey", appkey.expose());
        let requested_at = SystemTime::now();
        let body = self
            .execute(
                ctx,
                self.form(op, &self.inner.urls.challenge, form)
                    .for_appkey(appkey),
            )
            .await?;
        let parsed: wire::ChallengesWire<'_> =
            wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        convert::challenges(parsed, requested_at).map_err(|e| malformed(op, e))
    }

    /// `POST /captcha`: submits the 2D snapshots, each tagged with the
    /// face type of its challenge. Binds the appkey: never retried once
    /// sent.
    pub async fn captcha(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        challenge_key: &str,
        snapshots: &[(ImagePayload, String)],
    ) -> Result<pb::LivenessVerdict, UpstreamError> {
        let op = Operation::Captcha;
        let f = &self.inner.fields;
        let images: usize = snapshots
            .iter()
            .map(|(i, _)| body::form_base64_capacity(i.bytes().len()) + 64)
            .sum();
        let mut form = FormBody::with_capacity(images + 64 + appkey.expose().len());
        form.pair("appkey", appkey.expose())
            .pair(&f.captcha_challenge_key, challenge_key)
            .start(&f.captcha_images);
        for (image, code) in snapshots {
            form.text("data:")
                .text(body::snapshot_mime(image))
                .text(";base64,type:")
                .text(code)
                .text(",")
                .base64(image.bytes());
        }
        let body = self
            .execute(
                ctx,
                self.form(op, &self.inner.urls.captcha, form)
                    .for_appkey(appkey),
            )
            .await?;
        let parsed: wire::VerdictWire = wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        Ok(convert::verdict(parsed))
    }

    /// `POST /3d/session-token` on `channel`: a 3D liveness session.
    /// Consumes nothing; attempted up to `channel.session_attempts` times.
    pub async fn session_token_3d(
        &self,
        ctx: &CallContext,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        user_agent: Option<&str>,
    ) -> Result<Session3D, UpstreamError> {
        let op = Operation::SessionToken3D;
        let url = channel_url(op, channel, &channel.session_token_path)?;
        let mut json = String::with_capacity(64 + appkey.expose().len());
        json.push_str("{\"appkey\":");
        body::json_string_into(&mut json, appkey.expose());
        if let Some(ua) = user_agent.filter(|ua| !ua.is_empty()) {
            json.push_str(",\"userAgent\":");
            body::json_string_into(&mut json, ua);
        }
        json.push('}');
        let mut prepared = self.json(op, &url, json).for_appkey(appkey);
        prepared.channel = Some(channel.name.clone());
        prepared.timeout = channel.timeout;
        prepared.attempts = channel.session_attempts.max(1);
        let body = self.execute(ctx, prepared).await?;
        let parsed: wire::Session3DWire = wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        convert::session_3d(parsed).map_err(|e| malformed(op, e))
    }

    /// `POST /3d/liveness` on the `channel` that issued the session: the
    /// 3D verdict. Finishes the appkey: never retried once sent.
    pub async fn liveness_3d(
        &self,
        ctx: &CallContext,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        session_token: &SessionToken,
    ) -> Result<pb::LivenessVerdict, UpstreamError> {
        let op = Operation::Liveness3D;
        let url = channel_url(op, channel, &channel.liveness_path)?;
        let mut json =
            String::with_capacity(64 + appkey.expose().len() + session_token.expose().len());
        json.push_str("{\"appkey\":");
        body::json_string_into(&mut json, appkey.expose());
        json.push_str(",\"sessionToken\":");
        body::json_string_into(&mut json, session_token.expose());
        json.push('}');
        let mut prepared = self.json(op, &url, json).for_appkey(appkey);
        prepared.channel = Some(channel.name.clone());
        prepared.timeout = channel.timeout;
        let body = self.execute(ctx, prepared).await?;
        let parsed: wire::VerdictWire = wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        Ok(convert::verdict(parsed))
    }

    /// `POST /document` with document images (JPEG, PNG or PDF), Base64
    /// without a data-URL prefix. Never retried once sent; a 400 means no
    /// document was found and the caller may send new images.
    pub async fn document_images(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        images: &[ImagePayload],
    ) -> Result<DocumentReceipt, UpstreamError> {
        let op = Operation::DocumentImages;
        let json = body::json_images(appkey.expose(), &self.inner.fields.document_images, images);
        self.document(ctx, op, appkey, json).await
    }

    /// `POST /document` with the digital driver licence (QR image, PDF or
    /// QR binary), Base64. Never retried once sent.
    pub async fn digital_licence(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        licence: &ImagePayload,
    ) -> Result<DocumentReceipt, UpstreamError> {
        let op = Operation::DigitalLicence;
        let json = body::json_licence(appkey.expose(), &self.inner.fields.document_qrcode, licence);
        self.document(ctx, op, appkey, json).await
    }

    async fn document(
        &self,
        ctx: &CallContext,
        op: Operation,
        appkey: &Appkey,
        json: String,
    ) -> Result<DocumentReceipt, UpstreamError> {
        let body = self
            .execute(
                ctx,
                self.json(op, &self.inner.urls.document, json)
                    .for_appkey(appkey),
            )
            .await?;
        let parsed: wire::DocumentAcceptedWire =
            wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        let document_code = parsed
            .codigo_documento
            .0
            .ok_or_else(|| malformed(op, WireError::missing("codigoDocumento")))?;
        Ok(DocumentReceipt { document_code })
    }

    /// `POST {result_base_url}/document/result`: the journey result as the
    /// upstream has it now. Read-only, so retried on transient failures.
    pub async fn journey_result(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
    ) -> Result<pb::JourneyResult, UpstreamError> {
        let op = Operation::Result;
        let mut form = FormBody::with_capacity(16 + appkey.expose().len());
        form.pair("appkey", appkey.expose());
        let body = self
            .execute(
                ctx,
                self.form(op, &self.inner.urls.result, form)
                    .for_appkey(appkey),
            )
            .await?;
        let parsed: wire::JourneyResultWire<'_> =
            wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        convert::journey_result(parsed).map_err(|e| malformed(op, e))
    }

    fn form(&self, op: Operation, url: &Url, form: FormBody) -> Prepared {
        self.prepared(op, url, body::FORM, form.finish())
    }

    fn json(&self, op: Operation, url: &Url, json: String) -> Prepared {
        self.prepared(op, url, body::JSON, json)
    }

    fn prepared(
        &self,
        op: Operation,
        url: &Url,
        content_type: &'static str,
        body: String,
    ) -> Prepared {
        Prepared {
            op,
            url: url.clone(),
            content_type,
            body: Bytes::from(body),
            timeout: self.inner.timeout,
            attempts: if op.consumes_appkey() {
                // One retry, and only after a connect failure.
                2
            } else {
                self.inner.safe_attempts
            },
            channel: None,
            journey: None,
            journey_from_answer: None,
        }
    }

    /// Sends `req`, retrying as its operation allows, within the caller's
    /// deadline. Returns the 2xx body.
    async fn execute(&self, ctx: &CallContext, req: Prepared) -> Result<Bytes, UpstreamError> {
        let op = req.op;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let timeout = match ctx.remaining() {
                Some(left) if left < MIN_ATTEMPT_BUDGET.min(req.timeout) || left.is_zero() => {
                    return Err(UpstreamError::DeadlineExceeded { op });
                }
                Some(left) => left.min(req.timeout),
                None => req.timeout,
            };
            let err = match self.attempt(&req, timeout).await {
                Ok(body) => return Ok(body),
                Err(e) => e,
            };
            if attempt >= req.attempts || !may_retry(op, &err) {
                return Err(err);
            }
            let pause = backoff(attempt);
            if let Some(left) = ctx.remaining() {
                if left <= pause + MIN_ATTEMPT_BUDGET {
                    return Err(err);
                }
            }
            tracing::debug!(
                operation = op.as_str(),
                attempt,
                error_class = err.class(),
                "retrying upstream call"
            );
            tokio::time::sleep(pause).await;
        }
    }

    /// One attempt: send, check the status, read the body within bounds,
    /// under a client span whose context travels in the request headers.
    async fn attempt(&self, req: &Prepared, timeout: Duration) -> Result<Bytes, UpstreamError> {
        let op = req.op;
        let limit = self.inner.max_response_bytes;
        let mut request = UpstreamRequest::new(op, &Method::POST, req.url.as_str());
        if let Some(channel) = req.channel.as_deref() {
            request = request.channel(channel);
        }
        if let Some(journey) = req.journey.as_ref() {
            request = request.journey(journey);
        }
        let mut call = UpstreamCall::start(&self.inner.metrics, request);
        let headers = call.headers();
        let exchange = async {
            let response = self
                .inner
                .http
                .post(req.url.clone())
                .headers(headers)
                .header(CONTENT_TYPE, req.content_type)
                .header(ACCEPT, "application/json, text/plain, */*")
                .body(req.body.clone())
                .timeout(timeout)
                .send()
                .await
                .map_err(|e| send_error(op, &e))?;
            let status = response.status();
            if !status.is_success() {
                return Ok((
                    status,
                    Err(UpstreamError::Status {
                        op,
                        status: status.as_u16(),
                    }),
                ));
            }
            Ok((status, read_bounded(op, response, limit).await))
        }
        .instrument(call.span().clone());
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok((status, body))) => {
                if let (Some(learn), Ok(b)) = (req.journey_from_answer, &body) {
                    if let Some(journey) = learn(b) {
                        call.record_journey(&journey);
                    }
                }
                call.finish(status);
                body
            }
            Ok(Err(err)) => {
                call.fail(&err);
                Err(err)
            }
            Err(_) => {
                let err = UpstreamError::Timeout { op };
                call.fail(&err);
                Err(err)
            }
        }
    }
}

/// The journey reference of an `/appkey` answer, for its client span.
fn journey_of_appkey_answer(body: &[u8]) -> Option<JourneyRef> {
    let key = wire::parse_appkey(body).ok()?;
    Some(JourneyRef::from_appkey(&Appkey::new(key)))
}

/// The URL of a 3D operation on a channel; a channel whose URL does not
/// parse fails without sending anything.
fn channel_url(op: Operation, channel: &ChannelEndpoint, path: &str) -> Result<Url, UpstreamError> {
    join(&channel.base_url, path).ok_or_else(|| {
        tracing::error!(operation = op.as_str(), "3D channel URL does not parse");
        UpstreamError::Connect { op }
    })
}

/// Whether a failed attempt may be repeated. Operations that consume the
/// appkey: only when the request provably never left (connect failure).
fn may_retry(op: Operation, err: &UpstreamError) -> bool {
    if op.consumes_appkey() {
        return err.request_not_sent() && matches!(err, UpstreamError::Connect { .. });
    }
    match err {
        UpstreamError::Connect { .. }
        | UpstreamError::Timeout { .. }
        | UpstreamError::Transport { .. } => true,
        UpstreamError::Status { status, .. } => matches!(status, 502..=504),
        UpstreamError::Malformed { .. }
        | UpstreamError::Oversize { .. }
        | UpstreamError::DeadlineExceeded { .. } => false,
    }
}

/// Exponential backoff with jitter: 50 ms, 100 ms, ... capped at 800 ms,
/// each scaled by a random factor in [0.5, 1.0).
fn backoff(attempt: u32) -> Duration {
    let exp = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(8))
        .min(BACKOFF_CAP);
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    let factor = 0.5 + (random % 500) as f64 / 1000.0;
    exp.mul_f64(factor)
}

/// Classifies a failure to get response headers. A connect failure proves
/// the request was not sent; anything else may have reached the upstream.
fn send_error(op: Operation, e: &reqwest::Error) -> UpstreamError {
    if e.is_connect() || e.is_builder() {
        UpstreamError::Connect { op }
    } else if e.is_timeout() {
        UpstreamError::Timeout { op }
    } else {
        UpstreamError::Transport { op }
    }
}

/// Reads the body chunk by chunk, failing as soon as it would exceed
/// `limit`. A body that arrives in one chunk is returned without a copy.
async fn read_bounded(
    op: Operation,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Bytes, UpstreamError> {
    let oversize = UpstreamError::Oversize { op, limit };
    let declared = response.content_length();
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(oversize);
    }
    let mut first: Option<Bytes> = None;
    let mut buf: Option<BytesMut> = None;
    let mut total = 0usize;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) if e.is_timeout() => return Err(UpstreamError::Timeout { op }),
            Err(_) => return Err(UpstreamError::Transport { op }),
        };
        total = total.saturating_add(chunk.len());
        if total > limit {
            return Err(oversize);
        }
        match (&mut first, &mut buf) {
            (None, None) => first = Some(chunk),
            (Some(head), None) => {
                let hint = declared.map_or(total * 2, |d| d as usize).min(limit);
                let mut b = BytesMut::with_capacity(hint.max(total));
                b.extend_from_slice(head);
                b.extend_from_slice(&chunk);
                buf = Some(b);
                first = None;
            }
            (_, Some(b)) => b.extend_from_slice(&chunk),
        }
    }
    Ok(match (first, buf) {
        (_, Some(b)) => b.freeze(),
        (Some(head), None) => head,
        (None, None) => Bytes::new(),
    })
}

fn malformed(op: Operation, e: WireError) -> UpstreamError {
    UpstreamError::Malformed { op, detail: e.0 }
}

/// Parses `expires` (`dd/MM/yyyy HH:mm:ss`); `None` if unreadable.
pub fn parse_expires(text: &str) -> Option<PrimitiveDateTime> {
    PrimitiveDateTime::parse(
        text.trim(),
        time::macros::format_description!("[day]/[month]/[year] [hour]:[minute]:[second]"),
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_the_base_path() {
        let u = join("http://h:1/facecaptcha/", "/service/captcha/appkey").unwrap();
        assert_eq!(u.as_str(), "http://h:1/facecaptcha/service/captcha/appkey");
        assert!(join("", "/x").is_none());
        assert!(join("ftp://h", "/x").is_none());
    }

    #[test]
    fn consuming_operations_retry_only_after_connect_failures() {
        for op in [
            Operation::Captcha,
            Operation::Liveness3D,
            Operation::DocumentImages,
        ] {
            assert!(may_retry(op, &UpstreamError::Connect { op }));
            assert!(!may_retry(op, &UpstreamError::Timeout { op }));
            assert!(!may_retry(op, &UpstreamError::Transport { op }));
            assert!(!may_retry(op, &UpstreamError::Status { op, status: 503 }));
        }
        let op = Operation::Result;
        assert!(may_retry(op, &UpstreamError::Timeout { op }));
        assert!(may_retry(op, &UpstreamError::Status { op, status: 502 }));
        assert!(!may_retry(op, &UpstreamError::Status { op, status: 500 }));
        assert!(!may_retry(
            op,
            &UpstreamError::Malformed {
                op,
                detail: String::new()
            }
        ));
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_bounds() {
        for attempt in 1..12 {
            let b = backoff(attempt);
            assert!(b <= BACKOFF_CAP, "{b:?}");
            assert!(b >= BACKOFF_BASE / 2, "{b:?}");
        }
    }

    #[test]
    fn expires_parses_the_wire_format_only() {
        let t = parse_expires("21/11/2026 15:04:05").unwrap();
        assert_eq!((t.hour(), t.minute(), t.second()), (15, 4, 5));
        assert!(parse_expires("2026-11-21 15:04:05").is_none());
        assert!(parse_expires("").is_none());
    }
}
