//! The state this gateway keeps beyond a call: on Redis when `[cluster]`
//! names one (a fleet), else in this process; how long each kind of entry
//! lives, from the configuration of the concern that owns it.

use std::time::Duration;

use super::StartError;
use crate::{
    cluster::{Shared, Ttls},
    config::Config,
    events::WebhookSettings,
    telemetry::Metrics,
};

/// Builds the shared state of this gateway, on Redis when `[cluster]`
/// names one (a server, Sentinel or a Redis Cluster), else in memory;
/// connects nothing yet.
pub(super) fn build(
    config: &Config,
    webhook: &WebhookSettings,
    metrics: &Metrics,
) -> Result<Shared, StartError> {
    let ttls = Ttls {
        journey: config.journeys.retention(),
        journey_max_entries: config.journeys.max_entries,
        journey_unknown: Duration::from_secs(config.journeys.unknown_ttl_secs),
        binding: Duration::from_secs(config.routing.binding_ttl_secs),
        binding_max_entries: config.routing.max_bindings,
        dedupe: webhook.dedupe_ttl,
        dedupe_max_entries: webhook.dedupe_max_entries,
        idempotency: Duration::from_secs(config.idempotency.ttl_secs),
        idempotency_max_entries: config.idempotency.max_entries,
        figures: Duration::from_secs(60 * u64::from(config.routing.figures_retention_minutes)),
        usage: config.usage.retention(),
    };
    if config.watch.shared_result_secs.is_some() {
        tracing::warn!(
            "[watch] shared_result_secs has no effect: Redis carries no journey result, each replica with watchers reads it itself; remove the key"
        );
    }
    let Some(settings) = config.cluster.resolve()? else {
        return Ok(Shared::memory(ttls));
    };
    let shared = Shared::redis(&settings, ttls, metrics.clone())
        .map_err(|e| StartError::Cluster(format!("{:?}", e.kind())))?;
    tracing::info!(
        key_prefix = %settings.key_prefix,
        redis = settings.target.kind(),
        "fleet mode: shared state on Redis"
    );
    Ok(shared)
}
