//! A per-channel circuit breaker with exponential ejection.
//!
//! Why a breaker at all: when a vendor channel is down, every new 3D session
//! would otherwise wait for a connect error or a timeout before failing over,
//! so callers pay the full channel timeout on each start. After
//! `failure_threshold` consecutive upstream faults the breaker *opens* and
//! the router skips the channel without calling it. After a back-off it lets
//! exactly one probe through (*half-open*); the probe's outcome closes the
//! breaker or re-opens it for twice as long (capped), so a channel that stays
//! down is tried less and less often.
//!
//! Only upstream faults count ([`crate::upstream::UpstreamError::is_upstream_fault`]):
//! a 2xx and a 4xx both prove the channel answers, so both are successes
//! here even when the business outcome is negative.
//!
//! Time is passed in (`tokio::time::Instant`) so that tests drive it with
//! `tokio::time::pause()` and the state machine stays pure.

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::config::BreakerConfig;

/// What the breaker says about a channel, for routing and for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    /// Calls flow.
    Closed,
    /// Calls are refused until the back-off ends.
    Open,
    /// The back-off has ended: one probe call may go (or is in flight).
    HalfOpen,
}

impl CircuitState {
    /// A stable, lower-case name for metric labels and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }

    /// The value of the `idgate_channel_circuit_state` gauge: 0 closed,
    /// 1 half-open, 2 open (higher is worse, for alerts).
    pub fn gauge_value(self) -> i64 {
        match self {
            CircuitState::Closed => 0,
            CircuitState::HalfOpen => 1,
            CircuitState::Open => 2,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen { probe_in_flight: bool },
}

#[derive(Debug)]
struct Inner {
    state: State,
    /// Upstream faults since the last success (probes included).
    consecutive_failures: u32,
    /// Openings since the last success; drives the back-off.
    ejections: u32,
    /// Times the breaker opened, ever (a metric).
    times_opened: u64,
}

/// The breaker of one channel. Cheap to consult: one short, uncontended
/// lock, never held across an `.await`.
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    inner: Mutex<Inner>,
}

/// A point-in-time view of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSnapshot {
    /// The state as seen at the snapshot's instant.
    pub state: CircuitState,
    /// Upstream faults since the last success.
    pub consecutive_failures: u32,
    /// Consecutive openings since the last success.
    pub ejections: u32,
    /// Times the breaker opened since the channel was configured.
    pub times_opened: u64,
}

/// The breaker refused the call: the channel is open, or its one probe is
/// already in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected;

/// Leave to make one call through the breaker. Report the outcome with
/// [`Permit::success`], [`Permit::failure`] or [`Permit::neutral`]; a permit
/// dropped without an outcome (the caller went away) frees the probe slot
/// so the breaker cannot stay half-open forever.
#[derive(Debug)]
#[must_use = "report the call's outcome on the permit"]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
    settled: bool,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            inner: Mutex::new(Inner {
                state: State::Closed,
                consecutive_failures: 0,
                ejections: 0,
                times_opened: 0,
            }),
        }
    }

    /// The settings this breaker runs with.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere cannot leave `Inner` half-updated in a way that
        // matters more than refusing all traffic would, so recover.
        crate::sync::lock(&self.inner)
    }

    /// Asks to make a call at `now`: granted while closed, refused while
    /// open, and granted to exactly one probe once the back-off has ended.
    pub fn try_acquire(&self, now: Instant) -> Result<Permit<'_>, Rejected> {
        let mut inner = self.lock();
        let probe = match inner.state {
            State::Closed => false,
            State::Open { until } if now < until => return Err(Rejected),
            State::Open { .. }
            | State::HalfOpen {
                probe_in_flight: false,
            } => {
                inner.state = State::HalfOpen {
                    probe_in_flight: true,
                };
                true
            }
            State::HalfOpen {
                probe_in_flight: true,
            } => return Err(Rejected),
        };
        Ok(Permit {
            breaker: self,
            probe,
            settled: false,
        })
    }

    /// Records the outcome of a call that was not gated by the breaker
    /// (a sticky verification). It updates the failure count and can open a
    /// closed breaker, but never closes an open one: only a probe does that,
    /// so a late answer from before the outage cannot flood a sick channel.
    pub fn record(&self, fault: bool, now: Instant) {
        self.settle(false, Some(fault), now);
    }

    /// The state at `now`, for operators and metrics.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        let inner = self.lock();
        let state = match inner.state {
            State::Closed => CircuitState::Closed,
            State::Open { until } if now < until => CircuitState::Open,
            State::Open { .. } | State::HalfOpen { .. } => CircuitState::HalfOpen,
        };
        BreakerSnapshot {
            state,
            consecutive_failures: inner.consecutive_failures,
            ejections: inner.ejections,
            times_opened: inner.times_opened,
        }
    }

    /// Back-off of the `n`th consecutive ejection (1-based): the base,
    /// doubled per ejection, capped.
    fn backoff(&self, n: u32) -> Duration {
        let base = self.config.base_ejection_ms;
        let factor = 1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX);
        let ms = base
            .saturating_mul(factor)
            .min(self.config.max_ejection_ms.max(base));
        Duration::from_millis(ms)
    }

    /// Applies an outcome. `fault: None` means "no verdict" (cancelled, or
    /// timed out by the caller's own deadline): a probe slot is freed and
    /// nothing else changes.
    fn settle(&self, probe: bool, fault: Option<bool>, now: Instant) {
        let mut inner = self.lock();
        match (fault, probe) {
            (None, true) => {
                if let State::HalfOpen { .. } = inner.state {
                    inner.state = State::HalfOpen {
                        probe_in_flight: false,
                    };
                }
            }
            (None, false) => {}
            (Some(false), true) => {
                inner.state = State::Closed;
                inner.consecutive_failures = 0;
                inner.ejections = 0;
            }
            (Some(false), false) => {
                if let State::Closed = inner.state {
                    inner.consecutive_failures = 0;
                    inner.ejections = 0;
                }
            }
            (Some(true), probe) => {
                inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
                let open = if probe {
                    true
                } else {
                    matches!(inner.state, State::Closed)
                        && inner.consecutive_failures >= self.config.failure_threshold
                };
                if open {
                    inner.ejections = inner.ejections.saturating_add(1);
                    inner.times_opened = inner.times_opened.saturating_add(1);
                    let until = now + self.backoff(inner.ejections);
                    inner.state = State::Open { until };
                }
            }
        }
    }
}

impl Permit<'_> {
    /// The channel answered (2xx or 4xx).
    pub fn success(mut self, now: Instant) {
        self.settled = true;
        self.breaker.settle(self.probe, Some(false), now);
    }

    /// The channel failed with an upstream fault.
    pub fn failure(mut self, now: Instant) {
        self.settled = true;
        self.breaker.settle(self.probe, Some(true), now);
    }

    /// The call says nothing about the channel's health (e.g. the caller's
    /// own deadline cut it short).
    pub fn neutral(mut self, now: Instant) {
        self.settled = true;
        self.breaker.settle(self.probe, None, now);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.settle(self.probe, None, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(threshold: u32, base: u64, max: u64) -> Breaker {
        Breaker::new(BreakerConfig {
            failure_threshold: threshold,
            base_ejection_ms: base,
            max_ejection_ms: max,
        })
    }

    fn fail(b: &Breaker, now: Instant) {
        b.try_acquire(now).expect("permit").failure(now);
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_threshold_consecutive_faults_only() {
        let b = breaker(3, 1000, 60_000);
        let t = Instant::now();
        fail(&b, t);
        fail(&b, t);
        // A success in between resets the streak.
        b.try_acquire(t).unwrap().success(t);
        fail(&b, t);
        fail(&b, t);
        assert_eq!(b.snapshot(t).state, CircuitState::Closed);
        fail(&b, t);
        assert_eq!(b.snapshot(t).state, CircuitState::Open);
        assert_eq!(b.try_acquire(t).unwrap_err(), Rejected);
        assert_eq!(b.snapshot(t).times_opened, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn lets_one_probe_through_after_backoff_and_closes_on_success() {
        let b = breaker(1, 1000, 60_000);
        let t = Instant::now();
        fail(&b, t);
        assert!(b.try_acquire(t + Duration::from_millis(999)).is_err());
        let at = t + Duration::from_millis(1000);
        let probe = b.try_acquire(at).expect("probe after back-off");
        assert!(probe.probe);
        assert!(b.try_acquire(at).is_err(), "only one probe at a time");
        assert_eq!(b.snapshot(at).state, CircuitState::HalfOpen);
        probe.success(at);
        let s = b.snapshot(at);
        assert_eq!(s.state, CircuitState::Closed);
        assert_eq!((s.consecutive_failures, s.ejections), (0, 0));
        assert!(!b.try_acquire(at).unwrap().probe);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_per_failed_probe_and_is_capped() {
        let b = breaker(1, 1000, 3000);
        let mut t = Instant::now();
        fail(&b, t);
        let mut backoff = 1000;
        for expected in [2000u64, 3000, 3000] {
            t += Duration::from_millis(backoff);
            b.try_acquire(t).expect("probe").failure(t);
            let ms = Duration::from_millis;
            assert!(b.try_acquire(t + ms(expected - 1)).is_err());
            assert_eq!(b.snapshot(t + ms(expected - 1)).state, CircuitState::Open);
            assert_eq!(b.snapshot(t + ms(expected)).state, CircuitState::HalfOpen);
            backoff = expected;
        }
        assert_eq!(b.snapshot(t).ejections, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_probe_frees_the_slot() {
        let b = breaker(1, 10, 100);
        let t = Instant::now();
        fail(&b, t);
        let at = t + Duration::from_millis(10);
        drop(b.try_acquire(at).unwrap());
        assert!(b.try_acquire(at).unwrap().probe);
    }

    #[tokio::test(start_paused = true)]
    async fn ungated_outcomes_open_but_never_close() {
        let b = breaker(2, 1000, 60_000);
        let t = Instant::now();
        b.record(true, t);
        b.record(true, t);
        assert_eq!(b.snapshot(t).state, CircuitState::Open);
        b.record(false, t);
        assert_eq!(b.snapshot(t).state, CircuitState::Open);
    }
}
