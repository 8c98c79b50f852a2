//! What a start refuses before its first socket, in one function that
//! `serve` ([`super::start_with`]) and `idgate check` ([`super::check`])
//! both run, so the check cannot pass a configuration the start refuses:
//! each listener's TLS loaded, the webhook's secrets read, `[cluster]`
//! resolved, or else the embedded store opened (`[store]`: its
//! directory, lock and key), the configured `[upstream]` with its
//! operators' passwords and its HTTP client's TLS, an open gateway only when asked for, bearer
//! tokens and the admin token only over TLS or loopback (or their
//! switch). What needs the network or a socket comes after, in each: the
//! start fetches a JWKS URL and starts the embedded sandbox, the check
//! reads the JWKS file only.

use super::{StartError, callers, setup::ListenerTlsSet, shared_state::StateTier, upstream};
use crate::{
    config::{Config, ConfigError},
    domain::AdminToken,
    events::WebhookSettings,
    upstream::HttpClientFactory,
};

/// What the start goes on with once nothing was refused.
pub(super) struct Preflight {
    /// Each listener's TLS, loaded.
    pub(super) tls: ListenerTlsSet,
    /// The webhook's secrets, read.
    pub(super) webhook: WebhookSettings,
    /// The configured `[upstream]`; `None`: the embedded sandbox.
    pub(super) upstream: Option<upstream::Upstream>,
    /// The admin token; without one, the error that says why there is no
    /// admin listener (a missing or empty secret).
    pub(super) admin_token: Result<AdminToken, ConfigError>,
    /// Where the state beyond a call lives, the embedded store open.
    pub(super) state: StateTier,
}

impl Preflight {
    /// Whether the admin listener will be served.
    pub(super) fn serves_admin(&self) -> bool {
        self.admin_token.is_ok()
    }
}

/// Reads and judges everything of `config` a start refuses before it
/// binds a socket.
pub(super) fn preflight(config: &Config) -> Result<Preflight, StartError> {
    let tls = ListenerTlsSet::load(&config.tls, callers::grpc_client_certs(config))?;
    let webhook = config.webhook.resolve_unchecked()?;
    let state = StateTier::open(config)?;
    let upstream = match &config.upstream {
        Some(up) => {
            let resolved = upstream::configured(config, up)?;
            HttpClientFactory::new(&resolved.config)?;
            Some(resolved)
        }
        None => None,
    };
    callers::check_required(config)?;
    let admin_token = admin_token(config)?;
    for (retired, now) in config.retired_keys() {
        tracing::warn!(
            key = retired,
            now,
            "a retired configuration key: still read for this release; move its value to the key named `now`"
        );
    }
    Ok(Preflight {
        tls,
        webhook,
        upstream,
        admin_token,
        state,
    })
}

/// The admin token, judged: one too short, or one the admin listener
/// would take in clear off loopback without `[listen]
/// allow_plaintext_admin`, refuses the start. `Ok(Err(..))`: no token, no
/// admin listener.
fn admin_token(config: &Config) -> Result<Result<AdminToken, ConfigError>, StartError> {
    match config.admin.resolve_token() {
        Ok(token) => {
            config.check_admin_token_over_tls()?;
            Ok(Ok(token))
        }
        Err(missing @ ConfigError::MissingSecret { .. }) => Ok(Err(missing)),
        Err(e) => Err(e.into()),
    }
}
