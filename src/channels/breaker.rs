//! A per-channel circuit breaker that opens on a failure *rate*, recovers
//! through several trial calls, and never makes the gateway refuse what a
//! vendor might serve.
//!
//! Why a breaker at all: when a vendor channel is down, every new 3D session
//! would otherwise wait for a connect error or a timeout before failing over,
//! so callers pay the full channel timeout on each start. Why a rate and not
//! a run of failures: with many callers in flight, a vendor that fails one
//! call in ten produces five failures in a row within milliseconds, and a
//! breaker that opens on that turns partial faults into an outage.
//!
//! ```text
//!            rate >= failure_rate_percent over window_secs (>= minimum_calls),
//!            or failure_threshold unanswered calls in a row
//!   Closed ---------------------------------------------------------> Open
//!     ^                                                                |
//!     |  a trial (or panic-routed) call succeeds        open time ends |
//!     +------------------------------- HalfOpen <----------------------+
//!                                      | a trial fails: Open again, for
//!                                      | twice as long (up to max_ejection_ms)
//! ```
//!
//! - Open: calls are refused until the open time ends; the router sends
//!   them elsewhere, or, when every channel is open, to the one open
//!   longest (panic routing, `router::session`), whose success closes it.
//! - Half-open: up to `half_open_trials` calls go through at once; the
//!   first success closes the circuit, a failure opens it again.
//! - The open time resets on success.
//!
//! Only upstream faults count ([`crate::upstream::UpstreamError::is_upstream_fault`]):
//! a 2xx and a 4xx both prove the channel answers, so both are successes
//! here even when the business outcome is negative.
//!
//! Time is passed in (`tokio::time::Instant`) so that tests drive it with
//! `tokio::time::pause()` and the state machine stays pure.

mod config;
mod window;

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

pub use config::BreakerConfig;
use window::Window;

use crate::backoff::Backoff;

/// What the breaker says about a channel, for routing and for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    /// Calls flow.
    Closed,
    /// Calls are refused until the back-off ends.
    Open,
    /// The back-off has ended: trial calls may go.
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

/// What one call said about the channel's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// The channel answered (2xx or 4xx).
    Answered,
    /// An upstream fault; `answered` when the channel did answer (5xx, a
    /// malformed body), not when nothing came back (connection refused or
    /// failed, timed out).
    Fault { answered: bool },
    /// Nothing learnt (cancelled, or cut by the caller's own deadline).
    Unknown,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen { trials: u32 },
}

/// Which door a permit came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    /// A closed circuit.
    Closed,
    /// One of a half-open circuit's trials.
    Trial,
    /// Panic routing past an open circuit.
    Panic,
}

#[derive(Debug)]
struct Inner {
    state: State,
    window: Window,
    /// Upstream faults since the last success.
    consecutive_failures: u32,
    /// Calls in a row that got no answer at all (the fast path).
    unanswered: u32,
    /// Openings since the last success; drives the back-off.
    ejections: u32,
    /// Times the breaker opened, ever (a metric).
    times_opened: u64,
    /// When the circuit opened, until it closes again.
    open_since: Option<Instant>,
}

/// The breaker of one channel. Cheap to consult: one short, uncontended
/// lock, never held across an `.await`; recording a call allocates nothing.
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
    /// Calls and failures within the sliding window.
    pub window_calls: u32,
    /// Failures within the sliding window.
    pub window_failures: u32,
}

/// The breaker refused the call: the circuit is open, or every trial of
/// its half-open state is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected;

/// Leave to make one call through the breaker. Report the outcome with
/// [`Permit::report`]; a permit dropped without an outcome (the caller went
/// away) frees its trial slot so the breaker cannot stay half-open forever.
#[derive(Debug)]
#[must_use = "report the call's outcome on the permit"]
pub struct Permit<'a> {
    breaker: &'a Breaker,
    door: Door,
    settled: bool,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        let window = Window::new(config.window_secs, Instant::now());
        Self {
            config,
            inner: Mutex::new(Inner {
                state: State::Closed,
                window,
                consecutive_failures: 0,
                unanswered: 0,
                ejections: 0,
                times_opened: 0,
                open_since: None,
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
    /// open, and granted to up to `half_open_trials` calls at once once the
    /// back-off has ended.
    pub fn try_acquire(&self, now: Instant) -> Result<Permit<'_>, Rejected> {
        let mut inner = self.lock();
        let door = match inner.state {
            State::Closed => Door::Closed,
            State::Open { until } if now < until => return Err(Rejected),
            State::Open { .. } => {
                inner.state = State::HalfOpen { trials: 1 };
                Door::Trial
            }
            State::HalfOpen { trials } if trials < self.config.half_open_trials => {
                inner.state = State::HalfOpen { trials: trials + 1 };
                Door::Trial
            }
            State::HalfOpen { .. } => return Err(Rejected),
        };
        Ok(self.permit(door))
    }

    /// A call past a refusing circuit, because every channel refuses
    /// (panic routing): granted always; its success closes the circuit,
    /// its failure changes nothing (the open time does not grow).
    pub fn panic_acquire(&self) -> Permit<'_> {
        self.permit(Door::Panic)
    }

    fn permit(&self, door: Door) -> Permit<'_> {
        Permit {
            breaker: self,
            door,
            settled: false,
        }
    }

    /// When the circuit opened, while it is not closed: panic routing picks
    /// the channel open longest.
    pub fn open_since(&self) -> Option<Instant> {
        self.lock().open_since
    }

    /// Records the outcome of a call that was not gated by the breaker
    /// (a sticky verification). It feeds the window and can open a closed
    /// breaker, but never closes an open one: only a trial does that, so a
    /// late answer from before the outage cannot flood a sick channel.
    pub fn record(&self, health: Health, now: Instant) {
        self.settle(Door::Closed, health, now);
    }

    /// The state at `now`, for operators and metrics.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        let inner = self.lock();
        let state = match inner.state {
            State::Closed => CircuitState::Closed,
            State::Open { until } if now < until => CircuitState::Open,
            State::Open { .. } | State::HalfOpen { .. } => CircuitState::HalfOpen,
        };
        let (window_calls, window_failures) = inner.window.totals(now);
        BreakerSnapshot {
            state,
            consecutive_failures: inner.consecutive_failures,
            ejections: inner.ejections,
            times_opened: inner.times_opened,
            window_calls,
            window_failures,
        }
    }

    /// Open time of the `n`th consecutive ejection (1-based): the base,
    /// doubled per ejection, capped. Not jittered: each channel has its
    /// own breaker, so there is no crowd of them to spread.
    fn open_time(&self, n: u32) -> Duration {
        Backoff::new(
            Duration::from_millis(self.config.base_ejection_ms),
            Duration::from_millis(self.config.max_ejection_ms),
        )
        .nth_step(n)
    }

    /// Whether the window or the run of unanswered calls says open.
    fn trips(&self, inner: &Inner, now: Instant) -> bool {
        if inner.unanswered >= self.config.failure_threshold {
            return true;
        }
        let (calls, failures) = inner.window.totals(now);
        calls >= self.config.minimum_calls
            && u64::from(failures) * 100
                >= u64::from(self.config.failure_rate_percent) * u64::from(calls)
    }

    fn open(&self, inner: &mut Inner, now: Instant) {
        inner.ejections = inner.ejections.saturating_add(1);
        inner.times_opened = inner.times_opened.saturating_add(1);
        inner.open_since.get_or_insert(now);
        inner.state = State::Open {
            until: now + self.open_time(inner.ejections),
        };
    }

    fn close(inner: &mut Inner) {
        inner.state = State::Closed;
        inner.ejections = 0;
        inner.unanswered = 0;
        inner.consecutive_failures = 0;
        inner.open_since = None;
        inner.window.clear();
    }

    /// Applies one call's outcome.
    fn settle(&self, door: Door, health: Health, now: Instant) {
        let mut inner = self.lock();
        if door == Door::Trial {
            if let State::HalfOpen { trials } = inner.state {
                inner.state = State::HalfOpen {
                    trials: trials.saturating_sub(1),
                };
            }
        }
        match health {
            Health::Unknown => {}
            Health::Answered => {
                inner.consecutive_failures = 0;
                inner.unanswered = 0;
                match (door, inner.state) {
                    // Proof the channel serves again: close, whatever
                    // another trial said meanwhile.
                    (Door::Trial | Door::Panic, _) => Self::close(&mut inner),
                    (Door::Closed, State::Closed) => {
                        inner.ejections = 0;
                        inner.window.record(now, false);
                    }
                    // A late answer from before the circuit opened.
                    (Door::Closed, _) => {}
                }
            }
            Health::Fault { answered } => {
                inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
                inner.unanswered = if answered {
                    0
                } else {
                    inner.unanswered.saturating_add(1)
                };
                match (door, inner.state) {
                    (Door::Trial, State::HalfOpen { .. }) => self.open(&mut inner, now),
                    (Door::Closed, State::Closed) => {
                        inner.window.record(now, true);
                        if self.trips(&inner, now) {
                            self.open(&mut inner, now);
                        }
                    }
                    // A panic call, or an outcome that arrives after the
                    // circuit changed: the state stands.
                    _ => {}
                }
            }
        }
    }
}

impl Permit<'_> {
    /// Reports what the call said about the channel.
    pub fn report(mut self, health: Health, now: Instant) {
        self.settled = true;
        self.breaker.settle(self.door, health, now);
    }

    /// True when this call is one of a half-open circuit's trials.
    pub fn is_trial(&self) -> bool {
        self.door == Door::Trial
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker
                .settle(self.door, Health::Unknown, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests;
