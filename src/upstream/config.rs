//! `[upstream]`: where the REST service is and how it is called.

use std::time::Duration;

use serde::Deserialize;

/// Default bulkhead of the core service (and of a channel built without
/// a configured one).
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 256;

/// Brasília time (UTC-03:00), where the service runs.
pub const DEFAULT_UTC_OFFSET_MINUTES: i16 = -180;

/// The upstream REST service.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `{base_url}`: host plus service root path.
    pub base_url: String,
    /// `{result_base_url}`: the result operation's own address.
    pub result_base_url: String,
    /// Timeout of one upstream call, in milliseconds.
    pub timeout_ms: u64,
    /// Timeout of establishing a connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Largest upstream response body read, in bytes (the result carries
    /// every photo of the journey, so this is generous).
    pub max_response_bytes: usize,
    /// Validity of an appkey, for the `expire_time` the gateway reports.
    pub appkey_ttl_secs: u64,
    /// Validity of a credential token when `/credencial` gives no expiry.
    pub credential_ttl_secs: u64,
    /// Attempts of an operation that consumes nothing (credential,
    /// challenge, session token, result), within the caller's deadline.
    pub safe_attempts: u32,
    /// Idle pooled connections kept per host.
    pub pool_max_idle_per_host: usize,
    /// Most requests in flight to the core service at once (a bulkhead;
    /// 3D channels have their own). It also bounds the connections the
    /// pool opens. Past it a call answers `RESOURCE_EXHAUSTED` /
    /// `OVERLOADED` at once; nothing queues.
    pub max_concurrent_requests: usize,
    /// Offset from UTC, in minutes, of the times the upstream writes
    /// without one (`dataCriacaoAppkey`, `dtCriacao`, ...), for the
    /// result's timestamps. Default -180: Brasília time, where the service
    /// runs.
    pub utc_offset_minutes: i16,
    /// Operation paths, relative to the base URLs.
    pub paths: PathsConfig,
    /// Form and JSON field names that the spec does not show.
    pub fields: FieldsConfig,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            result_base_url: String::new(),
            timeout_ms: 10_000,
            connect_timeout_ms: 2_000,
            max_response_bytes: 32 * 1024 * 1024,
            appkey_ttl_secs: 300,
            credential_ttl_secs: 3 * 3600,
            safe_attempts: 2,
            pool_max_idle_per_host: 32,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            utc_offset_minutes: DEFAULT_UTC_OFFSET_MINUTES,
            paths: PathsConfig::default(),
            fields: FieldsConfig::default(),
        }
    }
}

impl UpstreamConfig {
    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

/// Operation paths; the defaults are those of `docs/upstream.md`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathsConfig {
    /// `/credencial`.
    pub credential: String,
    /// `/appkey`.
    pub appkey: String,
    /// `/challenge`.
    pub challenge: String,
    /// `/captcha` (2D submit).
    pub captcha: String,
    /// `/3d/session-token`, for the default channel.
    pub session_token_3d: String,
    /// `/3d/liveness`, for the default channel.
    pub liveness_3d: String,
    /// `/document` (images and digital licence).
    pub document: String,
    /// `/document/result`, relative to `result_base_url`.
    pub result: String,
}

impl Default for PathsConfig {
    fn default() -> Self {
        Self {
            credential: "/service/captcha/credencial".into(),
            appkey: "/service/captcha/appkey".into(),
            challenge: "/service/captcha/challenge".into(),
            captcha: "/service/captcha/captcha".into(),
            session_token_3d: "/service/captcha/3d/session-token".into(),
            liveness_3d: "/service/captcha/3d/liveness".into(),
            document: "/service/captcha/document".into(),
            result: "/service/captcha/document/result".into(),
        }
    }
}

/// Field names of the requests whose shape the spec does not show.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldsConfig {
    /// `/credencial` form: the login.
    pub credential_user: String,
    /// `/credencial` form: the password.
    pub credential_password: String,
    /// `/captcha` form: the challenge key.
    pub captcha_challenge_key: String,
    /// `/captcha` form: the concatenated snapshots.
    pub captcha_images: String,
    /// `/document` JSON: the image list.
    pub document_images: String,
    /// `/document` JSON: the digital licence.
    pub document_qrcode: String,
}

impl Default for FieldsConfig {
    fn default() -> Self {
        Self {
            credential_user: "user".into(),
            credential_password: "pass".into(),
            captcha_challenge_key: "chkey".into(),
            captcha_images: "images".into(),
            document_images: "images".into(),
            document_qrcode: "qrcode".into(),
        }
    }
}
