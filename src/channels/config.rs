//! Configuration of the 3D liveness vendor channels: `[[channels]]` and
//! `[embedded_channels]`; `[routing]` is in `routing` (the admin API's `[admin]` lives
//! with that API).
//!
//! ```toml
//! [routing]
//! mode = "auto"                 # force_primary | force_alternative | channel:<name>
//!                               # | weighted:primary=90,alternative=10
//! contingency_hold_secs = 0     # > 0: after the primary answers isContingency,
//!                               # prefer the alternative for this long
//!
//! [[channels]]
//! name     = "primary"
//! base_url = "https://service.example/facecaptcha"
//! priority = 0
//! timeout_ms = 10000
//! breaker = { failure_rate_percent = 50, minimum_calls = 20, window_secs = 10 }
//! ```

use std::{collections::HashSet, time::Duration};

use serde::Deserialize;

pub use super::breaker::BreakerConfig;
pub use super::names::valid_name;
use crate::upstream::ChannelEndpoint;

/// Default path of the session-token operation (`docs/upstream.md`).
pub const DEFAULT_SESSION_TOKEN_PATH: &str = "/service/captcha/3d/session-token";
/// Default path of the liveness operation (`docs/upstream.md`).
pub const DEFAULT_LIVENESS_PATH: &str = "/service/captcha/3d/liveness";

/// A channel configuration that cannot be used; messages name keys and
/// channel names, never secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("channels: {0}")]
pub struct ChannelConfigError(pub String);

/// One 3D liveness vendor channel: a named base URL plus the paths of the
/// two 3D operations (one host may serve two vendors on two path pairs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpec {
    /// Unique name, shown to operators and returned to callers so that any
    /// gateway instance can route the verification. Letters, digits, `-`,
    /// `_` and `.` only: it becomes a metric label.
    pub name: String,
    /// Host plus service root path, without a trailing slash.
    pub base_url: String,
    /// Path of `/3d/session-token`, relative to `base_url`.
    #[serde(default = "default_session_token_path")]
    pub session_token_path: String,
    /// Path of `/3d/liveness`, relative to `base_url`.
    #[serde(default = "default_liveness_path")]
    pub liveness_path: String,
    /// Lower is preferred: the lowest is the "primary", the next the
    /// "alternative". Ties keep configuration order.
    #[serde(default)]
    pub priority: i32,
    /// Budget of one call on this channel, in milliseconds (the caller's
    /// deadline, when shorter, wins).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Circuit breaker settings.
    #[serde(default)]
    pub breaker: BreakerConfig,
    /// Most requests in flight to this channel at once (a bulkhead: one
    /// slow vendor cannot take every slot). Past it a session start fails
    /// over like an open circuit, a verification answers
    /// `RESOURCE_EXHAUSTED` / `OVERLOADED`; nothing queues.
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
}

/// Default bulkhead of one upstream or channel.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = crate::upstream::DEFAULT_MAX_CONCURRENT_REQUESTS;

fn default_max_concurrent_requests() -> usize {
    DEFAULT_MAX_CONCURRENT_REQUESTS
}

impl ChannelSpec {
    /// A channel with the default paths, timeout and breaker.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>, priority: i32) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            session_token_path: default_session_token_path(),
            liveness_path: default_liveness_path(),
            priority,
            timeout_ms: default_timeout_ms(),
            breaker: BreakerConfig::default(),
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }
    }

    /// The per-call budget.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Where this channel's calls go, URLs parsed once.
    pub fn endpoint(&self) -> ChannelEndpoint {
        ChannelEndpoint::new(
            self.base_url.clone(),
            &self.session_token_path,
            &self.liveness_path,
            self.timeout(),
        )
        .named(self.name.clone())
        .with_max_concurrent_requests(self.max_concurrent_requests)
    }
}

fn default_session_token_path() -> String {
    DEFAULT_SESSION_TOKEN_PATH.to_owned()
}

fn default_liveness_path() -> String {
    DEFAULT_LIVENESS_PATH.to_owned()
}

fn default_timeout_ms() -> u64 {
    10_000
}

/// `[embedded_channels]`: the call settings of the 3D channels the gateway
/// takes from the embedded sandbox (no `[upstream]` and no `[[channels]]`).
///
/// The sandbox binds its channel listeners on free ports at start-up, so
/// their URLs cannot be written in `[[channels]]` beforehand; this table
/// gives those channels what a `[[channels]]` entry would: a per-call
/// timeout and breaker settings. It is ignored when `[[channels]]` is set.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddedChannelsConfig {
    /// Budget of one call on each embedded channel, in milliseconds.
    pub timeout_ms: u64,
    /// Circuit breaker settings of each embedded channel.
    pub breaker: BreakerConfig,
    /// Bulkhead of each embedded channel (see
    /// [`ChannelSpec::max_concurrent_requests`]).
    pub max_concurrent_requests: usize,
}

impl Default for EmbeddedChannelsConfig {
    fn default() -> Self {
        Self {
            timeout_ms: default_timeout_ms(),
            breaker: BreakerConfig::default(),
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }
    }
}

impl EmbeddedChannelsConfig {
    /// Checks the timeout and breaker settings.
    pub fn validate(&self) -> Result<(), ChannelConfigError> {
        check_call_settings(self.timeout_ms, self.max_concurrent_requests, &self.breaker)
            .map_err(|what| ChannelConfigError(format!("embedded_channels: {what}")))
    }

    /// The spec of an embedded channel named `name` at `base_url`.
    pub fn spec(
        &self,
        name: impl Into<String>,
        base_url: impl Into<String>,
        priority: i32,
    ) -> ChannelSpec {
        ChannelSpec {
            timeout_ms: self.timeout_ms,
            breaker: self.breaker.clone(),
            max_concurrent_requests: self.max_concurrent_requests,
            ..ChannelSpec::new(name, base_url, priority)
        }
    }
}

/// Checks a channel set: names valid and unique, URLs and paths well
/// formed, breaker and timeout settings usable.
pub fn validate_channels(specs: &[ChannelSpec]) -> Result<(), ChannelConfigError> {
    let mut seen = HashSet::new();
    for (i, c) in specs.iter().enumerate() {
        // A valid name is an identifier and helps find the entry; any
        // other text is told by its index only, never quoted.
        let at = |what: &str| {
            ChannelConfigError(if valid_name(&c.name) {
                format!("channels[{i}] ({}): {what}", c.name)
            } else {
                format!("channels[{i}]: {what}")
            })
        };
        if !valid_name(&c.name) {
            return Err(at("name must be 1 to 64 letters, digits, `-`, `_` or `.`"));
        }
        if !seen.insert(c.name.as_str()) {
            return Err(at("name is used by another channel"));
        }
        if !(c.base_url.starts_with("http://") || c.base_url.starts_with("https://")) {
            return Err(at("base_url must start with http:// or https://"));
        }
        for (key, path) in [
            ("session_token_path", &c.session_token_path),
            ("liveness_path", &c.liveness_path),
        ] {
            if !path.starts_with('/') {
                return Err(at(&format!("{key} must start with `/`")));
            }
        }
        check_call_settings(c.timeout_ms, c.max_concurrent_requests, &c.breaker).map_err(at)?;
    }
    Ok(())
}

/// The timeout and breaker settings every channel needs to be usable.
fn check_call_settings(
    timeout_ms: u64,
    max_concurrent_requests: usize,
    b: &BreakerConfig,
) -> Result<(), &'static str> {
    if max_concurrent_requests == 0 {
        return Err("max_concurrent_requests must be at least 1");
    }
    if timeout_ms == 0 {
        return Err("timeout_ms must be positive");
    }
    b.validate()
}

/// Checks `[[channels]]` and `[routing]` together.
///
/// With no `[[channels]]` the gateway derives its channels from
/// `[upstream]` or the embedded sandbox at start-up, so the mode is checked
/// only then, by [`ChannelRouter::new`](super::ChannelRouter::new) (which
/// passes `derived = true`: the specs are the ones it runs).
pub fn validate(specs: &[ChannelSpec], routing: &RoutingConfig) -> Result<(), ChannelConfigError> {
    validate_set(specs, routing, false)
}

/// [`validate`], checking the mode even against an empty `specs` when
/// `derived` (the specs are the router's, not the file's).
pub(crate) fn validate_set(
    specs: &[ChannelSpec],
    routing: &RoutingConfig,
    derived: bool,
) -> Result<(), ChannelConfigError> {
    validate_channels(specs)?;
    if derived || !specs.is_empty() {
        validate_mode(&routing.mode, specs.iter().map(|c| c.name.as_str()))?;
    }
    if !(1..=super::figures::MAX_RETENTION_MINUTES).contains(&routing.figures_retention_minutes) {
        return Err(ChannelConfigError(format!(
            "routing.figures_retention_minutes must be from 1 to {}",
            super::figures::MAX_RETENTION_MINUTES
        )));
    }
    if routing.max_bindings == 0 || routing.binding_ttl_secs == 0 {
        return Err(ChannelConfigError(
            "routing.max_bindings and routing.binding_ttl_secs must be positive".to_owned(),
        ));
    }
    Ok(())
}

mod routing;

pub use routing::{ModeError, RoutingConfig, RoutingMode, validate_mode};

#[cfg(test)]
mod tests;
