//! The state a fleet of gateway replicas shares, behind one trait.
//!
//! ```text
//! events (directory, dedupe, notices) --.
//!                                        >-- SharedState --+-- MemoryState (one process, the default)
//! channels (bindings, control state) ---'                  `-- RedisState  ([cluster] redis_url)
//!                                                                 |  commands: ConnectionManager (reconnects)
//!                                                                 |  {prefix}events: pub/sub fan-out
//! ```
//!
//! What is shared: the journey directory (journey reference -> appkey,
//! sealed), 3D session bindings (journey reference -> channel name),
//! webhook dedupe, the channel control state (routing mode, drained
//! channels, contingency hold) and completion notices, fanned out as
//! (journey reference, status, delivery id). Nothing personal and no
//! result ever goes to Redis: each replica with watchers reads the result
//! from the upstream itself. Circuit breakers stay per replica.
//!
//! Each replica keeps its own tier too (the hub's directory, the router's
//! bindings, which hold the issuing channel generation): the shared tier
//! is consulted when the own tier does not know, and is what keeps
//! working across replicas. When Redis is unreachable every call answers
//! within the command timeout, [`ClusterError::Unavailable`] or a local
//! fallback, and the gateway degrades as `docs/operations.md` tells.
//!
//! The spending guard's state is shared the same way ([`guard`]):
//! idempotency records of `CreateJourney` (a keyed digest of the request,
//! the sealed appkey) and budget window counters.
//!
//! - [`config`]: the `[cluster]` section.
//! - [`seal`]: AES-256-GCM sealing of appkeys, keyed request digests.
//! - [`guard`]: the idempotency and budget types of the trait.
//! - [`memory`]: [`MemoryState`]; [`redis`]: [`RedisState`].

pub mod config;
pub mod guard;
pub mod memory;
pub mod redis;
pub mod seal;

use std::{collections::BTreeSet, future::Future, pin::Pin, time::Duration};

use tokio::sync::broadcast;

pub use config::{ClusterConfig, ClusterSettings};
pub use guard::{BudgetTake, BudgetWindow, IdemRecord, IdemState, WindowUse};
pub use memory::MemoryState;
pub use redis::RedisState;

use crate::domain::{Appkey, JourneyRef};

/// A boxed future, so [`SharedState`] is object-safe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The shared tier could not answer (unreachable, timed out, or refused);
/// nothing was changed by this call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Redis is unreachable or did not answer within the command timeout.
    #[error("the fleet's shared state (Redis) is unavailable")]
    Unavailable,
}

/// How long shared entries live: the same as the in-memory tables'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttls {
    /// Journey directory entries (`[watch] directory_ttl_secs`).
    pub journey: Duration,
    /// 3D session bindings (`[routing] binding_ttl_secs`).
    pub binding: Duration,
    /// Webhook deliveries remembered for dedupe (`[webhook] dedupe_ttl_secs`).
    pub dedupe: Duration,
    /// Most deliveries remembered in memory.
    pub dedupe_max_entries: usize,
    /// Completed idempotency records (`[idempotency] ttl_secs`).
    pub idempotency: Duration,
    /// Most idempotency records held in memory
    /// (`[idempotency] max_entries`).
    pub idempotency_max_entries: usize,
}

impl Default for Ttls {
    fn default() -> Self {
        Self {
            journey: Duration::from_secs(1800),
            binding: Duration::from_secs(600),
            dedupe: Duration::from_secs(900),
            dedupe_max_entries: 100_000,
            idempotency: Duration::from_secs(86_400),
            idempotency_max_entries: 100_000,
        }
    }
}

/// What identifies a webhook delivery for dedupe.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeliveryKey {
    /// The sender's `webhook-id`.
    Id(String),
    /// No id: the journey and the announced status label.
    Journey(JourneyRef, &'static str),
}

impl DeliveryKey {
    /// A short, non-reversible id of the delivery (hex of SHA-256), as it
    /// travels in notices and keys.
    pub fn digest(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let text = match self {
            DeliveryKey::Id(id) => format!("id:{id}"),
            DeliveryKey::Journey(j, s) => format!("journey:{j}:{s}"),
        };
        let hash = Sha256::digest(text.as_bytes());
        hash[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A completion notice as it crosses the fleet: no appkey, no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNotice {
    /// The journey.
    pub journey: JourneyRef,
    /// The announced status label (`complete`, `error`).
    pub status: String,
    /// [`DeliveryKey::digest`] of the delivery.
    pub delivery: String,
}

/// The fleet's channel control state. Channel names and modes travel as
/// text (`RoutingMode`'s `Display` form); the router parses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlState {
    /// The routing mode set with `SetRoutingMode`; `None`: never set in
    /// this fleet (each replica keeps its configured mode).
    pub mode: Option<String>,
    /// Drained channels.
    pub drained: BTreeSet<String>,
    /// What is left of a contingency hold, if one is active.
    pub hold: Option<Duration>,
}

/// One change of the control state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlChange {
    /// Sets the routing mode (its text form).
    Mode(String),
    /// Drains a channel.
    Drain(String),
    /// Undrains a channel.
    Undrain(String),
    /// Starts (or extends) a contingency hold.
    Hold(Duration),
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

/// The shared state of a fleet. Every method answers within the
/// implementation's command timeout. Implementations never see a result,
/// a name, a CPF or a token; appkeys only to seal them.
pub trait SharedState: Send + Sync + 'static {
    /// `memory` or `redis`, for logs.
    fn kind(&self) -> &'static str;

    /// True when other replicas share this state.
    fn is_fleet(&self) -> bool;

    /// True while the shared tier answers (always for memory).
    fn is_up(&self) -> bool;

    /// Remembers the appkey of `journey` for the fleet.
    fn remember_journey(
        &self,
        journey: &JourneyRef,
        appkey: &Appkey,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The appkey of `journey`, if another replica remembered it.
    fn find_journey(&self, journey: &JourneyRef)
    -> BoxFuture<Result<Option<Appkey>, ClusterError>>;

    /// Records that `channel` issued the 3D session of `journey`.
    fn bind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The channel that issued the 3D session of `journey`, if known.
    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>>;

    /// Forgets the binding of `journey` if it still names `channel`.
    fn unbind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// True the first time `key` is seen across the fleet within the
    /// dedupe TTL. Never fails: unreachable, it decides for this replica.
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool>;

    /// The fleet's control state; `None` for a single process (its own
    /// router is the whole truth).
    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>>;

    /// Applies `change` for the whole fleet and tells the other replicas.
    /// An error means nothing was applied anywhere.
    fn change_control(&self, change: ControlChange) -> BoxFuture<Result<(), ClusterError>>;

    /// Fans a notice this replica accepted out to the other replicas.
    fn publish_notice(&self, notice: FleetNotice) -> BoxFuture<Result<(), ClusterError>>;

    /// What the other replicas do, from now on.
    fn subscribe(&self) -> broadcast::Receiver<FleetEvent>;

    /// The keyed digester whose digests every replica of this state
    /// agrees on (random per process for memory).
    fn digester(&self) -> seal::Digester;

    /// Claims idempotency `key` for a call whose request digest is
    /// `request`: `None` when this call now holds it (as pending for
    /// `pending_ttl`), else where the key stands.
    fn idempotency_claim(
        &self,
        key: &str,
        request: &str,
        pending_ttl: Duration,
    ) -> BoxFuture<Result<Option<IdemState>, ClusterError>>;

    /// Completes the claim on `key` with `record`, kept for `ttl`; waiters
    /// see it at once.
    fn idempotency_complete(
        &self,
        key: &str,
        record: IdemRecord,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// Releases the claim on `key` if it is still pending for `request`
    /// (the call failed): waiters and later calls may claim it again.
    fn idempotency_release(&self, key: &str, request: &str) -> BoxFuture<Result<(), ClusterError>>;

    /// Waits while `key` is pending for `request`, at most `max`; returns
    /// where it stands then.
    fn idempotency_wait(
        &self,
        key: &str,
        request: &str,
        max: Duration,
    ) -> BoxFuture<Result<IdemState, ClusterError>>;

    /// Counts one call in every window, unless one is spent (then counts
    /// nothing). Never fails: unreachable, the fleet's state counts in
    /// this replica alone.
    fn take_budget(&self, windows: Vec<BudgetWindow>) -> BoxFuture<BudgetTake>;

    /// Remembers which operator profile created `journey`, for billing
    /// its later calls on any replica (a no-op for one process, whose
    /// guard remembers it itself).
    fn remember_profile(
        &self,
        journey: &JourneyRef,
        profile: &str,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The operator profile that created `journey`, if remembered.
    fn journey_profile(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>>;
}

impl std::fmt::Debug for dyn SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState")
            .field("kind", &self.kind())
            .field("up", &self.is_up())
            .finish()
    }
}
