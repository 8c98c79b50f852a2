//! [`UpstreamClient`]: one method per REST operation of the wire contract,
//! on pools of keep-alive connections (whichever [`HttpPools`] it was
//! given: one shared pool unless the serving runtime hands its own).
//!
//! Each method builds its request body (field names from [`wire::field`]
//! and the configured [`FieldsConfig`]), hands a [`Prepared`] request to
//! the send loop, and parses the answer. Every call is bounded three
//! ways: the connect timeout, the per-call timeout (the client's, or a 3D
//! channel's), and the caller's remaining deadline ([`CallContext`]).
//! Response bodies are read chunk by chunk and abandoned past
//! `max_response_bytes`.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use time::PrimitiveDateTime;

use super::{
    ClientSetupError, UpstreamError,
    body::{self, FormBody, JsonBody},
    config::{FieldsConfig, UpstreamConfig},
    convert,
    endpoint::{Bulkhead, ChannelEndpoint, Target, join},
    pool::{HttpClientFactory, HttpPools, SharedPool},
    request::{Prepared, RequestDefaults},
    send::Sender,
    wire::{self, WireError, field},
};
use crate::{
    context::CallContext,
    domain::{
        Appkey, CredentialToken, EndUser, ImagePayload, JourneyRef, Operation, Password,
        SessionGrant, SessionToken, Snapshot,
    },
    proto::v1 as pb,
    telemetry::Metrics,
};

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

/// The REST client of the identity-verification service. Cheap to clone:
/// all clones share its connection pools.
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
    sender: Sender,
    urls: Urls,
    fields: FieldsConfig,
    times: convert::WireTimes,
    defaults: RequestDefaults,
}

/// The core service's operation URLs, parsed once.
struct Urls {
    credential: Target,
    appkey: Target,
    challenge: Target,
    captcha: Target,
    document: Target,
    result: Target,
}

impl UpstreamClient {
    /// Builds the client and its connection pool from the configuration.
    pub fn new(config: &UpstreamConfig) -> Result<Self, ClientSetupError> {
        Self::with_metrics(config, Metrics::default())
    }

    /// Builds the client, recording every upstream call in `metrics`, on
    /// one pool shared by every caller.
    pub fn with_metrics(
        config: &UpstreamConfig,
        metrics: Metrics,
    ) -> Result<Self, ClientSetupError> {
        let pool = SharedPool::new(&HttpClientFactory::new(config)?);
        Self::with_pools(config, metrics, Arc::new(pool))
    }

    /// Builds the client, recording every upstream call in `metrics`, on
    /// the pools `http` hands out (the serving runtime's, one per thread).
    pub fn with_pools(
        config: &UpstreamConfig,
        metrics: Metrics,
        http: Arc<dyn HttpPools>,
    ) -> Result<Self, ClientSetupError> {
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
        url("paths.session_token_3d", base, &p.session_token_3d)?;
        url("paths.liveness_3d", base, &p.liveness_3d)?;
        Ok(UpstreamClient {
            inner: Arc::new(Inner {
                sender: Sender {
                    http,
                    max_response_bytes: config.max_response_bytes,
                    metrics,
                },
                urls,
                fields: config.fields.clone(),
                times: convert::WireTimes::new(config.utc_offset_minutes),
                defaults: RequestDefaults {
                    timeout: config.timeout(),
                    safe_attempts: config.safe_attempts.max(1),
                    bulkhead: Bulkhead::new(config.max_concurrent_requests),
                },
            }),
        })
    }

    /// `POST /credencial`: exchanges the operator's login and password for
    /// a credential token. Retried on transient failures.
    pub async fn credential(
        &self,
        ctx: &CallContext,
        login: &str,
        password: &Password,
    ) -> Result<CredentialGrant, UpstreamError> {
        let op = Operation::Credential;
        let f = &self.inner.fields;
        let mut form = FormBody::with_capacity(64);
        form.pair(&f.credential_user, login)
            .pair(&f.credential_password, password.expose());
        let body = self
            .send(ctx, self.form(op, &self.inner.urls.credential, form))
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
        form.pair(field::OPERATOR_LOGIN, login)
            .pair(field::CREDENTIAL_TOKEN, token.expose())
            .pair(field::CPF, user.cpf.digits())
            .pair(field::NAME, user.name.as_str())
            .pair(field::BIRTH_DATE, &user.birth_date.to_wire())
            .pair(field::CUSTOMER_REFERENCE, user.customer_reference.as_str());
        let req = self
            .form(op, &self.inner.urls.appkey, form)
            .learning_journey(journey_of_appkey_answer);
        let body = self.send(ctx, req).await?;
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
        let requested_at = SystemTime::now();
        let req = self.form(op, &self.inner.urls.challenge, appkey_form(appkey));
        let body = self.send(ctx, req.for_appkey(appkey)).await?;
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
        snapshots: &[Snapshot],
    ) -> Result<pb::LivenessVerdict, UpstreamError> {
        let op = Operation::Captcha;
        let f = &self.inner.fields;
        let images: usize = snapshots
            .iter()
            .map(|s| body::form_base64_capacity(s.image.bytes().len()) + 64)
            .sum();
        let mut form = FormBody::with_capacity(images + 64 + appkey.expose().len());
        form.pair(field::APPKEY, appkey.expose())
            .pair(&f.captcha_challenge_key, challenge_key)
            .start(&f.captcha_images);
        for snapshot in snapshots {
            form.snapshot(snapshot);
        }
        let req = self.form(op, &self.inner.urls.captcha, form);
        let body = self.send(ctx, req.for_appkey(appkey)).await?;
        let parsed: wire::VerdictWire = wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        Ok(convert::verdict(parsed))
    }

    /// `POST /3d/session-token` on `channel`: a 3D liveness session.
    /// Consumes nothing, yet attempted once: the channel router owns
    /// retries and failover across channels.
    pub async fn session_token_3d(
        &self,
        ctx: &CallContext,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        user_agent: Option<&str>,
    ) -> Result<SessionGrant, UpstreamError> {
        let op = Operation::SessionToken3D;
        let url = channel_url(op, channel)?;
        let mut json = JsonBody::with_capacity(64 + appkey.expose().len());
        json.string(field::APPKEY, appkey.expose());
        if let Some(ua) = user_agent.filter(|ua| !ua.is_empty()) {
            json.string(field::USER_AGENT, ua);
        }
        let req = self
            .json(op, url, json)
            .for_appkey(appkey)
            .on_channel(channel);
        let body = self.send(ctx, req).await?;
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
        let url = channel_url(op, channel)?;
        let mut json =
            JsonBody::with_capacity(64 + appkey.expose().len() + session_token.expose().len());
        json.string(field::APPKEY, appkey.expose())
            .string(field::SESSION_TOKEN, session_token.expose());
        let req = self
            .json(op, url, json)
            .for_appkey(appkey)
            .on_channel(channel);
        let body = self.send(ctx, req).await?;
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
        let mut json = JsonBody::with_capacity(
            body::json_base64_capacity(images) + appkey.expose().len() + 32,
        );
        json.string(field::APPKEY, appkey.expose())
            .base64_list(&self.inner.fields.document_images, images);
        self.document(ctx, Operation::DocumentImages, appkey, json)
            .await
    }

    /// `POST /document` with the digital driver licence (QR image, PDF or
    /// QR binary), Base64. Never retried once sent.
    pub async fn digital_licence(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        licence: &ImagePayload,
    ) -> Result<DocumentReceipt, UpstreamError> {
        let mut json = JsonBody::with_capacity(
            body::json_base64_capacity(std::slice::from_ref(licence)) + appkey.expose().len() + 32,
        );
        json.string(field::APPKEY, appkey.expose())
            .base64(&self.inner.fields.document_qrcode, licence.bytes());
        self.document(ctx, Operation::DigitalLicence, appkey, json)
            .await
    }

    async fn document(
        &self,
        ctx: &CallContext,
        op: Operation,
        appkey: &Appkey,
        json: JsonBody,
    ) -> Result<DocumentReceipt, UpstreamError> {
        let req = self.json(op, &self.inner.urls.document, json);
        let body = self.send(ctx, req.for_appkey(appkey)).await?;
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
        let req = self.form(op, &self.inner.urls.result, appkey_form(appkey));
        let body = self.send(ctx, req.for_appkey(appkey)).await?;
        let parsed: wire::JourneyResultWire<'_> =
            wire::parse_json(&body).map_err(|e| malformed(op, e))?;
        convert::journey_result(parsed, self.inner.times).map_err(|e| malformed(op, e))
    }

    fn form(&self, op: Operation, url: &Target, form: FormBody) -> Prepared {
        Prepared::form(op, url, form, &self.inner.defaults)
    }

    fn json(&self, op: Operation, url: &Target, json: JsonBody) -> Prepared {
        Prepared::json(op, url, json.finish(), &self.inner.defaults)
    }

    async fn send(&self, ctx: &CallContext, req: Prepared) -> Result<bytes::Bytes, UpstreamError> {
        self.inner.sender.execute(ctx, req).await
    }
}

/// The form of an operation that takes the appkey alone.
fn appkey_form(appkey: &Appkey) -> FormBody {
    let mut form = FormBody::with_capacity(16 + appkey.expose().len());
    form.pair(field::APPKEY, appkey.expose());
    form
}

/// The journey reference of an `/appkey` answer, for its client span.
fn journey_of_appkey_answer(body: &[u8]) -> Option<JourneyRef> {
    let key = wire::parse_appkey(body).ok()?;
    Some(JourneyRef::from_appkey(&Appkey::new(key)))
}

/// The URL of a 3D operation on a channel; a channel whose URL does not
/// parse fails without sending anything.
fn channel_url(op: Operation, channel: &ChannelEndpoint) -> Result<&Target, UpstreamError> {
    channel.url(op).ok_or_else(|| {
        tracing::error!(
            operation = op.as_str(),
            channel = channel.name(),
            "3D channel URL does not parse"
        );
        UpstreamError::Connect { op }
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
    fn expires_parses_the_wire_format_only() {
        let t = parse_expires("21/11/2026 15:04:05").unwrap();
        assert_eq!((t.hour(), t.minute(), t.second()), (15, 4, 5));
        assert!(parse_expires("2026-11-21 15:04:05").is_none());
        assert!(parse_expires("").is_none());
    }
}
