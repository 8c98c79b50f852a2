//! `[admin]`: where the admin token comes from, and how long it must be.

use std::path::PathBuf;

use serde::Deserialize;

use crate::{
    config_source::{ConfigError, read_secret},
    domain::AdminToken,
};

/// `[admin]`: where the bearer token of `ChannelAdminService` comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Environment variable holding the token (used when no file is set).
    pub token_env: String,
    /// File holding the token (trailing newline ignored); wins over the
    /// variable.
    pub token_file: Option<PathBuf>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token_env: "IDGATE_ADMIN_TOKEN".to_owned(),
            token_file: None,
        }
    }
}

/// Shortest admin token accepted: 32 characters (e.g. 24 random bytes in
/// Base64), so that guessing one over the network is hopeless.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

impl AdminConfig {
    /// Reads the admin token. A missing or empty one is
    /// [`ConfigError::MissingSecret`] (the admin listener stays off); one
    /// shorter than [`MIN_ADMIN_TOKEN_CHARS`] is [`ConfigError::Invalid`]
    /// (the gateway refuses to start rather than guard its vendor switch
    /// with a guessable secret).
    pub fn resolve_token(&self) -> Result<AdminToken, ConfigError> {
        let secret = match &self.token_file {
            Some(file) => read_secret("admin.token", None, Some(file))?,
            None => read_secret("admin.token", Some(&self.token_env), None)?,
        };
        // Trimmed here, and stored trimmed (`AdminToken::new`): the
        // length checked is the length compared.
        let secret = zeroize::Zeroizing::new(secret);
        let secret = secret.trim();
        if !secret.is_empty() && secret.chars().count() < MIN_ADMIN_TOKEN_CHARS {
            return Err(ConfigError::Invalid(format!(
                "admin.token: the admin token must be at least {MIN_ADMIN_TOKEN_CHARS} characters"
            )));
        }
        AdminToken::new(secret).ok_or_else(|| ConfigError::MissingSecret {
            what: "admin.token".to_owned(),
            why: "the token is empty".to_owned(),
        })
    }
}
