//! Routing of 3D liveness calls across vendor channels.
//!
//! `StartSession3D` picks a channel: the operator's mode first, then drained
//! channels are skipped, then open circuits, then priority. A weighted
//! mode puts the journey's pick among the available channels first (see
//! [`super::weighted`]) and fails over like `auto`. In `auto` mode
//! an upstream fault (connect, timeout, 5xx, malformed answer) on one
//! channel fails over to the next within the caller's deadline; a 4xx is
//! the channel's answer about this appkey and is returned at once. Forced
//! modes (`force_primary`, `force_alternative`, `channel:<name>`) never fail
//! over: the operator chose the channel, and sending sessions elsewhere
//! behind their back would defeat a vendor switch or an incident drill.
//!
//! `VerifyLiveness3D` is sticky: it goes to the channel (generation) that
//! issued the session, whatever happened since, is sent at most once, and
//! is never failed over — `/3d/liveness` finishes the appkey.
//!
//! Every call ends with one [`CallOutcome`](super::outcome::CallOutcome),
//! recorded by the router's [`OutcomeRecorder`]: the channel's counters,
//! its vendor figures and its metric series all come from it.
//!
//! # Layout
//!
//! - this file: the router, its state and its snapshot;
//! - `order`: which channels a new session may go to, in which order;
//! - `session`: starting a session, failing over across channels;
//! - `attempt`: one channel's session start, retried on a forced mode;
//! - `verify`: the sticky verification;
//! - `control`: the operator's controls (mode, drain, reload);
//! - `shared`: bindings and control state shared with other replicas.

use std::{
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use super::{
    breaker::Health,
    channel::{Channel, ChannelSet, ChannelSnapshot},
    config::{ChannelConfigError, ChannelSpec, RoutingConfig, RoutingMode},
    figures::Figures,
    outcome::OutcomeRecorder,
    transport::{Liveness3DTransport, SessionGrant},
};
use crate::{
    cluster::{BindingStore, Fleet, FleetControl, MemoryBindings},
    context::CallContext,
    sync::{lock, read},
    telemetry::Metrics,
    upstream::UpstreamError,
};

/// A session started on a channel.
#[derive(Debug, Clone)]
pub struct StartedSession {
    /// What the channel granted.
    pub grant: SessionGrant,
    /// The issuing channel's name; the caller passes it back to verify.
    pub channel: String,
}

/// A point-in-time view of the router, for operators and metrics.
#[derive(Debug, Clone)]
pub struct RouterSnapshot {
    /// The routing mode in force.
    pub mode: RoutingMode,
    /// True while a contingency hold steers new sessions off the primary.
    pub contingency_hold_active: bool,
    /// Session bindings held (including expired ones not yet swept).
    pub bindings: usize,
    /// The configured channels, by priority.
    pub channels: Vec<ChannelSnapshot>,
    /// True when the mode and drains are the fleet's (`[cluster]`), false
    /// when they are this replica's own.
    pub fleet_control: bool,
}

/// What changed in a reload, for the log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Channels that are new.
    pub added: Vec<String>,
    /// Channels that are gone (their bound verifications still reach them).
    pub removed: Vec<String>,
    /// Channels whose settings changed (fresh breaker, same drain flag and counters).
    pub changed: Vec<String>,
}

/// Chooses the channel of every 3D call. Shared as `Arc<ChannelRouter>`
/// between the liveness API and the admin service.
pub struct ChannelRouter {
    transport: Arc<dyn Liveness3DTransport>,
    /// Swapped whole by [`ChannelRouter::reload`]; readers clone the `Arc`
    /// and drop the lock at once.
    channels: RwLock<Arc<ChannelSet>>,
    mode: Mutex<RoutingMode>,
    contingency_hold: Duration,
    hold_until: Mutex<Option<Instant>>,
    /// Which channel generation issued each 3D session: this process's
    /// own, and the fleet's with `[cluster]` (see `shared`).
    bindings: Arc<dyn BindingStore<Arc<Channel>>>,
    /// Session-token attempts on the channel of a forced mode.
    forced_session_attempts: u32,
    /// Where every call's outcome is counted: channel counters, vendor
    /// figures, `/metrics`.
    outcomes: OutcomeRecorder,
    /// The fleet's control state, in a fleet (see `shared`); one process
    /// has none: its own mode and drains are the whole truth.
    fleet_control: Option<FleetControl>,
    /// True once the mode and drains in force came from the fleet.
    control_from_fleet: AtomicBool,
    /// True while every channel's circuit refuses and session starts are
    /// panic-routed (logged once per episode).
    panicking: AtomicBool,
}

impl std::fmt::Debug for ChannelRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelRouter")
            .field("mode", &*lock(&self.mode))
            .field("channels", &self.current().len())
            .finish_non_exhaustive()
    }
}

/// The per-call budget: the earlier of the caller's deadline and the
/// channel's timeout, and whether the caller's deadline is the binding one
/// (then a timeout says nothing about the channel's health).
fn budget(channel: &Channel, ctx: &CallContext, now: Instant) -> (Instant, bool) {
    let own = now + channel.endpoint().timeout();
    match ctx.deadline() {
        Some(d) if d <= own => (d, true),
        _ => (own, false),
    }
}

/// The breaker's view of an outcome: the channel answered (a 2xx or a
/// 4xx), failed (with or without an answer), or nothing was learnt (cut
/// short by the caller's deadline, or refused by this gateway's own
/// bulkhead before anything was sent).
fn health<T>(result: &Result<T, UpstreamError>, caller_bound: bool) -> Health {
    match result {
        Ok(_) => Health::Answered,
        Err(UpstreamError::Timeout { .. }) if caller_bound => Health::Unknown,
        Err(UpstreamError::Saturated { .. } | UpstreamError::DeadlineExceeded { .. }) => {
            Health::Unknown
        }
        Err(
            UpstreamError::Connect { .. }
            | UpstreamError::Timeout { .. }
            | UpstreamError::Transport { .. },
        ) => Health::Fault { answered: false },
        Err(e) if e.is_upstream_fault() => Health::Fault { answered: true },
        Err(_) => Health::Answered,
    }
}

impl ChannelRouter {
    /// A router over `specs`, starting in `routing.mode`.
    pub fn new(
        specs: Vec<ChannelSpec>,
        routing: &RoutingConfig,
        transport: Arc<dyn Liveness3DTransport>,
    ) -> Result<Self, ChannelConfigError> {
        super::config::validate_set(&specs, routing, true)?;
        Ok(Self {
            transport,
            channels: RwLock::new(Arc::new(ChannelSet::build(specs, None))),
            mode: Mutex::new(routing.mode.clone()),
            contingency_hold: Duration::from_secs(routing.contingency_hold_secs),
            hold_until: Mutex::new(None),
            bindings: Arc::new(MemoryBindings::new(
                Duration::from_secs(routing.binding_ttl_secs),
                routing.max_bindings,
            )),
            forced_session_attempts: routing.forced_session_attempts.max(1),
            outcomes: OutcomeRecorder::new(Figures::new(routing.figures_retention_minutes)),
            fleet_control: None,
            control_from_fleet: AtomicBool::new(false),
            panicking: AtomicBool::new(false),
        })
    }

    /// The same router, feeding the per-channel series of `metrics` (the
    /// gateway's registry).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.outcomes = self.outcomes.with_metrics(metrics);
        self
    }

    /// The counts of a rollout's step under way, fed by every call.
    pub fn step_counter(&self) -> Arc<super::rollout::counts::StepCounter> {
        self.outcomes.step_counter()
    }

    /// The vendor figures this router records.
    pub fn figures(&self) -> &Figures {
        self.outcomes.figures()
    }

    /// The same router, keeping its session bindings in `bindings` (the
    /// gateway passes those of its tier: in memory, or on Redis for a
    /// fleet).
    pub fn with_bindings(mut self, bindings: Arc<dyn BindingStore<Arc<Channel>>>) -> Self {
        self.bindings = bindings;
        self
    }

    /// The same router, a replica of `fleet`: its control changes are the
    /// fleet's and its vendor figures are added to the fleet's. One
    /// process is never given one: its control state and figures are its
    /// own.
    pub fn with_fleet(mut self, fleet: &Fleet) -> Self {
        self.fleet_control = Some(fleet.control().clone());
        self.figures().share(fleet.figures().clone());
        self
    }

    /// The channel set in force.
    fn current(&self) -> Arc<ChannelSet> {
        Arc::clone(&read(&self.channels))
    }

    /// The settings of channel `name` in force, if configured.
    pub fn channel_spec(&self, name: &str) -> Option<ChannelSpec> {
        self.current().get(name).map(|c| c.spec().clone())
    }

    /// The routing mode in force.
    pub fn mode(&self) -> RoutingMode {
        lock(&self.mode).clone()
    }

    /// Everything operators and the metrics exporter read.
    pub fn snapshot(&self) -> RouterSnapshot {
        let now = Instant::now();
        RouterSnapshot {
            mode: self.mode(),
            contingency_hold_active: lock(&self.hold_until).is_some_and(|u| now < u),
            bindings: self.bindings.local_len(),
            channels: self.current().iter().map(|c| c.snapshot(now)).collect(),
            fleet_control: self.control_from_fleet.load(Ordering::Acquire),
        }
    }
}

mod attempt;
mod control;
pub use control::ChannelReload;
mod order;
mod session;
mod shared;
#[cfg(test)]
mod tests;
mod verify;
