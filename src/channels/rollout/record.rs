//! The rollout as the fleet stores it: the plan, where it stands, and
//! every step's verdict. One JSON document (`cluster::RolloutStore`),
//! replaced whole by compare and set.

use serde::{Deserialize, Serialize};

use super::{counts::StepCounts, plan::RolloutPlan};

/// Where a rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutState {
    /// A step is under way.
    Running,
    /// Every step passed: the candidate has 100%.
    Completed,
    /// A step breached a threshold: the incumbent is back at 100%.
    RolledBack,
    /// An operator aborted it: the incumbent is back at 100%.
    Aborted,
}

impl RolloutState {
    /// Every state, for the one-hot gauge.
    pub const ALL: [RolloutState; 4] = [
        RolloutState::Running,
        RolloutState::Completed,
        RolloutState::RolledBack,
        RolloutState::Aborted,
    ];

    /// The label and log form: `running`, `completed`, `rolled_back`,
    /// `aborted`.
    pub fn label(self) -> &'static str {
        match self {
            RolloutState::Running => "running",
            RolloutState::Completed => "completed",
            RolloutState::RolledBack => "rolled_back",
            RolloutState::Aborted => "aborted",
        }
    }
}

/// What a judged step decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The step passed: on to the next (or completed after the last).
    Advance,
    /// A threshold was breached: back to the incumbent.
    RollBack,
}

impl Decision {
    /// The metric label: `advance` or `roll_back`.
    pub fn label(self) -> &'static str {
        match self {
            Decision::Advance => "advance",
            Decision::RollBack => "roll_back",
        }
    }
}

/// The threshold a rolled-back step breached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Breach {
    /// The candidate's error rate was above `max_error_rate`.
    ErrorRate,
    /// The candidate's pass rate dropped more than `max_pass_rate_drop`
    /// below the incumbent's.
    PassRate,
    /// The candidate's circuit opened on the driving replica.
    CircuitOpen,
}

impl Breach {
    /// The label and wire form: `error_rate`, `pass_rate`, `circuit_open`.
    pub fn label(self) -> &'static str {
        match self {
            Breach::ErrorRate => "error_rate",
            Breach::PassRate => "pass_rate",
            Breach::CircuitOpen => "circuit_open",
        }
    }
}

/// One judged step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepVerdict {
    /// Index of the step in the plan.
    pub step: u32,
    /// The candidate's weight during the step.
    pub weight: u32,
    /// What was decided.
    pub decision: Decision,
    /// The breach, for a rollback.
    pub breach: Option<Breach>,
    /// The figures and thresholds behind the decision, in words.
    pub detail: String,
    /// The candidate's counts over the step, summed over the fleet.
    pub candidate: StepCounts,
    /// The incumbent's counts the candidate was compared with.
    pub incumbent: StepCounts,
    /// Unix milliseconds of the decision.
    pub at_ms: u64,
}

/// The fleet's rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutRecord {
    /// Unique per rollout: step counts are kept under it.
    pub id: String,
    /// What was asked.
    pub plan: RolloutPlan,
    /// Where it stands.
    pub state: RolloutState,
    /// The step under way (or the last one, once ended).
    pub step: u32,
    /// Unix milliseconds when the step under way began.
    pub step_started_ms: u64,
    /// Every judged step, in order.
    pub verdicts: Vec<StepVerdict>,
    /// The replica that last drove a step.
    pub driver: String,
    /// Unix milliseconds of the start.
    pub started_ms: u64,
}

impl RolloutRecord {
    /// The candidate's weight at the step under way.
    pub fn weight(&self) -> u32 {
        let at = usize::try_from(self.step).unwrap_or(usize::MAX);
        self.plan.steps.get(at).copied().unwrap_or(0)
    }

    /// The JSON form stored in the fleet.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The record from its stored form; `None` when unreadable (a newer
    /// replica's form, say).
    pub fn from_text(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}
