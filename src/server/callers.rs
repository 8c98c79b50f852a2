//! The start step that decides who may call the public listener: the
//! [`Authenticator`] of `[auth]` and `[[callers]]`, secure by default.
//!
//! A gateway in front of a real `[upstream]` with no `[auth]` refuses to
//! start: open access must be asked for (`[auth] mode = "none"`). The
//! embedded sandbox (the README's first command) stays open. Running open
//! is said once at WARN and shown as `idgate_auth_enabled 0`.

use std::sync::Arc;

use super::StartError;
use crate::{
    auth::{AuthEvents, AuthMode, Authenticator, Shares},
    config::{Config, ConfigError},
    telemetry::Metrics,
    tls::ClientCerts,
};

/// The error of a real `[upstream]` without `[auth]`.
pub(super) const AUTH_REQUIRED: &str = "a gateway in front of a real [upstream] must authenticate its callers: configure [auth] mode = \"jwt\", \"mtls\" or \"jwt_or_mtls\" with [[callers]], or set [auth] mode = \"none\" (or IDGATE_AUTH__MODE=none) to run open on purpose";

/// Whether the public listener requires client certificates: not when a
/// bearer token may stand in for one (`jwt_or_mtls`).
pub(super) fn grpc_client_certs(config: &Config) -> ClientCerts {
    match config.auth.as_ref().map(|a| a.mode) {
        Some(AuthMode::JwtOrMtls) => ClientCerts::Optional,
        _ => ClientCerts::Required,
    }
}

/// What the start refuses of `[auth]` before building anything: bearer
/// tokens without TLS, and an open gateway in front of a real upstream
/// that did not ask to be open.
pub(super) fn check_required(config: &Config) -> Result<(), StartError> {
    config.check_tokens_over_tls()?;
    if config.auth.is_none() && config.upstream.is_some() {
        return Err(ConfigError::Invalid(AUTH_REQUIRED.to_owned()).into());
    }
    Ok(())
}

/// What the caller table divides among the configured callers.
pub(super) fn shares(config: &Config) -> Shares {
    Shares {
        body_bytes: config.serving.max_body_bytes_in_flight,
        journeys: config.journeys.max_entries,
        small_message: config.limits.max_small_message_bytes,
        document_message: config.limits.grpc_message_bytes(),
    }
}

/// Builds the authenticator (loading a JWKS file or fetching a URL), on
/// a configuration the preflight passed (`check_required` among it).
pub(super) async fn authentication(
    config: &Config,
    metrics: &Metrics,
) -> Result<Arc<Authenticator>, StartError> {
    if config.takes_tokens_in_clear() {
        tracing::warn!(
            key = "auth.allow_plaintext_tokens",
            "bearer tokens are taken without TLS on a public listener other machines can reach: only behind a sidecar that terminates TLS"
        );
    }
    let events: Arc<dyn AuthEvents> = Arc::new(metrics.clone());
    let auth = match &config.auth {
        None => Authenticator::open(events),
        Some(auth) => {
            Authenticator::from_config(auth, &config.callers, shares(config), events).await?
        }
    };
    if auth.enabled() {
        tracing::info!(
            mode = auth.mode().as_str(),
            "callers are authenticated on the public listener"
        );
    } else {
        tracing::warn!(
            "the public listener runs open: any client may call every operation on every journey ([auth] mode = \"none\", or the embedded sandbox)"
        );
    }
    metrics.set_auth_enabled(auth.enabled());
    Ok(Arc::new(auth))
}
