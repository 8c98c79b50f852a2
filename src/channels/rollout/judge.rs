//! The decision at the end of a step, from the counts of the fleet.
//!
//! A step is judged once it has lasted its least time **and** the
//! candidate has had `min_sessions` session starts (granted or failed)
//! and at least one verdict. Then, in this order:
//!
//! 1. **error rate**: the candidate's failed calls over calls sent (both
//!    operations, as the ERRORS column of `idgate channels compare`)
//!    above `max_error_rate` rolls back;
//! 2. **pass rate**: the candidate rolls back when even the top of its
//!    Wilson 95% interval lies more than `max_pass_rate_drop` below the
//!    incumbent's pass rate: a drop that chance alone would not explain.
//!    The incumbent's pass rate is over the same step when it had
//!    verdicts in it, else over the whole rollout so far (at 100% the
//!    incumbent takes no new session); without any, the pass rate is not
//!    compared;
//! 3. otherwise the step passes.
//!
//! Apart from that, a candidate whose circuit is open on the driving
//! replica rolls back at once: it takes no session, so its step would
//! never end.

use std::time::Duration;

use super::{
    counts::StepCounts,
    plan::RolloutPlan,
    record::{Breach, Decision},
};

/// What the judge says of the step under way.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// Not yet: the step lacks time, sessions or verdicts.
    Hold(&'static str),
    /// Decided.
    Decided {
        /// Advance or roll back.
        decision: Decision,
        /// The breach of a rollback.
        breach: Option<Breach>,
        /// The figures and thresholds behind it, in words.
        detail: String,
    },
}

fn percent(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

fn roll_back(breach: Breach, detail: String) -> Judgement {
    Judgement::Decided {
        decision: Decision::RollBack,
        breach: Some(breach),
        detail,
    }
}

/// Judges the step under way. `incumbent_step`: the incumbent over the
/// step; `incumbent_rollout`: over the whole rollout so far.
pub fn judge(
    plan: &RolloutPlan,
    candidate: &StepCounts,
    incumbent_step: &StepCounts,
    incumbent_rollout: &StepCounts,
    elapsed: Duration,
    candidate_circuit_open: bool,
) -> Judgement {
    if candidate_circuit_open {
        return roll_back(
            Breach::CircuitOpen,
            format!("the circuit of `{}` opened", plan.candidate),
        );
    }
    if elapsed < plan.step_duration() {
        return Judgement::Hold("waiting for the step's least time");
    }
    if candidate.session_calls() < plan.min_sessions {
        return Judgement::Hold("waiting for the step's least sessions");
    }
    let error_rate = candidate.error_rate().unwrap_or(0.0);
    if error_rate > plan.max_error_rate {
        return roll_back(
            Breach::ErrorRate,
            format!(
                "error rate {} of `{}` above max_error_rate {}",
                percent(error_rate),
                plan.candidate,
                percent(plan.max_error_rate)
            ),
        );
    }
    let Some((rate, _, high)) = candidate.pass_rate() else {
        return Judgement::Hold("waiting for the candidate's first verdict");
    };
    let reference = if incumbent_step.verdicts() > 0 {
        incumbent_step.pass_rate()
    } else {
        incumbent_rollout.pass_rate()
    };
    let mut detail = format!(
        "error rate {} (max {}), pass rate {} (95% CI up to {})",
        percent(error_rate),
        percent(plan.max_error_rate),
        percent(rate),
        percent(high)
    );
    match reference {
        Some((incumbent, _, _)) => {
            let drop = incumbent - high;
            if drop > plan.max_pass_rate_drop {
                return roll_back(
                    Breach::PassRate,
                    format!(
                        "pass rate of `{}` {} (95% CI up to {}) more than max_pass_rate_drop {} below `{}`'s {}",
                        plan.candidate,
                        percent(rate),
                        percent(high),
                        percent(plan.max_pass_rate_drop),
                        plan.incumbent,
                        percent(incumbent)
                    ),
                );
            }
            detail.push_str(&format!(
                " against {} of `{}`",
                percent(incumbent),
                plan.incumbent
            ));
        }
        None => detail.push_str("; no verdict of the incumbent to compare with"),
    }
    Judgement::Decided {
        decision: Decision::Advance,
        breach: None,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::rollout::plan::*;

    fn plan() -> RolloutPlan {
        RolloutPlan {
            incumbent: "primary".into(),
            candidate: "alternative".into(),
            steps: vec![50, 100],
            step_ms: 1_000,
            min_sessions: 40,
            max_error_rate: DEFAULT_MAX_ERROR_RATE,
            max_pass_rate_drop: DEFAULT_MAX_PASS_RATE_DROP,
        }
    }

    fn counts(sessions: u64, session_errors: u64, valid: u64, invalid: u64) -> StepCounts {
        StepCounts {
            sessions,
            session_errors,
            valid,
            invalid,
            ..StepCounts::default()
        }
    }

    fn breach(j: Judgement) -> Option<Breach> {
        match j {
            Judgement::Decided { breach, .. } => breach,
            Judgement::Hold(why) => panic!("held: {why}"),
        }
    }

    const LONG: Duration = Duration::from_secs(2);

    #[test]
    fn a_step_is_held_until_it_has_its_time_sessions_and_a_verdict() {
        let healthy = counts(40, 0, 40, 0);
        let none = StepCounts::default();
        assert!(matches!(
            judge(&plan(), &healthy, &healthy, &none, Duration::ZERO, false),
            Judgement::Hold(_)
        ));
        assert!(matches!(
            judge(&plan(), &counts(39, 0, 39, 0), &healthy, &none, LONG, false),
            Judgement::Hold(_)
        ));
        assert!(matches!(
            judge(&plan(), &counts(40, 0, 0, 0), &healthy, &none, LONG, false),
            Judgement::Hold(_)
        ));
    }

    #[test]
    fn thirty_percent_invalid_breaches_the_pass_rate_and_a_healthy_candidate_advances() {
        let incumbent = counts(40, 0, 40, 0);
        let none = StepCounts::default();
        let worse = counts(40, 0, 28, 12);
        assert_eq!(
            breach(judge(&plan(), &worse, &incumbent, &none, LONG, false)),
            Some(Breach::PassRate)
        );
        let healthy = counts(40, 0, 39, 1);
        assert_eq!(
            breach(judge(&plan(), &healthy, &incumbent, &none, LONG, false)),
            None
        );
        // At 100% the incumbent has no verdict in the step: the rollout's.
        assert_eq!(
            breach(judge(&plan(), &worse, &none, &incumbent, LONG, false)),
            Some(Breach::PassRate)
        );
    }

    #[test]
    fn errors_above_the_threshold_and_an_open_circuit_roll_back() {
        let incumbent = counts(40, 0, 40, 0);
        let none = StepCounts::default();
        let failing = counts(36, 4, 36, 0);
        assert_eq!(
            breach(judge(&plan(), &failing, &incumbent, &none, LONG, false)),
            Some(Breach::ErrorRate)
        );
        assert_eq!(
            breach(judge(
                &plan(),
                &none,
                &incumbent,
                &none,
                Duration::ZERO,
                true
            )),
            Some(Breach::CircuitOpen)
        );
    }
}
