//! The upstream side of the gateway: where the REST service is, who logs
//! in to it, and which 3D channels serve it.

use super::StartError;
use crate::{
    config::{ChannelSpec, Config, ConfigError, OperatorProfile, UpstreamConfig},
    sandbox::SandboxHandle,
};

pub(super) mod embedded;

/// The upstream side, resolved.
pub(super) struct Upstream {
    pub(super) config: UpstreamConfig,
    pub(super) operators: Vec<OperatorProfile>,
    /// The channels to route 3D liveness over.
    pub(super) channels: Vec<ChannelSpec>,
    /// What a reload with no `[[channels]]` returns to.
    pub(super) embedded_channels: Vec<ChannelSpec>,
    pub(super) sandbox: Option<SandboxHandle>,
}

/// The configured `[upstream]`: its operators' passwords read (from the
/// environment or files) and its channels; nothing started or called.
pub(super) fn configured(config: &Config, up: &UpstreamConfig) -> Result<Upstream, StartError> {
    let operators = config
        .operators
        .iter()
        .map(|o| o.resolve())
        .collect::<Result<Vec<_>, _>>()?;
    if operators.is_empty() {
        return Err(ConfigError::Invalid(
            "[upstream] is configured but no [[operators]] profile is".to_owned(),
        )
        .into());
    }
    let channels = if config.channels.is_empty() {
        // The core service's own 3D paths, as the one channel.
        vec![ChannelSpec {
            session_token_path: up.paths.session_token_3d.clone(),
            liveness_path: up.paths.liveness_3d.clone(),
            timeout_ms: up.timeout_ms,
            ..ChannelSpec::new("primary", up.base_url.clone(), 0)
        }]
    } else {
        config.channels.clone()
    };
    Ok(Upstream {
        config: up.clone(),
        operators,
        channels: channels.clone(),
        embedded_channels: channels,
        sandbox: None,
    })
}
