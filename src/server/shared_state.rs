//! The state this gateway keeps beyond a call: on Redis when `[cluster]`
//! names one (a fleet), else in this process, on its embedded store
//! (`[store]`, the default) or in memory; how long each kind of entry
//! lives, from the configuration of the concern that owns it.

use std::time::Duration;

use super::StartError;
use crate::{
    cluster::{ClusterSettings, Embedded, Shared, Ttls, embedded::Backend},
    config::Config,
    events::WebhookSettings,
    telemetry::Metrics,
};

/// Where the state beyond a call lives, as the preflight found it: the
/// store is opened (and locked) before the first socket, so that a start
/// that cannot keep its journeys fails before it serves any.
pub(super) enum StateTier {
    /// `[cluster]` names a Redis: the fleet's, its secrets read.
    Fleet(Box<ClusterSettings>),
    /// `[store] backend = "embedded"`: the open store.
    Embedded(Embedded),
    /// `[store] backend = "memory"`: forgotten on restart.
    Memory,
}

impl StateTier {
    /// Opens the tier `config` names: with `[cluster]`, its settings
    /// resolved (nothing connects yet); else the embedded store, sealed
    /// with `[cluster]`'s secret key when one is named, else with its own
    /// key file. Fails naming the path and the cause; never falls back to
    /// memory.
    pub(super) fn open(config: &Config) -> Result<Self, StartError> {
        if let Some(settings) = config.cluster.resolve()? {
            return Ok(Self::Fleet(Box::new(settings)));
        }
        match config.store.backend {
            Backend::Memory => Ok(Self::Memory),
            Backend::Embedded => {
                let keys = config.cluster.secret_keys()?;
                Ok(Self::Embedded(Embedded::open(&config.store, keys)?))
            }
        }
    }

    /// What `idgate check` says of it.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::Fleet(_) => "state on the [cluster] Redis".to_owned(),
            Self::Embedded(store) => format!("state in {}", store.path().display()),
            Self::Memory => "state in memory (forgotten on restart)".to_owned(),
        }
    }
}

/// Builds the shared state of this gateway on `tier`: Redis when
/// `[cluster]` names one (a server, Sentinel or a Redis Cluster; connects
/// nothing yet), else the embedded store (its sweeper started) or memory.
pub(super) fn build(
    config: &Config,
    tier: StateTier,
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
    let store = match tier {
        StateTier::Fleet(settings) => return fleet(&settings, ttls, metrics),
        StateTier::Memory => {
            tracing::warn!(
                "[store] backend = \"memory\": journeys, idempotency records and budget windows are forgotten on restart"
            );
            return Ok(Shared::memory(ttls));
        }
        StateTier::Embedded(store) => store,
    };
    store.start_sweeper(config.store.sweep_interval());
    tracing::info!(
        path = %store.path().display(),
        max_bytes = config.store.max_bytes,
        "single replica: state on the embedded store"
    );
    Ok(Shared::embedded(store, ttls))
}

/// The fleet's shared state on the Redis of `settings`.
fn fleet(settings: &ClusterSettings, ttls: Ttls, metrics: &Metrics) -> Result<Shared, StartError> {
    let shared = Shared::redis(settings, ttls, metrics.clone())
        .map_err(|e| StartError::Cluster(format!("{:?}", e.kind())))?;
    tracing::info!(
        key_prefix = %settings.key_prefix,
        redis = settings.target.kind(),
        "fleet mode: shared state on Redis ([store] is not read: a single replica's store file is not migrated)"
    );
    Ok(shared)
}
