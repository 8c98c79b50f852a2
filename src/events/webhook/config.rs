//! `[webhook]`: the completion-notice receiver's configuration, and its
//! resolved, validated form.
//!
//! The serde struct mirrors the TOML keys; `resolve` reads the secrets
//! they name and checks the combination, so a receiver can only be built
//! from settings that say how senders authenticate.

use std::{path::PathBuf, time::Duration};

use base64::Engine as _;
use serde::Deserialize;

use crate::{
    config_source::{ConfigError, read_secret},
    domain::Password,
};

/// `[webhook]`: the completion-notice receiver on the HTTP listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// Path of the receiver on the HTTP listener.
    pub path: String,
    /// HTTP Basic user the service sends.
    pub basic_user: Option<String>,
    /// Environment variable holding the HTTP Basic password.
    pub basic_password_env: Option<String>,
    /// File holding the HTTP Basic password.
    pub basic_password_file: Option<PathBuf>,
    /// Environment variable holding the Standard Webhooks secret
    /// (`whsec_<base64>`).
    pub hmac_secret_env: Option<String>,
    /// File holding the Standard Webhooks secret.
    pub hmac_secret_file: Option<PathBuf>,
    /// Accept notices without any authentication. Must be set explicitly:
    /// anyone who can reach the listener could then trigger result reads.
    pub allow_unauthenticated: bool,
    /// Largest body accepted, in bytes; larger is refused with 413.
    pub max_body_bytes: usize,
    /// How far a signed request's `webhook-timestamp` may be from now, in
    /// either direction, in seconds.
    pub replay_window_secs: u64,
    /// How long a delivery is remembered to drop duplicates, in seconds.
    pub dedupe_ttl_secs: u64,
    /// Most deliveries remembered for dedupe.
    pub dedupe_max_entries: usize,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            path: "/webhooks/journey".into(),
            basic_user: None,
            basic_password_env: None,
            basic_password_file: None,
            hmac_secret_env: None,
            hmac_secret_file: None,
            allow_unauthenticated: false,
            max_body_bytes: 64 * 1024,
            replay_window_secs: 300,
            dedupe_ttl_secs: 900,
            dedupe_max_entries: 100_000,
        }
    }
}

/// Shortest webhook Basic password accepted (characters): the receiver
/// faces the network, and a short password is guessed online.
pub const MIN_BASIC_PASSWORD_CHARS: usize = 16;

/// HTTP Basic credentials a sender must present.
#[derive(Debug, Clone)]
pub struct BasicCredentials {
    /// The user.
    pub user: String,
    /// The password (redacted in `Debug`).
    pub password: Password,
}

/// A Standard Webhooks signing secret: the decoded key bytes. `Debug`
/// prints nothing of it.
#[derive(Clone)]
pub struct HmacSecret(Vec<u8>);

impl HmacSecret {
    /// Parses `whsec_<base64>` (the prefix is optional, as in the Standard
    /// Webhooks libraries). The error never quotes the value.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let b64 = text.trim();
        let b64 = b64.strip_prefix("whsec_").unwrap_or(b64);
        let key = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| {
                ConfigError::Invalid(
                    "webhook HMAC secret must be `whsec_` followed by base64".to_owned(),
                )
            })?;
        if key.len() < 16 {
            return Err(ConfigError::Invalid(
                "webhook HMAC secret must decode to at least 16 bytes".to_owned(),
            ));
        }
        Ok(Self(key))
    }

    /// The key bytes, for the HMAC.
    pub(crate) fn key(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for HmacSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacSecret(<redacted>)")
    }
}

/// The webhook receiver's settings with secrets resolved.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Path of the receiver.
    pub path: String,
    /// HTTP Basic credentials, when configured.
    pub basic: Option<BasicCredentials>,
    /// Standard Webhooks secret, when configured.
    pub hmac: Option<HmacSecret>,
    /// Accept notices without authentication (explicit opt-in).
    pub allow_unauthenticated: bool,
    /// Largest body accepted.
    pub max_body_bytes: usize,
    /// Allowed clock difference of signed requests.
    pub replay_window: Duration,
    /// How long deliveries are remembered for dedupe.
    pub dedupe_ttl: Duration,
    /// Most deliveries remembered.
    pub dedupe_max_entries: usize,
}

impl WebhookSettings {
    /// Settings with the defaults of [`WebhookConfig`] and no
    /// authentication configured; set `basic`, `hmac` or
    /// `allow_unauthenticated` before building a receiver.
    pub fn new() -> Self {
        let d = WebhookConfig::default();
        Self {
            path: d.path,
            basic: None,
            hmac: None,
            allow_unauthenticated: false,
            max_body_bytes: d.max_body_bytes,
            replay_window: Duration::from_secs(d.replay_window_secs),
            dedupe_ttl: Duration::from_secs(d.dedupe_ttl_secs),
            dedupe_max_entries: d.dedupe_max_entries,
        }
    }

    /// Checks the combination: some authentication, or the explicit
    /// opt-out; a path; a dedupe memory that outlives the replay window.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.basic.is_none() && self.hmac.is_none() && !self.allow_unauthenticated {
            return Err(ConfigError::Invalid(
                "webhook: configure basic_user with basic_password_env/basic_password_file, \
                 or hmac_secret_env/hmac_secret_file, or set allow_unauthenticated = true"
                    .to_owned(),
            ));
        }
        if self
            .basic
            .as_ref()
            .is_some_and(|b| b.password.expose().chars().count() < MIN_BASIC_PASSWORD_CHARS)
        {
            // Names the key, never the value.
            return Err(ConfigError::Invalid(format!(
                "webhook.basic_password (basic_password_env / basic_password_file) must be at least {MIN_BASIC_PASSWORD_CHARS} characters"
            )));
        }
        crate::config_source::bounds::check_route_path("webhook.path", &self.path)?;
        if self.max_body_bytes == 0 {
            return Err(ConfigError::Invalid(
                "webhook.max_body_bytes must be positive".to_owned(),
            ));
        }
        if self.hmac.is_some() && self.dedupe_ttl < self.replay_window {
            // A signed delivery replayed inside the window after dedupe
            // forgot it would be processed twice.
            return Err(ConfigError::Invalid(
                "webhook.dedupe_ttl_secs must be at least webhook.replay_window_secs".to_owned(),
            ));
        }
        Ok(())
    }
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self::new()
    }
}

impl WebhookConfig {
    /// Reads the secrets this configuration names and validates the result.
    pub fn resolve(&self) -> Result<WebhookSettings, ConfigError> {
        let settings = self.resolve_unchecked()?;
        settings.validate()?;
        Ok(settings)
    }

    /// Reads the secrets without requiring an authentication method: the
    /// server decides what to do without one (credentials shared with the
    /// embedded sandbox, or no receiver at all).
    pub fn resolve_unchecked(&self) -> Result<WebhookSettings, ConfigError> {
        let has_password = self.basic_password_env.is_some() || self.basic_password_file.is_some();
        let basic = match (&self.basic_user, has_password) {
            (Some(user), true) => Some(BasicCredentials {
                user: user.clone(),
                password: Password::new(read_secret(
                    "webhook.basic_password",
                    self.basic_password_env.as_deref(),
                    self.basic_password_file.as_deref(),
                )?),
            }),
            (None, false) => None,
            (Some(_), false) => {
                return Err(ConfigError::Invalid(
                    "webhook.basic_user needs basic_password_env or basic_password_file".to_owned(),
                ));
            }
            (None, true) => {
                return Err(ConfigError::Invalid(
                    "webhook.basic_password_env/basic_password_file needs basic_user".to_owned(),
                ));
            }
        };
        let hmac = if self.hmac_secret_env.is_some() || self.hmac_secret_file.is_some() {
            Some(HmacSecret::parse(&read_secret(
                "webhook.hmac_secret",
                self.hmac_secret_env.as_deref(),
                self.hmac_secret_file.as_deref(),
            )?)?)
        } else {
            None
        };
        let settings = WebhookSettings {
            path: self.path.clone(),
            basic,
            hmac,
            allow_unauthenticated: self.allow_unauthenticated,
            max_body_bytes: self.max_body_bytes,
            replay_window: Duration::from_secs(self.replay_window_secs),
            dedupe_ttl: Duration::from_secs(self.dedupe_ttl_secs),
            dedupe_max_entries: self.dedupe_max_entries,
        };
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_keys() {
        let w = WebhookConfig::default();
        assert_eq!(w.path, "/webhooks/journey");
        assert_eq!(w.max_body_bytes, 65_536);
        assert_eq!(w.replay_window_secs, 300);
        assert!(!w.allow_unauthenticated);
    }

    #[test]
    fn a_receiver_without_authentication_is_refused_unless_explicitly_allowed() {
        let err = WebhookConfig::default().resolve().unwrap_err().to_string();
        assert!(err.contains("allow_unauthenticated"), "{err}");
        let open = WebhookConfig {
            allow_unauthenticated: true,
            ..WebhookConfig::default()
        };
        assert!(open.resolve().unwrap().basic.is_none());
    }

    #[test]
    fn basic_user_without_a_password_source_is_refused() {
        let c = WebhookConfig {
            basic_user: Some("vendor".into()),
            ..WebhookConfig::default()
        };
        assert!(c.resolve().unwrap_err().to_string().contains("basic_user"));
    }

    #[test]
    fn secrets_are_read_from_files_and_the_hmac_secret_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        let sec = dir.path().join("sec");
        std::fs::write(&pw, "s3cret-webhook-password\n").unwrap();
        std::fs::write(&sec, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n").unwrap();
        let c = WebhookConfig {
            basic_user: Some("vendor".into()),
            basic_password_file: Some(pw),
            hmac_secret_file: Some(sec),
            ..WebhookConfig::default()
        };
        let s = c.resolve().unwrap();
        assert_eq!(
            s.basic.unwrap().password.expose(),
            "s3cret-webhook-password"
        );
        assert_eq!(s.hmac.unwrap().key().len(), 24);
    }

    #[test]
    fn a_malformed_hmac_secret_is_refused_without_quoting_it() {
        let err = HmacSecret::parse("whsec_not*base64!")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("not*base64"), "{err}");
        assert!(HmacSecret::parse("whsec_c2hvcnQ=").is_err());
        assert_eq!(
            format!(
                "{:?}",
                HmacSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap()
            ),
            "HmacSecret(<redacted>)"
        );
    }

    #[test]
    fn a_basic_password_under_16_characters_fails_to_load_naming_the_key_not_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "short-pass-1234\n").unwrap();
        let c = WebhookConfig {
            basic_user: Some("vendor".into()),
            basic_password_file: Some(pw.clone()),
            ..WebhookConfig::default()
        };
        let err = c.resolve().unwrap_err().to_string();
        assert!(err.contains("webhook.basic_password"), "{err}");
        assert!(err.contains("16"), "{err}");
        assert!(!err.contains("short-pass"), "{err}");
        std::fs::write(&pw, "sixteen-chars-ok\n").unwrap();
        assert!(c.resolve().is_ok());
    }

    #[test]
    fn dedupe_memory_shorter_than_the_replay_window_is_refused_with_hmac() {
        let mut s = WebhookSettings::new();
        s.hmac = Some(HmacSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap());
        s.dedupe_ttl = Duration::from_secs(60);
        assert!(s.validate().is_err());
        s.dedupe_ttl = Duration::from_secs(300);
        assert!(s.validate().is_ok());
    }
}
