//! The state beyond a call: one trait per concern, each with its memory
//! and its Redis implementation side by side, composed in [`Shared`]; and
//! what only a fleet does, in [`fleet`], which a single process does not
//! have.
//!
//! ```text
//! journey, events --------> JourneyStore   journeys.rs   journey ref -> record (sealed)
//! channels::ChannelRouter --> BindingStore   bindings.rs   journey ref -> issuing channel
//! channels::rollout --------> RolloutStore   rollout.rs    rollout record, step counts
//! channels::probe ----------> ProbeStore     probes.rs     each channel's last probe verdict
//! events::WebhookReceiver --> DedupeStore    dedupe.rs     first delivery
//! api::liveness, events ----> ProgressStore  progress.rs   the steps that produce a result went through
//! spend::Spend ------------> SpendStore     spend.rs      idempotency, budgets
//! usage::UsageBook ---------> UsageStore     usage.rs      charge-back counts by day and caller
//!
//! Shared::embedded (one process, the default): Embedded* stores on one
//!                   embedded::Embedded file ([store]), each with its
//!                   Memory* store in front (embedded_tier.rs); no fleet
//! Shared::memory  ([store] backend = "memory"): Memory* stores, no fleet
//! Shared::redis   ([cluster] Redis):          Redis* stores on one RedisConn (redis.rs)
//!                   commands: one server, the Sentinel master or a Redis Cluster
//!                   (redis/link.rs; each reconnects), key prefix, command timeout
//!                 + Shared::fleet (fleet.rs): control state, figures, notices,
//!                   read turns, the rollout's driver lease; the event stream {prefix}{fleet}:events read
//!                   on a connection of its own (fleet/supervisor.rs)
//! ```
//!
//! Every store does what its trait says in every tier: a store of one
//! process keeps what it is given, as the fleet's does, and the third
//! tier (the embedded durable store, [`embedded`]) implements the same
//! traits, so that one replica keeps across restarts what a fleet keeps
//! on Redis. What only a
//! fleet does (telling the other replicas, reading their control state
//! and figures, taking turns) is not a store of one process answering
//! nothing: it is [`Fleet`], which one process simply does not have
//! (`Shared::fleet` is `None`).
//!
//! What a fleet shares: the journey records (journey reference -> owner,
//! appkey, profile, request key, sealed whole), 3D session bindings
//! (journey reference -> channel name), webhook dedupe, the channel
//! control state (routing mode, drained channels, contingency hold) and
//! completion notices, fanned out as (journey reference, status, delivery
//! id). Redis carries facts, never a result: a replica that holds
//! watchers of a journey reads its result from the vendor itself, once,
//! when told it is final (`fleet::read_turns`). Nothing personal goes to
//! Redis in clear, and no photo at all. Circuit breakers stay per
//! replica. Each store's file names its keys.
//!
//! Each replica keeps its own tier too (its journey records, the router's
//! bindings, which hold the issuing channel generation): the shared tier
//! is consulted when the own tier does not know, and is what keeps
//! working across replicas. When Redis is unreachable every call answers
//! within the command timeout, [`ClusterError::Unavailable`] or a local
//! fallback, and the gateway degrades as `docs/operations.md` tells.
//!
//! Spend's state is shared the same way ([`spend`]):
//! idempotency records of `CreateJourney` (a keyed digest of the request
//! and the journey it made, whose record holds the appkey) and budget
//! window counters.
//!
//! Each user takes only the store it needs. A change to one concern stays
//! in its room: the journey record is `domain::JourneyRecord`, its store
//! and both implementations are `journeys/`.
//!
//! - [`config`]: the `[cluster]` section.
//! - [`encryption`]: AES-256-GCM sealing of appkeys, keyed request digests.
//! - [`journeys`], [`bindings`], [`dedupe`], [`spend`], [`rollout`],
//!   [`probes`], [`progress`], [`usage`]: the eight stores.
//! - [`fleet`]: what only a fleet does.
//! - [`redis`]: the connection the Redis stores and the fleet share.
//! - [`embedded`]: the file the embedded stores share (`[store]`);
//!   `embedded_tier`: how its answers read as a store's.
//! - `future`, `error`, `ttls`: what every store answers with, and how
//!   long its entries live; leaves that the stores import, so nothing
//!   imports this file but those who compose [`Shared`].

pub mod bindings;
pub mod config;
pub mod dedupe;
pub mod embedded;
mod embedded_tier;
pub mod encryption;
mod error;
pub mod fleet;
mod future;
pub mod journeys;
pub mod probes;
pub mod progress;
pub mod redis;
pub mod rollout;
pub mod spend;
mod ttls;
pub mod usage;

use std::{sync::Arc, time::Duration};

pub use bindings::{BindingStore, Bound, EmbeddedBindings, Issuer, MemoryBindings, RedisBindings};
pub use config::{ClusterConfig, ClusterSettings, RedisMode, RedisTarget};
pub use dedupe::{DedupeStore, DeliveryKey, EmbeddedDedupe, MemoryDedupe, RedisDedupe};
pub use embedded::{Embedded, StoreConfig, StoreError};
pub use error::ClusterError;
pub use fleet::{
    Fleet, FleetEvent, SeedFn,
    control::{ControlChange, ControlState, FleetControl},
    driver_lease::DriverLease,
    figures::{FigureDelta, FigureSums, FleetFigures},
    notices::{FleetNotice, FleetNotices, RESULT_READ},
    read_turns::ReadTurns,
};
pub use future::BoxFuture;
pub use journeys::{EmbeddedJourneys, JourneyStore, JourneysConfig, MemoryJourneys, RedisJourneys};
pub use probes::{EmbeddedProbes, MemoryProbes, ProbeStore, RedisProbes};
pub use progress::{EmbeddedProgress, MemoryProgress, ProgressStore, RedisProgress};
pub use redis::RedisConn;
pub use rollout::{EmbeddedRollout, MemoryRollout, RedisRollout, RolloutStore};
pub use spend::{
    BudgetTake, BudgetWindow, EmbeddedSpend, IdemRecord, IdemState, MemorySpend, RedisSpend,
    SpendStore, WindowUse,
};
pub use ttls::Ttls;
pub use usage::{EmbeddedUsage, MemoryUsage, RedisUsage, UsageStore};

use crate::telemetry::Metrics;

/// The state beyond a call: one store per concern, each in the tier this
/// gateway runs on, and the fleet when there is one. Cheap to clone; hand
/// each user the store it needs.
#[derive(Clone)]
pub struct Shared {
    /// The journey records: owner, appkey, profile, request, by reference.
    pub journeys: Arc<dyn JourneyStore>,
    /// Webhook deliveries seen.
    pub dedupe: Arc<dyn DedupeStore>,
    /// Spend's idempotency records and budget windows.
    pub spend: Arc<dyn SpendStore>,
    /// The guarded rollout: its record and step counts.
    pub rollout: Arc<dyn RolloutStore>,
    /// Watched journeys' progress: the steps that produce a result went
    /// through the gateway.
    pub progress: Arc<dyn ProgressStore>,
    /// The last conformance probe verdict of each channel.
    pub probes: Arc<dyn ProbeStore>,
    /// The charge-back report's counts by day and caller.
    pub usage: Arc<dyn UsageStore>,
    /// What only a fleet does (control state, figures, notices, read
    /// turns, the rollout's driver lease); `None` for one process, which
    /// has no other replica.
    pub fleet: Option<Fleet>,
    /// How long 3D session bindings live, and how many a replica holds.
    bindings: (Duration, usize),
    /// The embedded store of a single replica that keeps its state
    /// across restarts (`[store]`), which its session bindings use too.
    embedded: Option<Embedded>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("kind", &self.kind())
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// One process: every store in memory, bounded by `ttls`; no fleet.
    pub fn memory(ttls: Ttls) -> Self {
        Self {
            journeys: Arc::new(MemoryJourneys::new(ttls.journey, ttls.journey_max_entries)),
            dedupe: Arc::new(MemoryDedupe::new(ttls.dedupe, ttls.dedupe_max_entries)),
            spend: Arc::new(MemorySpend::new(
                ttls.idempotency,
                ttls.idempotency_max_entries,
            )),
            rollout: Arc::new(MemoryRollout::default()),
            progress: Arc::new(MemoryProgress::new(ttls.journey, ttls.journey_max_entries)),
            probes: Arc::new(MemoryProbes::default()),
            usage: Arc::new(MemoryUsage::new(ttls.usage)),
            fleet: None,
            bindings: (ttls.binding, ttls.binding_max_entries),
            embedded: None,
        }
    }

    /// One process whose state outlives it: every store on the embedded
    /// `store`, each with its memory tier in front (reads from memory,
    /// writes answered once durable), the live records read back into
    /// memory now; no fleet.
    pub fn embedded(store: Embedded, ttls: Ttls) -> Self {
        Self {
            journeys: Arc::new(EmbeddedJourneys::open(
                store.clone(),
                ttls.journey,
                ttls.journey_max_entries,
            )),
            dedupe: Arc::new(EmbeddedDedupe::new(
                store.clone(),
                ttls.dedupe,
                ttls.dedupe_max_entries,
            )),
            spend: Arc::new(EmbeddedSpend::open(
                store.clone(),
                ttls.idempotency,
                ttls.idempotency_max_entries,
            )),
            rollout: Arc::new(EmbeddedRollout::open(store.clone())),
            progress: Arc::new(EmbeddedProgress::new(
                store.clone(),
                ttls.journey,
                ttls.journey_max_entries,
            )),
            probes: Arc::new(EmbeddedProbes::open(store.clone())),
            usage: Arc::new(EmbeddedUsage::open(store.clone(), ttls.usage)),
            fleet: None,
            bindings: (ttls.binding, ttls.binding_max_entries),
            embedded: Some(store),
        }
    }

    /// The store of 3D session bindings whose issuers are `I` (the
    /// router's channel generations, which this module cannot name): in
    /// memory for one process, on the embedded store in front of the
    /// process's own when it has one; for a fleet, on Redis in front of
    /// the replica's own. A new store each call: its one user (the
    /// router) holds the one it asked for.
    pub fn session_bindings<I: Issuer>(&self) -> Arc<dyn BindingStore<I>> {
        let (ttl, max_entries) = self.bindings;
        let local = MemoryBindings::new(ttl, max_entries);
        match (&self.fleet, &self.embedded) {
            (Some(fleet), _) => Arc::new(RedisBindings::new(fleet.conn().clone(), ttl, local)),
            (None, Some(store)) => Arc::new(EmbeddedBindings::new(store.clone(), ttl, local)),
            (None, None) => Arc::new(local),
        }
    }

    /// A fleet on the Redis of `settings`. Connects lazily: nothing waits
    /// here; [`Fleet::start`] runs the supervisor.
    pub fn redis(
        settings: &ClusterSettings,
        ttls: Ttls,
        metrics: Metrics,
    ) -> Result<Self, ::redis::RedisError> {
        let conn = RedisConn::new(settings, metrics)?;
        Ok(Self {
            embedded: None,
            journeys: Arc::new(RedisJourneys::new(
                conn.clone(),
                ttls.journey,
                ttls.journey_max_entries,
                ttls.journey_unknown,
            )),
            dedupe: Arc::new(RedisDedupe::new(
                conn.clone(),
                ttls.dedupe,
                ttls.dedupe_max_entries,
            )),
            spend: Arc::new(RedisSpend::new(
                conn.clone(),
                MemorySpend::new(ttls.idempotency, ttls.idempotency_max_entries),
            )),
            rollout: Arc::new(RedisRollout::new(conn.clone())),
            progress: Arc::new(RedisProgress::new(
                conn.clone(),
                ttls.journey,
                ttls.journey_max_entries,
            )),
            probes: Arc::new(RedisProbes::new(conn.clone())),
            usage: Arc::new(RedisUsage::new(conn.clone(), ttls.usage)),
            fleet: Some(Fleet::new(conn, ttls.figures)),
            bindings: (ttls.binding, ttls.binding_max_entries),
        })
    }

    /// `memory`, `embedded` or `redis`, for logs.
    pub fn kind(&self) -> &'static str {
        match (&self.fleet, &self.embedded) {
            (Some(_), _) => "redis",
            (None, Some(_)) => "embedded",
            (None, None) => "memory",
        }
    }

    /// True while every store answers: always for one process, while
    /// Redis answers for a fleet.
    pub fn is_up(&self) -> bool {
        self.fleet.as_ref().is_none_or(Fleet::is_up)
    }

    /// Stops the fleet's supervisor, if there is a fleet (the gateway is
    /// shutting down).
    pub fn stop(&self) {
        if let Some(fleet) = &self.fleet {
            fleet.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_on_its_store_has_no_fleet_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let shared = Shared::embedded(Embedded::open(&config, None).unwrap(), Ttls::default());
        assert!(shared.fleet.is_none());
        assert_eq!(shared.kind(), "embedded");
        assert!(shared.is_up());
    }

    #[test]
    fn one_process_has_no_fleet() {
        let shared = Shared::memory(Ttls::default());
        assert!(shared.fleet.is_none());
        assert_eq!(shared.kind(), "memory");
        assert!(shared.is_up());
    }
}
