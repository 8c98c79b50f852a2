//! A configuration reload (SIGHUP), all or nothing.
//!
//! [`Gateway::reload`] reads the file again; [`Gateway::reload_from`]
//! applies a configuration in two steps:
//!
//! 1. prepare, fallible and without effect: the `[[callers]]` table
//!    built, a JWKS file read and parsed, every TLS listener's files
//!    loaded (the paths the gateway started with), the channel set checked
//!    against itself and the routing mode in force;
//! 2. commit, infallible swaps: channels, keys and callers, certificates.
//!
//! A reload refused at any step of 1 changes nothing: it is said at ERROR,
//! counted `idgate_config_reloads_total{outcome="refused"}`, and
//! `idgate_config_last_reload_success_timestamp_seconds` keeps the time of
//! the configuration still in force. Reloads run one at a time; nothing in
//! either step awaits, so a reload is never half-applied by a cancelled
//! future. `[auth] mode`, `[auth.jwt]`, `[tls]` paths and the listeners'
//! addresses apply at the next start.

use super::{StartError, setup::PreparedTls};
use crate::{
    auth::CallersReload,
    channels::{ChannelReload, ReloadSummary},
    config::Config,
    sync::lock,
};

use super::{gateway::Gateway, upstream::embedded};

/// Everything a reload changes, checked, waiting to be swapped in.
/// Dropping it changes nothing.
struct Prepared<'a> {
    tls: PreparedTls,
    callers: CallersReload<'a>,
    /// Holds the routing mode until committed (see
    /// [`crate::channels::ChannelRouter::prepare_reload`]).
    channels: ChannelReload<'a>,
}

/// What an applied reload changed, for its log line.
#[derive(Debug)]
struct Applied {
    channels: ReloadSummary,
    callers: usize,
    tls_listeners: usize,
}

impl Gateway {
    /// Re-reads the configuration file (SIGHUP) and applies it as
    /// [`Gateway::reload_from`] does. A file that does not parse or
    /// validate is refused like any other part of a reload: nothing
    /// changes.
    pub async fn reload(&self) -> Result<(), StartError> {
        let loaded = Config::load(self.reloadable.config_path.as_deref());
        let result = loaded
            .map_err(StartError::from)
            .and_then(|config| self.apply(&config));
        self.reloaded(result)
    }

    /// Applies `config`'s run-time parts, all or nothing: the channel set
    /// (with no `[[channels]]`, the channels the gateway started with come
    /// back, on the embedded sandbox with `config`'s
    /// `[embedded_channels]`), the `[[callers]]` table and a JWKS file,
    /// and every TLS listener's certificate, key, client CA and CRL files
    /// (served from the next connection on). Connections, session
    /// bindings, calls in flight and open streams are kept, except the
    /// `WatchJourney` streams of a caller the new table removes or
    /// narrows (see `api::revocation`).
    pub fn reload_from(&self, config: &Config) -> Result<(), StartError> {
        let result = self.apply(config);
        self.reloaded(result)
    }

    /// Prepares then commits, one reload at a time.
    fn apply(&self, config: &Config) -> Result<Applied, StartError> {
        let _one_at_a_time = lock(&self.reloadable.reloading);
        let prepared = self.prepare(config)?;
        Ok(Self::commit(prepared))
    }

    /// Reads and checks everything `config` changes; changes nothing.
    /// The channels come last: their check holds the routing mode until
    /// the commit, and nothing slow runs while it is held.
    fn prepare(&self, config: &Config) -> Result<Prepared<'_>, StartError> {
        let auth = &self.services.auth;
        if auth.enabled() && config.auth.as_ref().map(|a| a.mode) != Some(auth.mode()) {
            tracing::warn!("[auth] mode changed in the file; it applies at the next start");
        }
        let callers = auth.prepare_reload(&config.callers)?;
        let tls = self.reloadable.tls.prepare()?;
        let specs = match (&self.reloadable.sandbox, config.channels.is_empty()) {
            (_, false) => config.channels.clone(),
            (Some(sandbox), true) => embedded::channels(sandbox, config),
            (None, true) => self.reloadable.embedded_channels.clone(),
        };
        let channels = self.services.router.prepare_reload(specs)?;
        Ok(Prepared {
            tls,
            callers,
            channels,
        })
    }

    /// Swaps everything in; cannot fail. Each prepared part knows what it
    /// swaps; the callers' table goes in after the channels and its keys,
    /// so that the open streams it wakes meet the whole new state.
    fn commit(prepared: Prepared<'_>) -> Applied {
        let Prepared {
            tls,
            callers,
            channels,
        } = prepared;
        let channels = channels.commit();
        let tls_listeners = tls.install();
        let count = callers.callers();
        callers.commit();
        Applied {
            channels,
            callers: count,
            tls_listeners,
        }
    }

    /// Says and counts how a reload ended.
    fn reloaded(&self, result: Result<Applied, StartError>) -> Result<(), StartError> {
        let metrics = &self.services.metrics;
        match result {
            Ok(applied) => {
                metrics.record_config_reload(true);
                tracing::info!(
                    added = ?applied.channels.added,
                    removed = ?applied.channels.removed,
                    changed = ?applied.channels.changed,
                    callers = applied.callers,
                    tls_listeners = applied.tls_listeners,
                    "configuration reloaded"
                );
                Ok(())
            }
            Err(error) => {
                metrics.record_config_reload(false);
                tracing::error!(
                    error = %error,
                    "configuration reload refused; nothing changed, the running configuration stays"
                );
                Err(error)
            }
        }
    }
}
