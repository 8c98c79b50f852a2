//! What a rollout is asked to do, and the checks every request passes
//! before anything moves.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default steps: the candidate's share of new sessions, in percent.
pub const DEFAULT_STEPS: [u32; 4] = [5, 25, 50, 100];
/// Default least time of a step: 30 minutes.
pub const DEFAULT_STEP: Duration = Duration::from_secs(30 * 60);
/// Default least sessions on the candidate before a step is judged.
pub const DEFAULT_MIN_SESSIONS: u64 = 200;
/// Default highest error rate of the candidate over a step.
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.02;
/// Default largest drop of the candidate's pass rate below the
/// incumbent's (see [`super::judge`]).
pub const DEFAULT_MAX_PASS_RATE_DROP: f64 = 0.03;
/// Most steps in a rollout.
pub const MAX_STEPS: usize = 20;
/// Longest step: one day.
pub const MAX_STEP: Duration = Duration::from_secs(86_400);
/// Most sessions a step may wait for.
pub const MAX_MIN_SESSIONS: u64 = 1_000_000;

/// A rollout of new sessions from `incumbent` to `candidate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutPlan {
    /// The channel new sessions move away from.
    pub incumbent: String,
    /// The channel new sessions move to.
    pub candidate: String,
    /// The candidate's weight at each step, percent, increasing, last 100.
    pub steps: Vec<u32>,
    /// Least time of a step, in milliseconds.
    pub step_ms: u64,
    /// Least session starts on the candidate before a step is judged.
    pub min_sessions: u64,
    /// Highest error rate of the candidate over a step (0 to 1).
    pub max_error_rate: f64,
    /// Largest drop of the candidate's pass rate below the incumbent's
    /// (0 to 1).
    pub max_pass_rate_drop: f64,
}

/// A refused plan: the request field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// The request field (`steps[2]`, `max_error_rate`, ...).
    pub field: String,
    /// Why.
    pub why: String,
}

fn refuse(field: impl Into<String>, why: impl Into<String>) -> Result<(), PlanError> {
    Err(PlanError {
        field: field.into(),
        why: why.into(),
    })
}

impl RolloutPlan {
    /// The least time of a step.
    pub fn step_duration(&self) -> Duration {
        Duration::from_millis(self.step_ms)
    }

    /// Checks the numbers of the plan: steps increasing from 1 to 100
    /// ending at 100, at most [`MAX_STEPS`]; a step from `min_step`
    /// (`[rollout] min_step_secs`) to [`MAX_STEP`]; sessions from 1 to
    /// [`MAX_MIN_SESSIONS`]; both rates from 0 to 1. Channels are checked
    /// by the caller, against the set in force.
    pub fn check(&self, min_step: Duration) -> Result<(), PlanError> {
        if self.steps.is_empty() {
            return refuse("steps", "at least one step is required");
        }
        if self.steps.len() > MAX_STEPS {
            return refuse("steps", format!("at most {MAX_STEPS} steps"));
        }
        let mut previous = 0;
        for (i, &w) in self.steps.iter().enumerate() {
            if !(1..=100).contains(&w) {
                return refuse(
                    format!("steps[{i}]"),
                    "a step is a percentage from 1 to 100",
                );
            }
            if w <= previous {
                return refuse(format!("steps[{i}]"), "steps must increase");
            }
            previous = w;
        }
        if previous != 100 {
            return refuse(
                format!("steps[{}]", self.steps.len() - 1),
                "the last step must be 100",
            );
        }
        let step = self.step_duration();
        if step < min_step || step > MAX_STEP {
            return refuse(
                "step_duration",
                format!(
                    "from {}s ([rollout] min_step_secs) to {}s",
                    min_step.as_secs(),
                    MAX_STEP.as_secs()
                ),
            );
        }
        if !(1..=MAX_MIN_SESSIONS).contains(&self.min_sessions) {
            return refuse("min_sessions", format!("from 1 to {MAX_MIN_SESSIONS}"));
        }
        if !(0.0..=1.0).contains(&self.max_error_rate) {
            return refuse("max_error_rate", "a rate from 0 to 1");
        }
        if !(0.0..=1.0).contains(&self.max_pass_rate_drop) {
            return refuse("max_pass_rate_drop", "a rate from 0 to 1");
        }
        if self.incumbent == self.candidate {
            return refuse("from", "the incumbent must differ from the candidate");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RolloutPlan {
        RolloutPlan {
            incumbent: "primary".into(),
            candidate: "alternative".into(),
            steps: DEFAULT_STEPS.to_vec(),
            step_ms: 60_000,
            min_sessions: DEFAULT_MIN_SESSIONS,
            max_error_rate: DEFAULT_MAX_ERROR_RATE,
            max_pass_rate_drop: DEFAULT_MAX_PASS_RATE_DROP,
        }
    }

    fn field_of(edit: impl FnOnce(&mut RolloutPlan)) -> String {
        let mut p = plan();
        edit(&mut p);
        p.check(Duration::from_secs(60)).expect_err("refused").field
    }

    #[test]
    fn every_bad_number_is_refused_naming_its_field() {
        assert_eq!(plan().check(Duration::from_secs(60)), Ok(()));
        assert_eq!(field_of(|p| p.steps = vec![]), "steps");
        assert_eq!(field_of(|p| p.steps = vec![5, 5, 100]), "steps[1]");
        assert_eq!(field_of(|p| p.steps = vec![50, 25, 100]), "steps[1]");
        assert_eq!(field_of(|p| p.steps = vec![5, 101]), "steps[1]");
        assert_eq!(field_of(|p| p.steps = vec![5, 50]), "steps[1]");
        assert_eq!(field_of(|p| p.steps = (1..=21).collect()), "steps");
        assert_eq!(field_of(|p| p.step_ms = 59_000), "step_duration");
        assert_eq!(field_of(|p| p.min_sessions = 0), "min_sessions");
        assert_eq!(field_of(|p| p.max_error_rate = 1.5), "max_error_rate");
        assert_eq!(
            field_of(|p| p.max_pass_rate_drop = -0.1),
            "max_pass_rate_drop"
        );
        assert_eq!(field_of(|p| p.max_error_rate = f64::NAN), "max_error_rate");
        assert_eq!(field_of(|p| p.incumbent = "alternative".into()), "from");
    }
}
