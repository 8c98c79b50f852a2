//! The embedded sandbox: with no `[upstream]` configured, the reference
//! REST service runs in process on loopback and the gateway is pointed at
//! it, with the gateway's own webhook receiver as its completion target.

use std::sync::Arc;

use base64::Engine as _;

use super::{super::StartError, Upstream};
use crate::{
    config::{ChannelSpec, Config, ConfigError, OperatorProfile, UpstreamConfig},
    domain::Password,
    events::{BasicCredentials, WebhookSettings},
    sandbox::{Clock, Sandbox, SandboxHandle, SystemClock},
};

/// Starts the sandbox of `config` and describes it as the gateway's
/// upstream. The webhook credentials are agreed between the two sides:
/// the receiver's (`webhook`) when configured, else a random Basic pair.
/// A sandbox whose webhook is off (`[sandbox.webhook] enabled = false`)
/// gets none, and a gateway configured with none has no receiver: its
/// watchers read from the start instead of waiting for a notice that
/// cannot come.
pub(in crate::server) async fn start(
    config: &Config,
    webhook: &mut WebhookSettings,
    webhook_url: String,
    clock: Option<Arc<dyn Clock>>,
) -> Result<Upstream, StartError> {
    let mut sb = config.sandbox.clone();
    sb.webhook.url = Some(webhook_url);
    if !sb.webhook.enabled {
        // Nothing will be sent.
    } else if webhook.basic.is_none() && webhook.hmac.is_none() {
        let password = random_secret();
        webhook.basic = Some(BasicCredentials {
            user: "sandbox".to_owned(),
            password: Password::new(password.clone()),
        });
        sb.webhook.basic_user = Some("sandbox".to_owned());
        sb.webhook.basic_password = Some(password);
    } else {
        // The embedded sandbox is the sender: unless its own section says
        // otherwise, it presents what the receiver was configured to expect
        // (otherwise every notice is refused and watchers wait for the
        // fallback).
        if let Some(basic) = webhook
            .basic
            .as_ref()
            .filter(|_| sb.webhook.basic_user.is_none())
        {
            sb.webhook.basic_user = Some(basic.user.clone());
            sb.webhook.basic_password = Some(basic.password.expose().to_owned());
        }
        if let Some(hmac) = webhook
            .hmac
            .as_ref()
            .filter(|_| sb.webhook.signing_secret.is_none())
        {
            sb.webhook.signing_secret = Some(format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(hmac.key())
            ));
        }
    }
    let operator =
        sb.operators.first().cloned().ok_or_else(|| {
            ConfigError::Invalid("[sandbox] needs at least one operator".to_owned())
        })?;
    let clock = clock.unwrap_or_else(|| Arc::new(SystemClock));
    tracing::info!(
        "no [upstream] configured: starting the embedded sandbox (a reference implementation of the REST service, not the real one)"
    );
    let handle = Sandbox::start(sb, clock).await?;
    let upstream = UpstreamConfig {
        base_url: handle.base_url(),
        result_base_url: handle.result_base_url(),
        utc_offset_minutes: config.sandbox.utc_offset_minutes,
        ..UpstreamConfig::default()
    };
    let embedded = channels(&handle, config);
    let channels = if config.channels.is_empty() {
        embedded.clone()
    } else {
        config.channels.clone()
    };
    tracing::info!(
        base_url = %handle.base_url(),
        result_base_url = %handle.result_base_url(),
        channels = channels.len(),
        "gateway upstream is the embedded sandbox"
    );
    Ok(Upstream {
        config: upstream,
        operators: vec![OperatorProfile {
            name: crate::config::EMBEDDED_PROFILE.to_owned(),
            login: operator.login,
            password: Password::new(operator.password),
        }],
        channels,
        embedded_channels: embedded,
        sandbox: Some(handle),
    })
}

/// The embedded sandbox's channels, in its order, with the call settings
/// of `[embedded_channels]`.
pub(in crate::server) fn channels(handle: &SandboxHandle, config: &Config) -> Vec<ChannelSpec> {
    handle
        .channels()
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            config
                .embedded_channels
                .spec(c.name, c.base_url, i32::try_from(i).unwrap_or(i32::MAX))
        })
        .collect()
}

/// A random secret for the embedded sandbox's webhook credentials.
fn random_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}
