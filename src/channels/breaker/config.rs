//! `breaker = { ... }` of a channel (and of `[embedded_channels]`): when
//! its circuit opens, how long it stays open, and how it recovers.

use serde::Deserialize;

/// Longest sliding window, in seconds.
pub const MAX_WINDOW_SECS: u64 = 300;
/// Most trial calls a half-open circuit lets through at once.
pub const MAX_HALF_OPEN_TRIALS: u32 = 100;
/// Most consecutive unanswered calls the fast path may wait for.
pub const MAX_FAILURE_THRESHOLD: u32 = 1_000;
/// Most calls the window may need before its rate counts.
pub const MAX_MINIMUM_CALLS: u32 = 100_000;

/// Circuit breaker settings of one channel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Share of failed calls, in percent, over the sliding window that
    /// opens the circuit (once the window holds `minimum_calls`).
    pub failure_rate_percent: u32,
    /// Calls the window must hold before its failure rate counts: a few
    /// failures of a quiet minute do not open a circuit.
    pub minimum_calls: u32,
    /// Length of the sliding window, in seconds (one-second buckets).
    pub window_secs: u64,
    /// Consecutive calls that got no answer at all (connection refused or
    /// failed, timed out) that open the circuit at once, whatever the
    /// window says: the fast path for a channel that is simply gone.
    pub failure_threshold: u32,
    /// Open time of the first ejection, in milliseconds; doubles with each
    /// consecutive ejection up to `max_ejection_ms`.
    pub base_ejection_ms: u64,
    /// Longest open time, in milliseconds.
    pub max_ejection_ms: u64,
    /// Trial calls a half-open circuit lets through at once; the first
    /// that succeeds closes it.
    pub half_open_trials: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_rate_percent: 50,
            minimum_calls: 20,
            window_secs: 10,
            failure_threshold: 5,
            base_ejection_ms: 1_000,
            max_ejection_ms: 8_000,
            half_open_trials: 3,
        }
    }
}

impl BreakerConfig {
    /// Checks every key against its bounds; the error names the key
    /// (under `breaker.`).
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(1..=100).contains(&self.failure_rate_percent) {
            return Err("breaker.failure_rate_percent must be from 1 to 100");
        }
        if !(1..=MAX_MINIMUM_CALLS).contains(&self.minimum_calls) {
            return Err("breaker.minimum_calls must be from 1 to 100000");
        }
        if !(1..=MAX_WINDOW_SECS).contains(&self.window_secs) {
            return Err("breaker.window_secs must be from 1 to 300");
        }
        if !(1..=MAX_FAILURE_THRESHOLD).contains(&self.failure_threshold) {
            return Err("breaker.failure_threshold must be from 1 to 1000");
        }
        if self.base_ejection_ms == 0 {
            return Err("breaker.base_ejection_ms must be positive");
        }
        if self.max_ejection_ms < self.base_ejection_ms {
            return Err("breaker.max_ejection_ms must be at least base_ejection_ms");
        }
        if !(1..=MAX_HALF_OPEN_TRIALS).contains(&self.half_open_trials) {
            return Err("breaker.half_open_trials must be from 1 to 100");
        }
        Ok(())
    }
}
