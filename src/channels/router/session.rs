//! Starting a 3D session: the candidates in order, failing over to the
//! next on an upstream fault (`auto`, weighted), or trying a forced mode's
//! one channel again while the failure is transient.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{ChannelRouter, StartedSession, budget, health};
use crate::{
    Error,
    channels::{
        channel::{Channel, ChannelSet},
        outcome::CallOutcome,
        transport::SessionGrant,
    },
    context::CallContext,
    domain::{Appkey, JourneyRef, Operation},
    sync::lock,
    upstream::UpstreamError,
};

/// Pause before a forced mode tries its channel's session token again.
const FORCED_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How one channel's session start ended.
enum Attempt {
    Granted(StartedSession),
    /// Not tried: the circuit was open.
    Skipped(&'static str),
    Failed(UpstreamError),
}

impl ChannelRouter {
    /// Starts a 3D session on the best available channel and binds the
    /// appkey to it for the verification.
    pub async fn start_session(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        user_agent: &str,
    ) -> Result<StartedSession, Error> {
        let set = self.current();
        let mode = self.mode();
        let now = Instant::now();
        let (candidates, failover) = self.candidates(&set, &mode, appkey, now);
        if candidates.is_empty() {
            return Err(Error::NoChannelAvailable(format!(
                "mode {mode}: no such channel is configured"
            )));
        }

        let attempts = if failover {
            1
        } else {
            self.forced_session_attempts
        };
        let mut notes: Vec<String> = Vec::new();
        let mut failed_last: Option<Arc<Channel>> = None;
        let mut last_error: Option<UpstreamError> = None;
        let mut saturated = false;
        for channel in candidates {
            if channel.is_drained() {
                notes.push(format!("{}: drained", channel.name()));
                continue;
            }
            let outcome = self
                .start_on(ctx, &set, &channel, appkey, user_agent, attempts)
                .await;
            if !matches!(outcome, Attempt::Skipped(_)) {
                if let Some(previous) = failed_last.take() {
                    self.outcomes.failover(&previous);
                    tracing::warn!(
                        from = previous.name(),
                        to = channel.name(),
                        "3D session start failed over"
                    );
                }
            }
            let error = match outcome {
                Attempt::Granted(started) => return Ok(started),
                Attempt::Skipped(note) => {
                    notes.push(format!("{}: {note}", channel.name()));
                    continue;
                }
                Attempt::Failed(e) => e,
            };
            if let UpstreamError::Saturated { .. } = error {
                // This gateway's own bulkhead, not the vendor: no failover
                // count, no breaker verdict; the next channel may have room.
                notes.push(format!("{}: at capacity", channel.name()));
                saturated = true;
                if failover {
                    continue;
                }
                return Err(Error::Upstream(error));
            }
            if !failover || !error.is_upstream_fault() {
                return Err(Error::Upstream(error));
            }
            notes.push(format!("{}: {}", channel.name(), error.class()));
            failed_last = Some(channel);
            last_error = Some(error);
        }
        if last_error.is_some() && ctx.is_expired() {
            return Err(Error::DeadlineExceeded("3D session start"));
        }
        if saturated && last_error.is_none() {
            return Err(Error::Upstream(UpstreamError::Saturated {
                op: Operation::SessionToken3D,
            }));
        }
        Err(Error::NoChannelAvailable(notes.join(", ")))
    }

    /// Starts a session on `channel`, trying up to `attempts` times while
    /// the failure is transient (what the REST client itself retries:
    /// connect, timeout, 502-504), the circuit admits the call and the
    /// caller's deadline leaves room.
    async fn start_on(
        &self,
        ctx: &CallContext,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
        user_agent: &str,
        attempts: u32,
    ) -> Attempt {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Ok(permit) = channel.breaker().try_acquire(Instant::now()) else {
                self.outcomes.record(channel, &CallOutcome::circuit_open());
                return Attempt::Skipped("circuit open");
            };
            let now = Instant::now();
            if ctx.is_expired() {
                permit.neutral(now);
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
            match health(&result, caller_bound) {
                Some(true) => permit.failure(now),
                Some(false) => permit.success(now),
                None => permit.neutral(now),
            }
            let e = match result {
                Ok(grant) => {
                    let held = self.on_granted(set, channel, appkey, &grant, now);
                    self.share_grant(channel, appkey, held).await;
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

    /// Binds the appkey to `channel` and starts a contingency hold when
    /// the primary answered in contingency; true when a hold started.
    fn on_granted(
        &self,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
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
        lock(&self.bindings).insert(JourneyRef::from_appkey(appkey), Arc::clone(channel), now);
        hold
    }
}
