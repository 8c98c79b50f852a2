//! Every knob of the sandbox, with the spec's defaults.
//!
//! Durations are plain integers (seconds or milliseconds, as the key says)
//! so the same structure reads well from TOML and from JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::faults::FaultRule;

/// Configuration of one sandbox instance.
///
/// `Default` is what `idgate serve` embeds when no upstream is configured:
/// every listener on an ephemeral loopback port, operator `sandbox` /
/// `sandbox`, a primary and an alternative 3D channel, the spec's expiries.
///
/// Read only: not `Serialize`, since it holds secrets (operator passwords,
/// webhook credentials), and its `Debug` redacts them.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Addresses of the core and result listeners.
    pub listen: ListenConfig,
    /// Operator logins accepted by `/credencial`.
    pub operators: Vec<OperatorConfig>,
    /// 3D liveness vendor channels; the first one is also served at the
    /// standard 3D paths of the core listener.
    pub channels: Vec<ChannelConfig>,
    /// Credential token validity (spec: configurable, default 3 h).
    pub credential_ttl_secs: u64,
    /// Appkey validity (spec: configurable, default 5 min).
    pub appkey_ttl_secs: u64,
    /// How long generated 2D challenges stay executable (spec: 60 s).
    pub challenge_window_secs: u64,
    /// Time from a document submission to the end of its processing.
    /// The first half is "awaiting", the second "in processing".
    pub processing_delay_ms: u64,
    /// How long after its expiry an appkey's journey result stays readable
    /// before the entry is purged (then the result answers 404).
    pub result_retention_secs: u64,
    /// Whether the result stays readable once the appkey expired (the
    /// spec says the appkey "can be used to read the journey result").
    /// When false, such a read answers 401, which the spec also allows
    /// ("credentials expired"); see `docs/upstream.md#timing-and-state-rules`.
    pub result_readable_after_expiry: bool,
    /// Upper bound of each table (credential tokens, appkeys, challenges,
    /// 3D sessions); a call that would exceed it answers 500.
    pub max_entries: usize,
    /// Largest accepted request body; larger bodies get the operation's
    /// bad-input status.
    pub max_body_bytes: usize,
    /// Offset, in minutes from UTC, in which every date and time on the wire
    /// is written (the service runs on Brasília time, UTC-03:00).
    pub utc_offset_minutes: i16,
    /// The customer's settings at the service.
    pub customer: CustomerConfig,
    /// Completion notices.
    pub webhook: WebhookConfig,
    /// Faults active from start (the admin endpoint can add more).
    pub faults: Vec<FaultRule>,
    /// Size of the selfie every 3D proof returns as the frontal photo in
    /// `fotos`, in bytes: the sample JPEG, padded after its end marker
    /// (which decoders ignore) to this size, so that a result weighs what
    /// a real capture's does (a few hundred KiB). 0, or less than the
    /// sample: the sample as it is (a few hundred bytes).
    pub selfie_bytes: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            listen: ListenConfig::default(),
            operators: vec![OperatorConfig {
                login: "sandbox".to_owned(),
                password: "sandbox".to_owned(),
            }],
            channels: vec![
                ChannelConfig {
                    name: "primary".to_owned(),
                    vendor: "sandbox-vendor-a".to_owned(),
                    vendor_url: "https://vendor-a.sandbox.invalid/3d".to_owned(),
                    listen: LOOPBACK_EPHEMERAL.to_owned(),
                    contingency: false,
                },
                ChannelConfig {
                    name: "alternative".to_owned(),
                    vendor: "sandbox-vendor-b".to_owned(),
                    vendor_url: "https://vendor-b.sandbox.invalid/3d".to_owned(),
                    listen: LOOPBACK_EPHEMERAL.to_owned(),
                    contingency: false,
                },
            ],
            credential_ttl_secs: 3 * 60 * 60,
            appkey_ttl_secs: 5 * 60,
            challenge_window_secs: 60,
            processing_delay_ms: 5_000,
            result_retention_secs: 24 * 60 * 60,
            result_readable_after_expiry: true,
            max_entries: 100_000,
            max_body_bytes: 16 * 1024 * 1024,
            utc_offset_minutes: -180,
            customer: CustomerConfig::default(),
            webhook: WebhookConfig::default(),
            faults: Vec::new(),
            selfie_bytes: 0,
        }
    }
}

/// Loopback on an ephemeral port: the default of every listener.
pub const LOOPBACK_EPHEMERAL: &str = "127.0.0.1:0";

/// Listener addresses (`host:port`; port 0 picks a free port).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// The service root: every operation but the result.
    pub core: String,
    /// The result port (`{result_base_url}`).
    pub result: String,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            core: LOOPBACK_EPHEMERAL.to_owned(),
            result: LOOPBACK_EPHEMERAL.to_owned(),
        }
    }
}

/// One operator login for `/credencial`. Not `Serialize`, and `Debug`
/// redacts the password.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// Form field `user`.
    pub login: String,
    /// Form field `pass`.
    pub password: String,
}

impl fmt::Debug for OperatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorConfig")
            .field("login", &self.login)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// One 3D liveness vendor channel.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// Channel name, also its path segment under `/service/captcha/channels/`.
    pub name: String,
    /// Vendor name returned as `vendor` by the session token.
    pub vendor: String,
    /// Vendor address returned as `url` by the session token.
    pub vendor_url: String,
    /// Address of the channel's own listener.
    #[serde(default = "loopback_ephemeral")]
    pub listen: String,
    /// Initial value of `isContingency` in session-token responses.
    #[serde(default)]
    pub contingency: bool,
}

fn loopback_ephemeral() -> String {
    LOOPBACK_EPHEMERAL.to_owned()
}

/// The customer's product settings: which checks the journey runs.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CustomerConfig {
    /// Face match of the document photo against the selfie; when false the
    /// `facematch` object is omitted from the result.
    pub face_match: bool,
    /// Registry check; when false the `registry` object is omitted.
    pub registry: bool,
    /// `analiseDocumento.idCliente`.
    pub client_id: u64,
    /// `analiseDocumento.idSubcliente`.
    pub subclient_id: u64,
}

impl Default for CustomerConfig {
    fn default() -> Self {
        Self {
            face_match: true,
            registry: true,
            client_id: 1001,
            subclient_id: 1,
        }
    }
}

/// Where and how completion notices are delivered. Not `Serialize`, and
/// `Debug` redacts the password and the signing secret.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// Master switch; with no `url` nothing is sent either.
    pub enabled: bool,
    /// The customer endpoint (`{webhook_url}`).
    pub url: Option<String>,
    /// HTTP Basic user, sent when set.
    pub basic_user: Option<String>,
    /// HTTP Basic password (empty when only the user is set).
    pub basic_password: Option<String>,
    /// Standard Webhooks secret, `whsec_<base64>`; adds the signature
    /// headers when set.
    pub signing_secret: Option<String>,
    /// Attempts per notice, the first included.
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles each time.
    pub initial_backoff_ms: u64,
    /// Cap of the delay between attempts.
    pub max_backoff_ms: u64,
    /// Timeout of one attempt.
    pub timeout_ms: u64,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            url: None,
            basic_user: None,
            basic_password: None,
            signing_secret: None,
            max_attempts: 5,
            initial_backoff_ms: 500,
            max_backoff_ms: 30_000,
            timeout_ms: 5_000,
        }
    }
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("WebhookConfig")
            .field("enabled", &self.enabled)
            .field("url", &self.url)
            .field("basic_user", &self.basic_user)
            .field("basic_password", &redacted(&self.basic_password))
            .field("signing_secret", &redacted(&self.signing_secret))
            .field("max_attempts", &self.max_attempts)
            .field("initial_backoff_ms", &self.initial_backoff_ms)
            .field("max_backoff_ms", &self.max_backoff_ms)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_every_secret() {
        let config = SandboxConfig {
            operators: vec![OperatorConfig {
                login: "op-login".into(),
                password: "op-secret-pass".into(),
            }],
            webhook: WebhookConfig {
                basic_user: Some("hook-user".into()),
                basic_password: Some("hook-secret-pass".into()),
                signing_secret: Some("whsec_c2VjcmV0LWtleQ==".into()),
                ..WebhookConfig::default()
            },
            ..SandboxConfig::default()
        };
        let shown = format!("{config:?} {config:#?}");
        for secret in ["op-secret-pass", "hook-secret-pass", "whsec_", "c2VjcmV0"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("op-login") && shown.contains("hook-user"));
    }
}
