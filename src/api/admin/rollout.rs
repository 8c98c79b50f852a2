//! The rollout RPCs of `ChannelAdminService` (`StartRollout`,
//! `GetRollout`, `AbortRollout`): the plan from its proto form with its
//! defaults, and the record in its proto form.

use std::time::Duration;

use crate::{
    Error,
    channels::{
        ChannelRouter,
        rollout::{
            RolloutPlan, RolloutRecord, RolloutState,
            counts::StepCounts,
            plan::{
                DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_PASS_RATE_DROP, DEFAULT_MIN_SESSIONS,
                DEFAULT_STEP, DEFAULT_STEPS, MAX_STEP,
            },
        },
    },
    proto::v1 as pb,
};

/// The step's least time from its proto form; unset is the default.
fn step_duration(d: Option<&prost_types::Duration>) -> Result<Duration, Error> {
    let Some(d) = d else {
        return Ok(DEFAULT_STEP);
    };
    if d.seconds < 0 || d.nanos < 0 || d.seconds > i64::try_from(MAX_STEP.as_secs()).unwrap_or(0) {
        return Err(Error::invalid(
            "step_duration",
            format!("from 0 to {}s", MAX_STEP.as_secs()),
        ));
    }
    let secs = u64::try_from(d.seconds).unwrap_or(0);
    let nanos = u32::try_from(d.nanos).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

/// The plan of `req`, its unset fields at their defaults. `from` unset:
/// the first channel by priority other than `to`. Numbers are checked by
/// the rollout service.
pub(super) fn plan_from_proto(
    req: &pb::StartRolloutRequest,
    router: &ChannelRouter,
) -> Result<RolloutPlan, Error> {
    if req.to.is_empty() {
        return Err(Error::invalid("to", "required: the channel to roll out to"));
    }
    let incumbent = if req.from.is_empty() {
        router
            .snapshot()
            .channels
            .into_iter()
            .map(|c| c.name)
            .find(|n| *n != req.to)
            .ok_or_else(|| Error::invalid("from", "no other channel is configured"))?
    } else {
        req.from.clone()
    };
    Ok(RolloutPlan {
        incumbent,
        candidate: req.to.clone(),
        steps: if req.steps.is_empty() {
            DEFAULT_STEPS.to_vec()
        } else {
            req.steps.clone()
        },
        step_ms: u64::try_from(step_duration(req.step_duration.as_ref())?.as_millis())
            .unwrap_or(u64::MAX),
        min_sessions: req.min_sessions.unwrap_or(DEFAULT_MIN_SESSIONS),
        max_error_rate: req.max_error_rate.unwrap_or(DEFAULT_MAX_ERROR_RATE),
        max_pass_rate_drop: req.max_pass_rate_drop.unwrap_or(DEFAULT_MAX_PASS_RATE_DROP),
    })
}

fn figures(c: &StepCounts) -> pb::StepFigures {
    let (pass, low, high) = c.pass_rate().unwrap_or((0.0, 0.0, 0.0));
    pb::StepFigures {
        sessions: c.sessions,
        session_errors: c.session_errors,
        valid: c.valid,
        rejected: c.invalid.saturating_add(c.blocked),
        verification_errors: c.verification_errors,
        error_rate: c.error_rate().unwrap_or(0.0),
        pass_rate: pass,
        pass_rate_low: low,
        pass_rate_high: high,
    }
}

fn state(s: RolloutState) -> pb::RolloutState {
    match s {
        RolloutState::Running => pb::RolloutState::Running,
        RolloutState::Completed => pb::RolloutState::Completed,
        RolloutState::RolledBack => pb::RolloutState::RolledBack,
        RolloutState::Aborted => pb::RolloutState::Aborted,
    }
}

/// The proto form of a rollout.
pub fn rollout_to_proto(r: &RolloutRecord) -> pb::Rollout {
    let step = r.plan.step_duration();
    let weight = match r.state {
        RolloutState::Running | RolloutState::Completed => r.weight(),
        RolloutState::RolledBack | RolloutState::Aborted => 0,
    };
    pb::Rollout {
        id: r.id.clone(),
        state: state(r.state) as i32,
        from: r.plan.incumbent.clone(),
        to: r.plan.candidate.clone(),
        steps: r.plan.steps.clone(),
        step: r.step,
        weight,
        step_duration: Some(prost_types::Duration {
            seconds: i64::try_from(step.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(step.subsec_nanos()).unwrap_or(0),
        }),
        min_sessions: r.plan.min_sessions,
        max_error_rate: r.plan.max_error_rate,
        max_pass_rate_drop: r.plan.max_pass_rate_drop,
        verdicts: r
            .verdicts
            .iter()
            .map(|v| pb::StepVerdict {
                step: v.step,
                weight: v.weight,
                decision: v.decision.label().to_owned(),
                breach: v.breach.map(|b| b.label().to_owned()).unwrap_or_default(),
                detail: v.detail.clone(),
                candidate: Some(figures(&v.candidate)),
                incumbent: Some(figures(&v.incumbent)),
            })
            .collect(),
        breach: r
            .verdicts
            .last()
            .and_then(|v| v.breach)
            .filter(|_| r.state == RolloutState::RolledBack)
            .map(|b| b.label().to_owned())
            .unwrap_or_default(),
        driver: r.driver.clone(),
        step_started_unix_ms: i64::try_from(r.step_started_ms).unwrap_or(i64::MAX),
    }
}
