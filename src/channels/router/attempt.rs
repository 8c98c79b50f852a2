//! One channel's session start: the breaker's permit, the call within
//! the earlier of the caller's deadline and the channel's timeout, its
//! outcome recorded, and on a forced mode a retry while the failure is
//! transient. A grant binds the appkey to the channel.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{ChannelRouter, Health, StartedSession, budget, health};
use crate::{
    channels::{
        call_outcome::CallOutcome,
        channel::{Channel, ChannelSet},
        transport::SessionGrant,
    },
    context::CallContext,
    domain::{Appkey, Operation},
    sync::lock,
    upstream::UpstreamError,
};

/// Pause before a forced mode tries its channel's session token again.
const FORCED_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How a channel's session start may be tried.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tries {
    /// Attempts while the failure is transient (a forced mode's retries).
    pub(super) attempts: u32,
    /// Past the channel's open circuit: every channel refused (panic
    /// routing).
    pub(super) panic: bool,
}

/// How one channel's session start ended.
pub(super) enum Attempt {
    Granted(StartedSession),
    /// Not tried: the circuit was open.
    Skipped(&'static str),
    Failed(UpstreamError),
}

impl ChannelRouter {
    /// Starts a session on `channel`, trying up to `attempts` times while
    /// the failure is transient (what the REST client itself retries:
    /// connect, timeout, 502-504), the circuit admits the call (or, when
    /// `panic`, past the circuit: every channel refused) and the caller's
    /// deadline leaves room.
    pub(super) async fn start_on(
        &self,
        ctx: &CallContext,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
        user_agent: &str,
        tries: Tries,
    ) -> Attempt {
        let Tries { attempts, panic } = tries;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let breaker = channel.breaker();
            let permit = if panic {
                breaker.panic_acquire()
            } else if let Ok(permit) = breaker.try_acquire(Instant::now()) {
                permit
            } else {
                self.outcomes.record(channel, &CallOutcome::circuit_open());
                return Attempt::Skipped("circuit open");
            };
            let now = Instant::now();
            if ctx.is_expired() {
                permit.report(Health::Unknown, now);
                return Attempt::Failed(UpstreamError::DeadlineExceeded {
                    op: Operation::SessionToken3D,
                });
            }
            let (until, caller_bound) = budget(channel, ctx, now);
            let bounded = CallContext::with_deadline(until);
            let call =
                self.transport
                    .session_token(channel.endpoint(), appkey, user_agent, &bounded);
            let result =
                tokio::time::timeout_at(until, call)
                    .await
                    .unwrap_or(Err(UpstreamError::Timeout {
                        op: Operation::SessionToken3D,
                    }));
            let sent = now;
            let now = Instant::now();
            self.outcomes
                .record(channel, &CallOutcome::session(&result, now - sent));
            permit.report(health(&result, caller_bound), now);
            let e = match result {
                Ok(grant) => {
                    let held = self.hold_on_contingency(set, channel, &grant, now);
                    self.record_grant(channel, appkey, held).await;
                    return Attempt::Granted(StartedSession {
                        grant,
                        channel: channel.name().to_owned(),
                    });
                }
                Err(e) => e,
            };
            if !matches!(e, UpstreamError::Saturated { .. }) {
                tracing::warn!(
                    channel = channel.name(),
                    error_class = e.class(),
                    attempt,
                    "3D session start failed"
                );
            }
            let pause = FORCED_RETRY_PAUSE;
            let room = ctx
                .remaining()
                .is_none_or(|left| left > pause + FORCED_RETRY_PAUSE);
            if attempt >= attempts || !e.is_transient() || !room {
                return Attempt::Failed(e);
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Starts a contingency hold when the primary answered in
    /// contingency; true when a hold started.
    fn hold_on_contingency(
        &self,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        grant: &SessionGrant,
        now: Instant,
    ) -> bool {
        let is_primary = set.primary().is_some_and(|p| Arc::ptr_eq(p, channel));
        let hold = grant.contingency && is_primary && !self.contingency_hold.is_zero();
        if hold {
            *lock(&self.hold_until) = Some(now + self.contingency_hold);
            tracing::info!(
                channel = channel.name(),
                hold_secs = self.contingency_hold.as_secs(),
                "primary answered in contingency; preferring the alternative"
            );
        }
        hold
    }
}
