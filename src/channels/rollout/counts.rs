//! What a step is judged on: each replica counts the calls of the two
//! channels of the step under way ([`StepCounter`], fed by the router's
//! outcome recorder) and publishes its counts; the driver sums every
//! replica's ([`StepCounts::merge`]).
//!
//! Counts of calls sent only (as the vendor figures): a call this gateway
//! refused itself is not the vendor's doing. Channel names and numbers
//! only: nothing personal.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::{
    channels::{
        call_outcome::{CallOutcome, Ended, OutcomeSink, Verdict},
        figures::ChannelFigures,
    },
    domain::Operation,
    sync::lock,
};

/// One channel's calls over a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCounts {
    /// Sessions granted.
    pub sessions: u64,
    /// Session starts that failed (any error class).
    pub session_errors: u64,
    /// Verifications answered valid.
    pub valid: u64,
    /// Verifications answered invalid.
    pub invalid: u64,
    /// Verifications answered user blocked.
    pub blocked: u64,
    /// Verifications answered with another code.
    pub other: u64,
    /// Verifications that failed (any error class).
    pub verification_errors: u64,
}

impl StepCounts {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Self) {
        self.sessions = self.sessions.saturating_add(other.sessions);
        self.session_errors = self.session_errors.saturating_add(other.session_errors);
        self.valid = self.valid.saturating_add(other.valid);
        self.invalid = self.invalid.saturating_add(other.invalid);
        self.blocked = self.blocked.saturating_add(other.blocked);
        self.other = self.other.saturating_add(other.other);
        self.verification_errors = self
            .verification_errors
            .saturating_add(other.verification_errors);
    }

    /// Session starts sent: granted or failed. What `min_sessions` counts,
    /// so a channel that fails every start still gets judged.
    pub fn session_calls(&self) -> u64 {
        self.sessions.saturating_add(self.session_errors)
    }

    /// Answers with a verdict: the pass rate's denominator.
    pub fn verdicts(&self) -> u64 {
        self.as_figures().verdicts()
    }

    /// Failed calls over calls sent, both operations.
    pub fn error_rate(&self) -> Option<f64> {
        self.as_figures().error_rate()
    }

    /// The pass rate and its Wilson 95% interval `(rate, low, high)`, as
    /// `idgate channels compare` shows it; `None` without verdicts.
    pub fn pass_rate(&self) -> Option<(f64, f64, f64)> {
        self.as_figures().pass_rate()
    }

    fn as_figures(&self) -> ChannelFigures {
        let mut t = ChannelFigures {
            sessions_started: self.sessions,
            valid: self.valid,
            invalid: self.invalid,
            blocked: self.blocked,
            other: self.other,
            ..ChannelFigures::default()
        };
        t.session_errors.add("other", self.session_errors);
        t.verification_errors.add("other", self.verification_errors);
        t
    }

    fn count(&mut self, outcome: &CallOutcome<'_>) {
        let session = outcome.op == Operation::SessionToken3D;
        match outcome.ended {
            Ended::Granted { .. } => self.sessions += 1,
            Ended::Verdict(Verdict::Valid) => self.valid += 1,
            Ended::Verdict(Verdict::Invalid) => self.invalid += 1,
            Ended::Verdict(Verdict::Blocked) => self.blocked += 1,
            Ended::Verdict(Verdict::Other) => self.other += 1,
            Ended::Failed(_) if session => self.session_errors += 1,
            Ended::Failed(_) => self.verification_errors += 1,
            Ended::Refused | Ended::CircuitOpen => {}
        }
    }
}

/// A replica's counts of one step, as it publishes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaCounts {
    /// The candidate's calls.
    pub candidate: StepCounts,
    /// The incumbent's calls.
    pub incumbent: StepCounts,
}

impl ReplicaCounts {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Self) {
        self.candidate.merge(&other.candidate);
        self.incumbent.merge(&other.incumbent);
    }
}

/// The step being counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepKey {
    /// The rollout.
    pub id: String,
    /// Its step.
    pub step: u32,
    /// The incumbent channel.
    pub incumbent: String,
    /// The candidate channel.
    pub candidate: String,
}

/// This replica's counts of the step under way; counts nothing while no
/// rollout runs.
#[derive(Debug, Default)]
pub struct StepCounter {
    current: Mutex<Option<(StepKey, ReplicaCounts)>>,
}

impl OutcomeSink for StepCounter {
    fn record(&self, channel: &str, outcome: &CallOutcome<'_>) {
        StepCounter::record(self, channel, outcome);
    }
}

impl StepCounter {
    /// Counts for `key` from now on; the counts start afresh when the
    /// step changes. `None`: no rollout runs, nothing is counted.
    pub fn follow(&self, key: Option<StepKey>) {
        let mut current = lock(&self.current);
        match (key, current.as_ref()) {
            (Some(k), Some((held, _))) if *held == k => {}
            (Some(k), _) => *current = Some((k, ReplicaCounts::default())),
            (None, _) => *current = None,
        }
    }

    /// Counts one call on `channel` if it is a channel of the step.
    pub fn record(&self, channel: &str, outcome: &CallOutcome<'_>) {
        let mut current = lock(&self.current);
        let Some((key, counts)) = current.as_mut() else {
            return;
        };
        if channel == key.candidate {
            counts.candidate.count(outcome);
        } else if channel == key.incumbent {
            counts.incumbent.count(outcome);
        }
    }

    /// The step counted and its counts so far.
    pub fn snapshot(&self) -> Option<(StepKey, ReplicaCounts)> {
        lock(&self.current).clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::upstream::UpstreamError;

    fn key(step: u32) -> StepKey {
        StepKey {
            id: "r".into(),
            step,
            incumbent: "primary".into(),
            candidate: "alternative".into(),
        }
    }

    #[test]
    fn only_the_two_channels_of_the_step_under_way_are_counted() {
        let counter = StepCounter::default();
        let failed: Result<crate::channels::SessionGrant, UpstreamError> =
            Err(UpstreamError::Status {
                op: Operation::SessionToken3D,
                status: 503,
            });
        let outcome = CallOutcome::session(&failed, Duration::from_millis(3));
        counter.record("alternative", &outcome);
        assert_eq!(counter.snapshot(), None, "no rollout: nothing counted");
        counter.follow(Some(key(0)));
        counter.record("alternative", &outcome);
        counter.record("third", &outcome);
        let (_, counts) = counter.snapshot().expect("counting");
        assert_eq!(counts.candidate.session_errors, 1);
        assert_eq!(counts.incumbent, StepCounts::default());
        counter.follow(Some(key(0)));
        assert_eq!(
            counter
                .snapshot()
                .expect("same step")
                .1
                .candidate
                .session_calls(),
            1
        );
        counter.follow(Some(key(1)));
        assert_eq!(
            counter.snapshot().expect("next step").1,
            ReplicaCounts::default()
        );
    }
}
