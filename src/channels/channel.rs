//! A configured channel at run time: its spec, breaker, drain flag and
//! counters, and the ordered set of channels the router chooses from.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use tokio::time::Instant;

use super::{
    breaker::{Breaker, CircuitState},
    call_outcome::{CallOutcome, Ended},
    config::ChannelSpec,
};
use crate::{
    cluster::Issuer,
    domain::Operation,
    upstream::{ChannelEndpoint, UpstreamError},
};

/// Counters of one channel, written only by
/// the outcome recorder (`super::outcome`). Shared (`Arc`) between the generations of a
/// channel across reloads, so that exported counters stay monotonic when
/// a channel's URL or breaker settings change.
#[derive(Debug, Default)]
pub struct ChannelStats {
    /// Sessions started here.
    pub sessions_started: AtomicU64,
    /// Session starts that failed here (any error).
    pub session_failures: AtomicU64,
    /// Session starts that failed here and were then tried elsewhere.
    pub failovers: AtomicU64,
    /// Session answers with `isContingency: true`.
    pub contingency_answers: AtomicU64,
    /// Session starts that skipped this channel because its circuit was open.
    pub rejected_open: AtomicU64,
    /// Verifications sent here.
    pub verifications: AtomicU64,
    /// Verifications that failed here (any error).
    pub verification_failures: AtomicU64,
    last: Mutex<LastSeen>,
}

#[derive(Debug, Default, Clone)]
struct LastSeen {
    vendor: String,
    contingency: bool,
    error_class: &'static str,
}

impl ChannelStats {
    /// Counts one call here. A verification counts as sent even when the
    /// bulkhead refused it (`verifications`, `verification_failures` and
    /// the last error class `saturated`, as operators have always read
    /// them); a refused session start counts nowhere.
    pub fn count(&self, outcome: &CallOutcome<'_>) {
        match (outcome.op, outcome.ended) {
            (_, Ended::CircuitOpen) => self.record_rejected_open(),
            (
                _,
                Ended::Granted {
                    vendor,
                    contingency,
                },
            ) => self.record_grant(vendor, contingency),
            (Operation::Liveness3D, Ended::Verdict(_)) => self.record_verification(None),
            (Operation::Liveness3D, Ended::Failed(class)) => self.record_verification(Some(class)),
            (Operation::Liveness3D, Ended::Refused) => {
                let refused = UpstreamError::Saturated { op: outcome.op };
                self.record_verification(Some(refused.class()));
            }
            (_, Ended::Failed(class)) => self.record_session_failure(class),
            (_, Ended::Refused | Ended::Verdict(_)) => {}
        }
    }

    fn last(&self) -> std::sync::MutexGuard<'_, LastSeen> {
        crate::sync::lock(&self.last)
    }

    pub(super) fn record_grant(&self, vendor: &str, contingency: bool) {
        self.sessions_started.fetch_add(1, Ordering::Relaxed);
        if contingency {
            self.contingency_answers.fetch_add(1, Ordering::Relaxed);
        }
        let mut last = self.last();
        if last.vendor != vendor {
            last.vendor = vendor.to_owned();
        }
        last.contingency = contingency;
    }

    /// A session start failed here with an error of `class`.
    pub(super) fn record_session_failure(&self, class: &'static str) {
        self.session_failures.fetch_add(1, Ordering::Relaxed);
        self.record_error_class(class);
    }

    /// A failed session start here is being tried on another channel.
    pub(super) fn record_failover(&self) {
        self.failovers.fetch_add(1, Ordering::Relaxed);
    }

    /// A session start skipped this channel: its circuit was open.
    pub(super) fn record_rejected_open(&self) {
        self.rejected_open.fetch_add(1, Ordering::Relaxed);
    }

    /// A verification was sent here; it failed with an error of `failed`'s
    /// class, if any.
    pub(super) fn record_verification(&self, failed: Option<&'static str>) {
        self.verifications.fetch_add(1, Ordering::Relaxed);
        if let Some(class) = failed {
            self.verification_failures.fetch_add(1, Ordering::Relaxed);
            self.record_error_class(class);
        }
    }

    fn record_error_class(&self, class: &'static str) {
        self.last().error_class = class;
    }
}

/// One channel of one configuration generation. Calls hold an
/// `Arc<Channel>` for their whole duration, so a reload never pulls a
/// channel from under a call in flight.
#[derive(Debug)]
pub struct Channel {
    spec: ChannelSpec,
    /// Where calls go, built from the spec once per generation.
    endpoint: ChannelEndpoint,
    breaker: Breaker,
    drained: AtomicBool,
    stats: Arc<ChannelStats>,
}

/// A binding holds the channel generation that issued a session: a
/// reload that changes the channel makes a new generation, and the
/// session's verification still goes to the old one.
impl Issuer for Arc<Channel> {
    fn name(&self) -> &str {
        Channel::name(self)
    }

    fn is(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other)
    }
}

impl Channel {
    /// A fresh channel: closed breaker, not drained.
    pub fn new(spec: ChannelSpec) -> Self {
        Self::with_state(spec, false, Arc::default())
    }

    pub(crate) fn with_state(spec: ChannelSpec, drained: bool, stats: Arc<ChannelStats>) -> Self {
        Self {
            breaker: Breaker::new(spec.breaker.clone()),
            endpoint: spec.endpoint(),
            spec,
            drained: AtomicBool::new(drained),
            stats,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The configuration this generation runs with.
    pub fn spec(&self) -> &ChannelSpec {
        &self.spec
    }

    /// Where this channel's calls go.
    pub fn endpoint(&self) -> &ChannelEndpoint {
        &self.endpoint
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<ChannelStats> {
        &self.stats
    }

    /// True while new sessions avoid this channel.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    pub(crate) fn set_drained(&self, drained: bool) {
        self.drained.store(drained, Ordering::Relaxed);
    }

    /// Everything an operator or an exporter wants to know, at `now`.
    pub fn snapshot(&self, now: Instant) -> ChannelSnapshot {
        let b = self.breaker.snapshot(now);
        let s = &self.stats;
        let last = s.last().clone();
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ChannelSnapshot {
            name: self.spec.name.clone(),
            base_url: self.spec.base_url.clone(),
            priority: self.spec.priority,
            drained: self.is_drained(),
            circuit: b.state,
            consecutive_failures: b.consecutive_failures,
            ejections: b.ejections,
            times_opened: b.times_opened,
            last_error_class: last.error_class,
            last_vendor: last.vendor,
            last_contingency: last.contingency,
            sessions_started: n(&s.sessions_started),
            session_failures: n(&s.session_failures),
            failovers: n(&s.failovers),
            contingency_answers: n(&s.contingency_answers),
            rejected_open: n(&s.rejected_open),
            verifications: n(&s.verifications),
            verification_failures: n(&s.verification_failures),
            in_flight: self.endpoint.bulkhead().in_flight(),
            max_concurrent_requests: self.endpoint.bulkhead().size(),
        }
    }
}

/// A point-in-time view of a channel, for `ListChannels`, the CLI and the
/// metrics exporter. Holds no secrets: names, URLs, classes and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSnapshot {
    /// Channel name.
    pub name: String,
    /// Base URL.
    pub base_url: String,
    /// Priority (lower is preferred).
    pub priority: i32,
    /// True while drained.
    pub drained: bool,
    /// Breaker state.
    pub circuit: CircuitState,
    /// Upstream faults since the last success.
    pub consecutive_failures: u32,
    /// Consecutive ejections since the last success.
    pub ejections: u32,
    /// Times the circuit opened (counter).
    pub times_opened: u64,
    /// Class of the most recent error (`timeout`, `http_5xx`, ...); empty if none.
    pub last_error_class: &'static str,
    /// Vendor named by the last session answer.
    pub last_vendor: String,
    /// `isContingency` of the last session answer.
    pub last_contingency: bool,
    /// Counter: sessions started.
    pub sessions_started: u64,
    /// Counter: session starts that failed here.
    pub session_failures: u64,
    /// Counter: failed starts here that were tried on another channel.
    pub failovers: u64,
    /// Counter: contingency answers.
    pub contingency_answers: u64,
    /// Counter: starts that skipped this channel because its circuit was open.
    pub rejected_open: u64,
    /// Counter: verifications sent.
    pub verifications: u64,
    /// Counter: verifications that failed.
    pub verification_failures: u64,
    /// Requests in flight to this channel now.
    pub in_flight: usize,
    /// Its bulkhead: the most requests in flight at once.
    pub max_concurrent_requests: usize,
}

/// The channels of one configuration generation, by priority (ties in
/// configuration order). Immutable: a reload builds a new set.
#[derive(Debug, Default)]
pub struct ChannelSet {
    channels: Vec<Arc<Channel>>,
}

impl ChannelSet {
    /// Builds the set from validated specs, reusing `previous` channels:
    /// an unchanged channel keeps its breaker, drain flag and counters; a
    /// changed one keeps its drain flag and counters with a fresh breaker
    /// (the endpoint it judged may be gone).
    pub fn build(specs: Vec<ChannelSpec>, previous: Option<&ChannelSet>) -> Self {
        let mut channels: Vec<Arc<Channel>> = specs
            .into_iter()
            .map(|spec| match previous.and_then(|p| p.get(&spec.name)) {
                Some(old) if *old.spec() == spec => Arc::clone(old),
                Some(old) => Arc::new(Channel::with_state(
                    spec,
                    old.is_drained(),
                    Arc::clone(old.stats()),
                )),
                None => Arc::new(Channel::new(spec)),
            })
            .collect();
        // Stable: equal priorities keep configuration order.
        channels.sort_by_key(|c| c.spec().priority);
        Self { channels }
    }

    /// All channels, by priority.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Channel>> {
        self.channels.iter()
    }

    /// The channel named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Channel>> {
        self.channels.iter().find(|c| c.name() == name)
    }

    /// The channel of lowest priority number.
    pub fn primary(&self) -> Option<&Arc<Channel>> {
        self.channels.first()
    }

    /// The second channel by priority.
    pub fn alternative(&self) -> Option<&Arc<Channel>> {
        self.channels.get(1)
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// True when no channel is configured.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}
