//! `[routing]`: how new 3D sessions pick a channel (the routing mode, a
//! weighted split, the contingency hold) and how long their bindings live;
//! and the one rule for whether a mode can apply to a channel set.

use std::{collections::HashSet, fmt, str::FromStr};

use serde::Deserialize;

use super::ChannelConfigError;
use crate::channels::{
    figures::DEFAULT_RETENTION_MINUTES,
    names::valid_name,
    weighted::{WEIGHTED_PREFIX, WeightedSplit, parse_entries},
};

/// How new 3D sessions are routed. Verifications are never routed by mode:
/// they go to the channel that issued the session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RoutingMode {
    /// Healthy, undrained channels by priority, failing over on faults.
    #[default]
    Auto,
    /// Only the channel of lowest priority number; no failover.
    ForcePrimary,
    /// Only the second channel by priority; no failover.
    ForceAlternative,
    /// Only the named channel; no failover.
    Channel(String),
    /// New sessions split among channels by weight, per journey (see
    /// [`WeightedSplit`]); failover as in `auto`.
    Weighted(WeightedSplit),
}

impl RoutingMode {
    /// The channel this mode names, if any.
    pub fn channel(&self) -> Option<&str> {
        match self {
            RoutingMode::Channel(name) => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoutingMode::Auto => f.write_str("auto"),
            RoutingMode::ForcePrimary => f.write_str("force_primary"),
            RoutingMode::ForceAlternative => f.write_str("force_alternative"),
            RoutingMode::Channel(name) => write!(f, "channel:{name}"),
            RoutingMode::Weighted(split) => split.fmt(f),
        }
    }
}

impl FromStr for RoutingMode {
    type Err = ChannelConfigError;

    /// Parses `auto`, `force_primary`, `force_alternative`,
    /// `channel:<name>` or `weighted:<name>=<weight>,...`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(RoutingMode::Auto),
            "force_primary" => Ok(RoutingMode::ForcePrimary),
            "force_alternative" => Ok(RoutingMode::ForceAlternative),
            other => {
                if let Some(entries) = other.strip_prefix(WEIGHTED_PREFIX) {
                    return parse_entries(entries)
                        .map(RoutingMode::Weighted)
                        .map_err(|e| ChannelConfigError(format!("routing mode: {e}")));
                }
                match other.strip_prefix("channel:") {
                    Some(name) if valid_name(name) => Ok(RoutingMode::Channel(name.to_owned())),
                    // The value is not echoed: it may come from anywhere
                    // (an override, an admin call), and errors quote no value.
                    _ => Err(ChannelConfigError(
                        "routing mode must be auto, force_primary, force_alternative, channel:<name> or weighted:<name>=<weight>,...".to_owned(),
                    )),
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for RoutingMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// The mode at start-up; changed at run time with `SetRoutingMode`.
    pub mode: RoutingMode,
    /// After the primary answers `isContingency: true`, prefer the
    /// alternative for new sessions for this many seconds. 0: off.
    pub contingency_hold_secs: u64,
    /// How long the gateway remembers which channel issued the session of
    /// an appkey (the appkey lives 5 minutes by default).
    pub binding_ttl_secs: u64,
    /// Most session bindings kept; the oldest go first.
    pub max_bindings: usize,
    /// Attempts of `/3d/session-token` on the one channel a forced mode
    /// names (`force_*`, `channel:<name>`), within the caller's deadline:
    /// it consumes nothing, so a transient fault is retried there (a
    /// forced mode never fails over). `auto` fails over instead.
    pub forced_session_attempts: u32,
    /// Minutes of per-channel vendor figures kept for
    /// `GetChannelFigures` / `idgate channels compare` (per-minute
    /// buckets), 1 to 10080.
    pub figures_retention_minutes: u32,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            mode: RoutingMode::Auto,
            contingency_hold_secs: 0,
            binding_ttl_secs: 600,
            max_bindings: 100_000,
            forced_session_attempts: 2,
            figures_retention_minutes: DEFAULT_RETENTION_MINUTES,
        }
    }
}

/// Why a routing mode cannot apply to a channel set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// `channel:<name>` names a channel that is not in the set.
    #[error("routing mode names channel `{0}`, which is not configured")]
    UnknownChannel(String),
    /// `force_primary` with no channel, or `force_alternative` with one:
    /// every new session would fail with `NO_CHANNEL_AVAILABLE`.
    #[error("routing mode {mode} needs at least {needed} configured channel(s)")]
    TooFewChannels {
        /// The mode, as written in the configuration.
        mode: &'static str,
        /// Channels the mode needs.
        needed: usize,
    },
}

impl From<ModeError> for ChannelConfigError {
    fn from(e: ModeError) -> Self {
        ChannelConfigError(e.to_string())
    }
}

/// Checks that `mode` can apply to the channels named `channels`: a named
/// channel (and every channel of a weighted split) must be among them,
/// `force_primary` needs one channel and
/// `force_alternative` two. The one set of rules for start-up, reloads and
/// `SetRoutingMode`.
pub fn validate_mode<'a>(
    mode: &RoutingMode,
    channels: impl IntoIterator<Item = &'a str>,
) -> Result<(), ModeError> {
    let configured: HashSet<&str> = channels.into_iter().collect();
    let count = configured.len();
    let too_few = |mode, needed| Err(ModeError::TooFewChannels { mode, needed });
    match mode {
        RoutingMode::Channel(name) if !configured.contains(name.as_str()) => {
            Err(ModeError::UnknownChannel(name.clone()))
        }
        RoutingMode::Weighted(split) => match split.names().find(|n| !configured.contains(n)) {
            Some(name) => Err(ModeError::UnknownChannel(name.to_owned())),
            None => Ok(()),
        },
        RoutingMode::ForcePrimary if count < 1 => too_few("force_primary", 1),
        RoutingMode::ForceAlternative if count < 2 => too_few("force_alternative", 2),
        _ => Ok(()),
    }
}
