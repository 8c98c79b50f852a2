//! Starting a 3D session across channels: the candidates in order,
//! failing over to the next on an upstream fault (`auto`, weighted); a
//! forced mode's one channel is tried alone (see `attempt`).

use std::sync::Arc;

use tokio::time::Instant;

use super::{ChannelRouter, StartedSession, attempt::Attempt};
use crate::{
    Error,
    channels::channel::Channel,
    context::CallContext,
    domain::{Appkey, Operation},
    upstream::UpstreamError,
};

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
}
