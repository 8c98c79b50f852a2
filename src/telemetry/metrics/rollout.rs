//! The guarded rollout's series: the candidate's share, the state, and
//! the decisions of its steps. Labels from fixed sets only.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    pub(super) state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct VerdictLabels {
    pub(super) decision: &'static str,
    pub(super) breach: &'static str,
}

/// Rollout states, as the `state` label shows them.
pub(super) const ROLLOUT_STATES: [&str; 4] = ["running", "completed", "rolled_back", "aborted"];

/// Every `(decision, breach)` a verdict can carry.
const VERDICT_LABELS: [(&str, &str); 4] = [
    ("advance", "none"),
    ("roll_back", "error_rate"),
    ("roll_back", "pass_rate"),
    ("roll_back", "circuit_open"),
];

/// The series of the rollout (`StartRollout`).
pub(super) struct RolloutSeries {
    pub(super) step: Gauge,
    pub(super) state: Family<StateLabels, Gauge>,
    pub(super) verdicts: Family<VerdictLabels, Counter>,
}

impl RolloutSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            step: Gauge::default(),
            state: Family::default(),
            verdicts: Family::default(),
        };
        for state in ROLLOUT_STATES {
            series.state.get_or_create(&StateLabels { state }).set(0);
        }
        // Every decision at 0 from the start, so the first verdict shows
        // as an increase (a counter born at 1 does not).
        for (decision, breach) in VERDICT_LABELS {
            drop(
                series
                    .verdicts
                    .get_or_create(&VerdictLabels { decision, breach }),
            );
        }
        registry.register(
            "idgate_rollout_step",
            "The candidate channel's share of new sessions set by the rollout, percent (0 after a rollback or an abort, and without a rollout)",
            series.step.clone(),
        );
        registry.register(
            "idgate_rollout_state",
            "1 for the state of the fleet's last rollout (running, completed, rolled_back, aborted), 0 for the others",
            series.state.clone(),
        );
        registry.register(
            "idgate_rollout_verdicts",
            "Rollout steps judged by the driving replica, by decision (advance, roll_back) and breach (none, error_rate, pass_rate, circuit_open)",
            series.verdicts.clone(),
        );
        series
    }
}

impl Metrics {
    /// Sets the rollout gauges: `state` (a label of [`ROLLOUT_STATES`],
    /// empty without a rollout) and the candidate's `share`.
    pub fn set_rollout(&self, state: &str, share: u32) {
        let r = &self.inner.rollout;
        r.step.set(i64::from(share));
        for s in ROLLOUT_STATES {
            r.state
                .get_or_create(&StateLabels { state: s })
                .set(i64::from(s == state));
        }
    }

    /// Counts one judged step (`decision`, `breach`: fixed sets).
    pub fn record_rollout_verdict(&self, decision: &'static str, breach: &'static str) {
        self.inner
            .rollout
            .verdicts
            .get_or_create(&VerdictLabels { decision, breach })
            .inc();
    }
}
