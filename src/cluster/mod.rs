//! The state a fleet of gateway replicas shares: one trait per concern,
//! each with its memory and its Redis implementation side by side,
//! composed in [`Shared`].
//!
//! ```text
//! api, guard, events -------> JourneyStore    journeys.rs   journey ref -> record (sealed)
//! channels::ChannelRouter -> BindingStore    bindings.rs   journey ref -> issuing channel
//!                      |---> ControlStore    control.rs    routing mode, drains, hold
//! channels::rollout -------> RolloutStore    rollout.rs    rollout record, driver lease, step counts
//! events::WebhookReceiver -> DedupeStore     dedupe.rs     first delivery; notice fan-out
//! events::JourneyWatches ------> ProgressStore   progress.rs   submitted steps, read turn, result announced
//! spend::SpendGuard -------> SpendStore      spend.rs      idempotency, budgets
//! channels::VendorStats --> VendorStatsStore vendor_stats.rs per-minute vendor figures
//! usage::UsageBook --------> UsageStore      usage.rs      charge-back counts by day and caller
//!
//! Shared::memory  (one process, the default): Memory* stores (no figures store:
//!                   the router's own figures are the whole truth)
//! Shared::redis   ([cluster] Redis):          Redis* stores on one RedisConn (redis.rs)
//!                   commands: one server, the Sentinel master or a Redis Cluster
//!                   (redis/link.rs; each reconnects), key prefix, command timeout
//!                   {prefix}{fleet}:events: stream fan-out on a connection of its
//!                   own, supervised (redis/stream.rs)
//! ```
//!
//! What is shared: the journey records (journey reference -> owner,
//! appkey, profile, request key, sealed whole), 3D session bindings (journey reference -> channel name),
//! webhook dedupe, the channel control state (routing mode, drained
//! channels, contingency hold) and completion notices, fanned out as
//! (journey reference, status, delivery id). Redis carries facts, never
//! a result: a replica that holds watchers of a journey reads its result
//! from the vendor itself, once, when told it is final ([`progress`]).
//! Nothing personal goes to Redis in clear, and no photo at all.
//! Circuit breakers stay per replica. Each store's file names its keys.
//!
//! Each replica keeps its own tier too (its journey records, the router's
//! bindings, which hold the issuing channel generation): the shared tier
//! is consulted when the own tier does not know, and is what keeps
//! working across replicas. When Redis is unreachable every call answers
//! within the command timeout, [`ClusterError::Unavailable`] or a local
//! fallback, and the gateway degrades as `docs/operations.md` tells.
//!
//! The spending guard's state is shared the same way ([`spend`]):
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
//! - [`journeys`], [`bindings`], [`dedupe`], [`control`], [`spend`],
//!   [`vendor_stats`], [`rollout`], [`progress`], [`usage`]: the nine
//!   stores.
//! - [`redis`]: the connection the Redis stores share, and the event
//!   stream's task.

pub mod bindings;
pub mod config;
pub mod control;
pub mod dedupe;
pub mod embedded;
pub mod encryption;
pub mod journeys;
pub mod probes;
pub mod progress;
pub mod redis;
pub mod rollout;
pub mod spend;
pub mod usage;
pub mod vendor_stats;

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use tokio::sync::broadcast;

pub use bindings::{BindingStore, Bound, Issuer, MemoryBindings, RedisBindings};
pub use config::{ClusterConfig, ClusterSettings, RedisMode, RedisTarget};
pub use control::{ControlChange, ControlState, ControlStore, MemoryControl, RedisControl};
pub use dedupe::{DedupeStore, DeliveryKey, FleetNotice, MemoryDedupe, RESULT_READ, RedisDedupe};
pub use journeys::{JourneyStore, JourneysConfig, MemoryJourneys, RedisJourneys};
pub use probes::{MemoryProbes, ProbeStore, RedisProbes};
pub use progress::{MemoryProgress, ProgressStore, RedisProgress};
pub use redis::{RedisConn, stream::SeedFn};
pub use rollout::{MemoryRollout, RedisRollout, RolloutStore};
pub use spend::{
    BudgetTake, BudgetWindow, IdemRecord, IdemState, MemorySpend, RedisSpend, SpendStore, WindowUse,
};
pub use usage::{MemoryUsage, RedisUsage, UsageStore};
pub use vendor_stats::{FigureDelta, FigureSums, RedisVendorStats, VendorStatsStore};

use crate::telemetry::Metrics;

/// A boxed future, so the stores are object-safe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A future that is ready at once (the memory stores' answers).
pub(crate) fn ready<T: Send + 'static>(value: T) -> BoxFuture<T> {
    Box::pin(std::future::ready(value))
}

/// The shared tier could not answer (unreachable, timed out, or refused);
/// nothing was changed by this call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Redis is unreachable or did not answer within the command timeout.
    #[error("the fleet's shared state (Redis) is unavailable")]
    Unavailable,
    /// A bounded store of one process is full and may not forget what it
    /// holds (the journey records of a single replica).
    #[error("the store is full")]
    Full,
    /// The owner of a new journey record holds as many live records as
    /// its share allows (`[[callers]] max_journeys`).
    #[error("the owner holds its share of records")]
    OwnerFull,
    /// A record already lives under the key: the first writer keeps it
    /// (records are inserted once, in every tier).
    #[error("a record already lives under the key")]
    Taken,
}

/// How long shared entries live: the same as the in-memory tables'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttls {
    /// Journey records (`[journeys] retention_hours`).
    pub journey: Duration,
    /// Most journey records one process holds (`[journeys] max_entries`).
    pub journey_max_entries: usize,
    /// How long a replica remembers that Redis holds no record of a
    /// journey (`[journeys] unknown_ttl_secs`).
    pub journey_unknown: Duration,
    /// 3D session bindings (`[routing] binding_ttl_secs`).
    pub binding: Duration,
    /// Most 3D session bindings a replica holds (`[routing] max_bindings`).
    pub binding_max_entries: usize,
    /// Webhook deliveries remembered for dedupe (`[webhook] dedupe_ttl_secs`).
    pub dedupe: Duration,
    /// Most deliveries remembered in memory.
    pub dedupe_max_entries: usize,
    /// Completed idempotency records (`[idempotency] ttl_secs`).
    pub idempotency: Duration,
    /// Most idempotency records held in memory
    /// (`[idempotency] max_entries`).
    pub idempotency_max_entries: usize,
    /// Vendor figures' per-minute buckets
    /// (`[routing] figures_retention_minutes`).
    pub figures: Duration,
    /// The charge-back report's counts (`[usage] retention_days`).
    pub usage: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Self {
            journey: Duration::from_secs(86_400),
            journey_max_entries: 100_000,
            journey_unknown: Duration::from_secs(30),
            binding: Duration::from_secs(600),
            binding_max_entries: 100_000,
            dedupe: Duration::from_secs(900),
            dedupe_max_entries: 100_000,
            idempotency: Duration::from_secs(86_400),
            idempotency_max_entries: 100_000,
            // A day: `[routing] figures_retention_minutes`' default.
            figures: Duration::from_secs(86_400),
            // `[usage] retention_days`' default.
            usage: Duration::from_secs(93 * 86_400),
        }
    }
}

/// What other replicas did, as this replica learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetEvent {
    /// Another replica accepted a completion notice.
    Notice(FleetNotice),
    /// The control state, after another replica changed it, or after this
    /// replica (re)connected: apply it whole.
    Control(ControlState),
}

/// The fleet's shared state: one store per concern, and the Redis
/// connection they share when there is a fleet. Cheap to clone; hand each
/// user the store it needs.
#[derive(Clone)]
pub struct Shared {
    /// The journey records: owner, appkey, profile, request, by reference.
    pub journeys: Arc<dyn JourneyStore>,
    /// Webhook deliveries seen, and completion notices told.
    pub dedupe: Arc<dyn DedupeStore>,
    /// Routing mode, drained channels, contingency hold.
    pub control: Arc<dyn ControlStore>,
    /// The spending guard's idempotency records and budget windows.
    pub guard: Arc<dyn SpendStore>,
    /// The fleet's per-minute vendor figures; `None` for one process,
    /// whose router's own figures are the whole truth (there is nothing a
    /// memory tier would add to them).
    pub figures: Option<Arc<dyn VendorStatsStore>>,
    /// The guarded rollout: its record, its driver's lease, step counts.
    pub rollout: Arc<dyn RolloutStore>,
    /// Watched journeys' progress: submitted steps, the read turn, the
    /// final result shared for a moment.
    pub progress: Arc<dyn ProgressStore>,
    /// The last conformance probe verdict of each channel.
    pub probes: Arc<dyn ProbeStore>,
    /// The charge-back report's counts by day and caller.
    pub usage: Arc<dyn UsageStore>,
    /// How long 3D session bindings live, and how many a replica holds.
    bindings: (Duration, usize),
    /// The fleet's connection; `None` for one process.
    redis: Option<(RedisConn, RedisControl)>,
    /// What one process tells itself: nothing (no other replica).
    events: broadcast::Sender<FleetEvent>,
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
    /// One process: every store in memory, bounded by `ttls`.
    pub fn memory(ttls: Ttls) -> Self {
        Self {
            journeys: Arc::new(MemoryJourneys::new(ttls.journey, ttls.journey_max_entries)),
            dedupe: Arc::new(MemoryDedupe::new(ttls.dedupe, ttls.dedupe_max_entries)),
            control: Arc::new(MemoryControl),
            guard: Arc::new(MemorySpend::new(
                ttls.idempotency,
                ttls.idempotency_max_entries,
            )),
            figures: None,
            rollout: Arc::new(MemoryRollout::default()),
            progress: Arc::new(MemoryProgress::new(ttls.journey, ttls.journey_max_entries)),
            probes: Arc::new(MemoryProbes::default()),
            usage: Arc::new(MemoryUsage::new(ttls.usage)),
            bindings: (ttls.binding, ttls.binding_max_entries),
            redis: None,
            events: broadcast::channel(1).0,
        }
    }

    /// The store of 3D session bindings whose issuers are `I` (the
    /// router's channel generations, which this module cannot name): in
    /// memory for one process; for a fleet, on Redis in front of the
    /// replica's own. A new store each call: its one user (the router)
    /// holds the one it asked for.
    pub fn session_bindings<I: Issuer>(&self) -> Arc<dyn BindingStore<I>> {
        let (ttl, max_entries) = self.bindings;
        let local = MemoryBindings::new(ttl, max_entries);
        match &self.redis {
            None => Arc::new(local),
            Some((conn, _)) => Arc::new(RedisBindings::new(conn.clone(), ttl, local)),
        }
    }

    /// A fleet on the Redis of `settings`. Connects lazily: nothing waits
    /// here; [`Shared::start`] runs the supervisor.
    pub fn redis(
        settings: &ClusterSettings,
        ttls: Ttls,
        metrics: Metrics,
    ) -> Result<Self, ::redis::RedisError> {
        let conn = RedisConn::new(settings, metrics)?;
        let control = RedisControl::new(conn.clone());
        Ok(Self {
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
            control: Arc::new(control.clone()),
            guard: Arc::new(RedisSpend::new(
                conn.clone(),
                MemorySpend::new(ttls.idempotency, ttls.idempotency_max_entries),
            )),
            figures: Some(Arc::new(RedisVendorStats::new(conn.clone(), ttls.figures))),
            rollout: Arc::new(RedisRollout::new(conn.clone())),
            progress: Arc::new(RedisProgress::new(
                conn.clone(),
                ttls.journey,
                ttls.journey_max_entries,
            )),
            probes: Arc::new(RedisProbes::new(conn.clone())),
            usage: Arc::new(RedisUsage::new(conn.clone(), ttls.usage)),
            events: broadcast::channel(1).0,
            bindings: (ttls.binding, ttls.binding_max_entries),
            redis: Some((conn, control)),
        })
    }

    /// `memory` or `redis`, for logs.
    pub fn kind(&self) -> &'static str {
        if self.redis.is_some() {
            "redis"
        } else {
            "memory"
        }
    }

    /// True while the shared tier answers (always for memory).
    pub fn is_up(&self) -> bool {
        self.redis.as_ref().is_none_or(|(conn, _)| conn.is_up())
    }

    /// What a serving thread runs as it starts, so that its Redis commands
    /// stay on its own event loop ([`RedisConn::install_thread`]); `None`
    /// for one process.
    pub fn thread_setup(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let (conn, _) = self.redis.as_ref()?;
        let conn = conn.clone();
        Some(Arc::new(move || conn.install_thread()))
    }

    /// What the other replicas do, from now on (nothing for one process).
    pub fn subscribe(&self) -> broadcast::Receiver<FleetEvent> {
        match &self.redis {
            Some((conn, _)) => conn.subscribe(),
            None => self.events.subscribe(),
        }
    }

    /// Runs the fleet's supervisor: the event stream, control state on
    /// (re)connection, reconnection with backoff. `seed` is this
    /// replica's own control state, written when Redis holds none.
    /// Subscribe before starting to see the first [`FleetEvent::Control`].
    /// Nothing to run for one process.
    pub fn start(&self, seed: SeedFn) {
        if let Some((conn, control)) = &self.redis {
            conn.run(redis::stream::supervise(
                conn.clone(),
                control.clone(),
                seed,
            ));
        }
    }

    /// Waits until the cluster is up, at most `timeout`; returns whether
    /// it is (at once for one process).
    pub async fn wait_up(&self, timeout: Duration) -> bool {
        match &self.redis {
            Some((conn, _)) => conn.wait_up(timeout).await,
            None => true,
        }
    }

    /// Stops the supervisor (the gateway is shutting down).
    pub fn stop(&self) {
        if let Some((conn, _)) = &self.redis {
            conn.stop();
        }
    }
}
