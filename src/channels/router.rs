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

use std::{
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use super::{
    bindings::SessionBindings,
    breaker::CircuitState,
    channel::{Channel, ChannelSet, ChannelSnapshot},
    config::{
        ChannelConfigError, ChannelSpec, ModeError, RoutingConfig, RoutingMode, validate_channels,
        validate_mode,
    },
    figures::{ChannelFigures, VerifyOutcome},
    transport::{Liveness3DTransport, SessionGrant},
    weighted::WeightedSplit,
};
use crate::{
    Error,
    cluster::{BindingStore, ControlStore, MemoryBindings, MemoryControl},
    context::CallContext,
    domain::{Appkey, JourneyRef, Operation, SessionToken},
    proto::v1::LivenessVerdict,
    sync::{lock, read, write},
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
    bindings: Mutex<SessionBindings>,
    /// Session-token attempts on the channel of a forced mode.
    forced_session_attempts: u32,
    /// Vendor figures per channel over a rolling window.
    figures: Arc<ChannelFigures>,
    /// Where the per-channel verification series of `/metrics` go.
    metrics: Option<Metrics>,
    /// The fleet's shared bindings (see `fleet`).
    shared_bindings: Arc<dyn BindingStore>,
    /// The fleet's shared control state (see `fleet`).
    shared_control: Arc<dyn ControlStore>,
    /// True once the mode and drains in force came from the fleet.
    fleet_control: AtomicBool,
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

/// Pause before a forced mode tries its channel's session token again.
const FORCED_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How one channel's session start ended.
enum Attempt {
    Granted(StartedSession),
    /// Not tried: the circuit was open.
    Skipped(&'static str),
    Failed(UpstreamError),
}

/// The breaker's view of an outcome: `Some(true)` fault, `Some(false)` the
/// channel answered, `None` no verdict (cut short by the caller's deadline,
/// or refused by this gateway's own bulkhead before anything was sent).
fn health<T>(result: &Result<T, UpstreamError>, caller_bound: bool) -> Option<bool> {
    match result {
        Ok(_) => Some(false),
        Err(UpstreamError::Timeout { .. }) if caller_bound => None,
        Err(UpstreamError::Saturated { .. }) => None,
        Err(e) => Some(e.is_upstream_fault()),
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
            bindings: Mutex::new(SessionBindings::new(
                Duration::from_secs(routing.binding_ttl_secs),
                routing.max_bindings,
            )),
            forced_session_attempts: routing.forced_session_attempts.max(1),
            figures: Arc::new(ChannelFigures::new(routing.figures_retention_minutes)),
            metrics: None,
            shared_bindings: Arc::new(MemoryBindings),
            shared_control: Arc::new(MemoryControl),
            fleet_control: AtomicBool::new(false),
        })
    }

    /// The same router, feeding the per-channel verification series of
    /// `metrics` (the gateway's registry).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The vendor figures this router records.
    pub fn figures(&self) -> &ChannelFigures {
        &self.figures
    }

    /// Counts a session start that was sent (one this gateway refused
    /// itself, at its bulkhead, says nothing about the vendor).
    fn record_session_figures(
        &self,
        channel: &str,
        result: &Result<SessionGrant, UpstreamError>,
        elapsed: Duration,
    ) {
        if matches!(result, Err(UpstreamError::Saturated { .. })) {
            return;
        }
        let outcome = result.as_ref().map(|g| g.contingency);
        self.figures.record_session(channel, outcome, elapsed);
    }

    /// Counts a verification that was sent, in the figures and `/metrics`.
    fn record_verify_figures(
        &self,
        channel: &str,
        result: &Result<LivenessVerdict, UpstreamError>,
        elapsed: Duration,
    ) {
        if matches!(result, Err(UpstreamError::Saturated { .. })) {
            return;
        }
        let outcome = VerifyOutcome::of(result);
        self.figures.record_verification(channel, outcome, elapsed);
        if let Some(m) = &self.metrics {
            m.record_channel_verification(channel, outcome.label(), elapsed);
        }
    }

    /// The same router, sharing its session bindings and control state
    /// through `bindings` and `control` (the gateway passes those of
    /// `[cluster]`).
    pub fn with_shared(
        mut self,
        bindings: Arc<dyn BindingStore>,
        control: Arc<dyn ControlStore>,
    ) -> Self {
        self.shared_bindings = bindings;
        self.shared_control = control;
        self
    }

    /// The channel set in force.
    fn current(&self) -> Arc<ChannelSet> {
        Arc::clone(&read(&self.channels))
    }

    /// The routing mode in force.
    pub fn mode(&self) -> RoutingMode {
        lock(&self.mode).clone()
    }

    /// Starts a 3D session on the best available channel and binds the
    /// appkey to it for the verification.
    pub async fn start_session(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        user_agent: &str,
    ) -> Result<StartedSession, Error> {
        let set = self.current();
        let mode = self.mode();
        let now = Instant::now();
        let (candidates, failover) = match &mode {
            RoutingMode::Auto => (self.auto_order(&set, now), true),
            RoutingMode::ForcePrimary => (set.primary().cloned().into_iter().collect(), false),
            RoutingMode::ForceAlternative => {
                (set.alternative().cloned().into_iter().collect(), false)
            }
            RoutingMode::Channel(name) => (set.get(name).cloned().into_iter().collect(), false),
            RoutingMode::Weighted(split) => (self.weighted_order(&set, split, appkey, now), true),
        };
        if candidates.is_empty() {
            return Err(Error::NoChannelAvailable(format!(
                "mode {mode}: no such channel is configured"
            )));
        }

        let attempts = if failover {
            1
        } else {
            self.forced_session_attempts
        };
        let mut notes: Vec<String> = Vec::new();
        let mut failed_last: Option<Arc<Channel>> = None;
        let mut last_error: Option<UpstreamError> = None;
        let mut saturated = false;
        for channel in candidates {
            if channel.is_drained() {
                notes.push(format!("{}: drained", channel.name()));
                continue;
            }
            let outcome = self
                .start_on(ctx, &set, &channel, appkey, user_agent, attempts)
                .await;
            if !matches!(outcome, Attempt::Skipped(_)) {
                if let Some(previous) = failed_last.take() {
                    previous.stats().record_failover();
                    tracing::warn!(
                        from = previous.name(),
                        to = channel.name(),
                        "3D session start failed over"
                    );
                }
            }
            let error = match outcome {
                Attempt::Granted(started) => return Ok(started),
                Attempt::Skipped(note) => {
                    notes.push(format!("{}: {note}", channel.name()));
                    continue;
                }
                Attempt::Failed(e) => e,
            };
            if let UpstreamError::Saturated { .. } = error {
                // This gateway's own bulkhead, not the vendor: no failover
                // count, no breaker verdict; the next channel may have room.
                notes.push(format!("{}: at capacity", channel.name()));
                saturated = true;
                if failover {
                    continue;
                }
                return Err(Error::Upstream(error));
            }
            if !failover || !error.is_upstream_fault() {
                return Err(Error::Upstream(error));
            }
            notes.push(format!("{}: {}", channel.name(), error.class()));
            failed_last = Some(channel);
            last_error = Some(error);
        }
        if last_error.is_some() && ctx.is_expired() {
            return Err(Error::DeadlineExceeded("3D session start"));
        }
        if saturated && last_error.is_none() {
            return Err(Error::Upstream(UpstreamError::Saturated {
                op: Operation::SessionToken3D,
            }));
        }
        Err(Error::NoChannelAvailable(notes.join(", ")))
    }

    /// Starts a session on `channel`, trying up to `attempts` times while
    /// the failure is transient (what the REST client itself retries:
    /// connect, timeout, 502-504), the circuit admits the call and the
    /// caller's deadline leaves room.
    async fn start_on(
        &self,
        ctx: &CallContext,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
        user_agent: &str,
        attempts: u32,
    ) -> Attempt {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Ok(permit) = channel.breaker().try_acquire(Instant::now()) else {
                channel.stats().record_rejected_open();
                return Attempt::Skipped("circuit open");
            };
            let now = Instant::now();
            if ctx.is_expired() {
                permit.neutral(now);
                return Attempt::Failed(UpstreamError::DeadlineExceeded {
                    op: Operation::SessionToken3D,
                });
            }
            let (until, caller_bound) = budget(channel, ctx, now);
            let bounded = CallContext::with_deadline(until);
            let call =
                self.transport
                    .session_token(channel.endpoint(), appkey, user_agent, &bounded);
            let result =
                tokio::time::timeout_at(until, call)
                    .await
                    .unwrap_or(Err(UpstreamError::Timeout {
                        op: Operation::SessionToken3D,
                    }));
            let sent = now;
            let now = Instant::now();
            self.record_session_figures(channel.name(), &result, now - sent);
            match health(&result, caller_bound) {
                Some(true) => permit.failure(now),
                Some(false) => permit.success(now),
                None => permit.neutral(now),
            }
            let e = match result {
                Ok(grant) => {
                    let held = self.on_granted(set, channel, appkey, &grant, now);
                    self.share_grant(channel, appkey, held).await;
                    return Attempt::Granted(StartedSession {
                        grant,
                        channel: channel.name().to_owned(),
                    });
                }
                Err(e) => e,
            };
            if !matches!(e, UpstreamError::Saturated { .. }) {
                channel.stats().record_session_failure(e.class());
                tracing::warn!(
                    channel = channel.name(),
                    error_class = e.class(),
                    attempt,
                    "3D session start failed"
                );
            }
            let pause = FORCED_RETRY_PAUSE;
            let room = ctx
                .remaining()
                .is_none_or(|left| left > pause + FORCED_RETRY_PAUSE);
            if attempt >= attempts || !e.is_transient() || !room {
                return Attempt::Failed(e);
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Auto mode: all channels by priority, the primary last while a
    /// contingency hold is active. Drain and breaker are checked per call.
    fn auto_order(&self, set: &ChannelSet, now: Instant) -> Vec<Arc<Channel>> {
        let mut order: Vec<Arc<Channel>> = set.iter().cloned().collect();
        let held = lock(&self.hold_until).is_some_and(|until| now < until);
        if held && order.len() > 1 {
            order.rotate_left(1);
        }
        order
    }

    /// Weighted mode: the journey's pick among the available channels
    /// first, then the rest as in `auto` (the failover order). A channel
    /// is available when it is not drained, its circuit is not open and,
    /// during a contingency hold, it is not the primary.
    fn weighted_order(
        &self,
        set: &ChannelSet,
        split: &WeightedSplit,
        appkey: &Appkey,
        now: Instant,
    ) -> Vec<Arc<Channel>> {
        let mut order = self.auto_order(set, now);
        let held = lock(&self.hold_until).is_some_and(|until| now < until);
        let primary = set.primary().map(|c| c.name());
        let available = |name: &str| {
            set.get(name).is_some_and(|c| {
                !c.is_drained()
                    && c.breaker().snapshot(now).state != CircuitState::Open
                    && !(held && set.len() > 1 && Some(name) == primary)
            })
        };
        let journey = JourneyRef::from_appkey(appkey);
        if let Some(pick) = split.pick(&journey, available) {
            if let Some(at) = order.iter().position(|c| c.name() == pick) {
                let chosen = order.remove(at);
                order.insert(0, chosen);
            }
        }
        order
    }

    fn on_granted(
        &self,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
        grant: &SessionGrant,
        now: Instant,
    ) -> bool {
        channel
            .stats()
            .record_grant(&grant.vendor, grant.contingency);
        let is_primary = set.primary().is_some_and(|p| Arc::ptr_eq(p, channel));
        let hold = grant.contingency && is_primary && !self.contingency_hold.is_zero();
        if hold {
            *lock(&self.hold_until) = Some(now + self.contingency_hold);
            tracing::info!(
                channel = channel.name(),
                hold_secs = self.contingency_hold.as_secs(),
                "primary answered in contingency; preferring the alternative"
            );
        }
        lock(&self.bindings).insert(JourneyRef::from_appkey(appkey), Arc::clone(channel), now);
        hold
    }

    /// Verifies a 3D session on the channel that issued it.
    ///
    /// The channel comes from this gateway's binding of the appkey, else
    /// from the fleet's (`[cluster]`: the replica that started the session
    /// shared it), else from `channel` (as returned by `StartSession3D`, so
    /// that any gateway instance can route it). If both exist and disagree the call is
    /// refused before anything is sent ([`Error::ChannelMismatch`]): a
    /// verification on the wrong channel could finish the appkey for
    /// nothing, and only the caller knows which session it means. An empty
    /// name counts as absent.
    ///
    /// Sent once; never retried or failed over. The binding is dropped
    /// after a definite answer (a verdict or a 4xx) and kept after an
    /// ambiguous failure, so a caller's retry still reaches the same
    /// channel.
    pub async fn verify(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        token: &SessionToken,
        channel: Option<&str>,
    ) -> Result<LivenessVerdict, Error> {
        let key = JourneyRef::from_appkey(appkey);
        let now = Instant::now();
        let requested = channel.filter(|n| !n.is_empty());
        let local = lock(&self.bindings).get(&key, now);
        let bound = match local {
            Some(b) => Some(b),
            None => self.shared_binding(&key).await,
        };
        let target = match (bound, requested) {
            (Some(b), Some(name)) if b.name() != name => {
                return Err(Error::ChannelMismatch {
                    requested: name.to_owned(),
                    issuing: b.name().to_owned(),
                });
            }
            (Some(b), _) => b,
            (None, Some(name)) => self
                .current()
                .get(name)
                .cloned()
                .ok_or_else(|| Error::ChannelUnknown(name.to_owned()))?,
            (None, None) => return Err(Error::SessionUnknown),
        };
        if ctx.is_expired() {
            return Err(Error::DeadlineExceeded("3D liveness verification"));
        }

        target.stats().record_verification();
        let (until, caller_bound) = budget(&target, ctx, now);
        let attempt = CallContext::with_deadline(until);
        let call = self
            .transport
            .liveness(target.endpoint(), appkey, token, &attempt);
        let sent = Instant::now();
        let result =
            tokio::time::timeout_at(until, call)
                .await
                .unwrap_or(Err(UpstreamError::Timeout {
                    op: Operation::Liveness3D,
                }));
        let now = Instant::now();
        self.record_verify_figures(target.name(), &result, now - sent);
        if let Some(fault) = health(&result, caller_bound) {
            target.breaker().record(fault, now);
        }
        match &result {
            Err(e) => {
                target.stats().record_verification_failure(e.class());
                tracing::warn!(
                    channel = target.name(),
                    journey = %key,
                    error_class = e.class(),
                    "3D verification failed; not retried"
                );
                if !e.is_upstream_fault() {
                    lock(&self.bindings).remove_if(&key, &target);
                    self.forget_shared(&key, &target);
                }
            }
            Ok(_) => {
                lock(&self.bindings).remove_if(&key, &target);
                self.forget_shared(&key, &target);
            }
        }
        result.map_err(Error::Upstream)
    }

    /// Sets the routing mode for the next session, under the rules of
    /// [`validate_mode`]: a named channel must be configured,
    /// `force_primary` needs a channel and `force_alternative` two.
    pub fn set_mode(&self, mode: RoutingMode) -> Result<RoutingMode, Error> {
        let mut current = lock(&self.mode);
        self.check_mode(&mode)?;
        tracing::info!(from = %current, to = %mode, "3D routing mode changed");
        *current = mode.clone();
        Ok(mode)
    }

    /// Whether `mode` could apply to the channel set in force.
    fn check_mode(&self, mode: &RoutingMode) -> Result<(), Error> {
        let set = self.current();
        validate_mode(mode, set.iter().map(|c| c.name())).map_err(|e| match e {
            ModeError::UnknownChannel(name) => Error::ChannelUnknown(name),
            other => Error::invalid("mode", other.to_string()),
        })
    }

    /// Stops routing new sessions to `name`; its verifications still go to it.
    pub fn drain(&self, name: &str) -> Result<ChannelSnapshot, Error> {
        self.set_drained(name, true)
    }

    /// Routes new sessions to `name` again.
    pub fn undrain(&self, name: &str) -> Result<ChannelSnapshot, Error> {
        self.set_drained(name, false)
    }

    fn set_drained(&self, name: &str, drained: bool) -> Result<ChannelSnapshot, Error> {
        let set = self.current();
        let channel = set
            .get(name)
            .ok_or_else(|| Error::ChannelUnknown(name.to_owned()))?;
        channel.set_drained(drained);
        tracing::info!(channel = name, drained, "3D channel drain changed");
        Ok(channel.snapshot(Instant::now()))
    }

    /// Replaces the channel set atomically.
    ///
    /// Kept: session bindings (they hold their channel, so a verification
    /// bound to a removed or changed channel still goes to the generation
    /// that issued it), the drain flags and counters of surviving channels,
    /// the breaker of unchanged channels, and calls in flight (they hold
    /// their own `Arc<Channel>`). Refused, leaving everything as it was,
    /// when the specs are invalid or the routing mode could not apply to
    /// them (change the mode first).
    pub fn reload(&self, specs: Vec<ChannelSpec>) -> Result<ReloadSummary, ChannelConfigError> {
        validate_channels(&specs)?;
        let mode = lock(&self.mode);
        validate_mode(&mode, specs.iter().map(|c| c.name.as_str()))?;
        let mut guard = write(&self.channels);
        let old = Arc::clone(&guard);
        let mut summary = ReloadSummary::default();
        for spec in &specs {
            match old.get(&spec.name) {
                None => summary.added.push(spec.name.clone()),
                Some(c) if c.spec() != spec => summary.changed.push(spec.name.clone()),
                Some(_) => {}
            }
        }
        summary.removed = old
            .iter()
            .filter(|c| !specs.iter().any(|s| s.name == c.name()))
            .map(|c| c.name().to_owned())
            .collect();
        *guard = Arc::new(ChannelSet::build(specs, Some(&old)));
        drop(guard);
        drop(mode);
        tracing::info!(
            added = ?summary.added,
            removed = ?summary.removed,
            changed = ?summary.changed,
            "3D channels reloaded"
        );
        Ok(summary)
    }

    /// Everything operators and the metrics exporter read.
    pub fn snapshot(&self) -> RouterSnapshot {
        let now = Instant::now();
        RouterSnapshot {
            mode: self.mode(),
            contingency_hold_active: lock(&self.hold_until).is_some_and(|u| now < u),
            bindings: lock(&self.bindings).len(),
            channels: self.current().iter().map(|c| c.snapshot(now)).collect(),
            fleet_control: self.fleet_control.load(Ordering::Acquire),
        }
    }
}

mod fleet;
#[cfg(test)]
mod tests;
