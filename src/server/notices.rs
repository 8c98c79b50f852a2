//! Whether completion notices can come, and the receiver that takes them:
//! a gateway whose `[webhook]` says how senders authenticate listens for
//! notices (and its watchers may wait a grace period for one); one that
//! does not has no receiver, and its watchers read the result from the
//! start.

use super::{Services, StartError};
use crate::events::{WebhookReceiver, WebhookSettings};

/// Whether `[webhook]` says how notices authenticate, so that a receiver
/// listens (and watchers may wait for a notice).
pub(super) fn receives_notices(webhook: &WebhookSettings) -> bool {
    webhook.basic.is_some() || webhook.hmac.is_some() || webhook.allow_unauthenticated
}

/// The webhook receiver, when `[webhook]` says how notices authenticate.
pub(super) fn webhook_receiver(
    webhook: WebhookSettings,
    services: &Services,
) -> Result<Option<WebhookReceiver>, StartError> {
    if !receives_notices(&webhook) {
        tracing::warn!(
            "webhook receiver disabled: configure [webhook] basic_user/basic_password_env or hmac_secret_env; WatchJourney reads the result with backoff from the start"
        );
        return Ok(None);
    }
    let shared = &services.shared;
    Ok(Some(WebhookReceiver::with_stores(
        webhook,
        services.watches.clone(),
        shared.dedupe.clone(),
        shared.fleet.as_ref().map(|f| f.notices().clone()),
    )?))
}
