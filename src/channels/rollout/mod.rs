//! The guarded rollout of new sessions from one channel to another
//! (`StartRollout`, `idgate channels rollout`): the weighted split moved
//! step by step (5 → 25 → 50 → 100 by default), each step judged on the
//! fleet's counts of the two channels and either passed or rolled back at
//! once, with the breach named.
//!
//! - [`plan`]: what is asked, and its checks;
//! - [`counts`]: each replica's counts of the step under way;
//! - [`judge`]: the decision at the end of a step;
//! - [`record`]: the rollout as the fleet stores it;
//! - [`driver`]: the service and the loop every replica runs (one at a
//!   time drives, under a lease).
//!
//! Operators' guide: `docs/channels.md#migrating-to-another-vendor`.

pub mod counts;
pub mod driver;
pub mod judge;
pub mod plan;
pub mod record;

use std::time::Duration;

use serde::Deserialize;

pub use driver::Rollouts;
pub use plan::RolloutPlan;
pub use record::{Breach, Decision, RolloutRecord, RolloutState, StepVerdict};

/// `[rollout]`: how often replicas look at the rollout, how long the
/// driver's lease lasts, and the shortest step a request may ask.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutConfig {
    /// How often each replica reads the rollout, publishes its counts and
    /// (the driver) judges the step, in milliseconds (default 1000).
    pub tick_ms: u64,
    /// How long the driver's lease lasts without renewal (default
    /// 10000): when the driving replica dies, another takes over within
    /// it. At least twice `tick_ms`.
    pub lease_ms: u64,
    /// Shortest step a `StartRollout` may ask, in seconds (default 60).
    pub min_step_secs: u64,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            tick_ms: 1_000,
            lease_ms: 10_000,
            min_step_secs: 60,
        }
    }
}

impl RolloutConfig {
    /// The round of every replica.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms.max(1))
    }

    /// The driver's lease.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.max(1))
    }

    /// The shortest step accepted.
    pub fn min_step(&self) -> Duration {
        Duration::from_secs(self.min_step_secs)
    }

    /// Refuses a lease shorter than two rounds (the driver would lose it
    /// between renewals) and a zero round.
    pub fn validate(&self) -> Result<(), String> {
        if self.tick_ms == 0 {
            return Err("rollout.tick_ms must be at least 1".to_owned());
        }
        if self.lease_ms < 2 * self.tick_ms {
            return Err("rollout.lease_ms must be at least twice rollout.tick_ms".to_owned());
        }
        Ok(())
    }
}
