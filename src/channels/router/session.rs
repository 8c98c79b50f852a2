//! Starting a 3D session across channels: the candidates in order,
//! failing over to the next on an upstream fault (`auto`, weighted); a
//! forced mode's one channel is tried alone (see `attempt`).
//!
//! Panic routing: when every candidate that is not drained refuses the
//! call because its circuit is open, the call goes to the one whose
//! circuit has been open longest, as Envoy routes to every host below its
//! panic threshold. For a liveness vendor a refused call and a failed call
//! cost the end user the same, but only the tried call notices that the
//! vendor is back (and its success closes the circuit). Counted
//! (`idgate_channel_panic_total`) and logged once per episode.
//! `NO_CHANNEL_AVAILABLE` is left for drained or unconfigured channels.

use std::sync::{Arc, atomic::Ordering};

use tokio::time::Instant;

use super::{
    ChannelRouter, StartedSession,
    attempt::{Attempt, Tries},
};
use crate::{
    Error,
    channels::channel::{Channel, ChannelSet},
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
        let mut refused: Vec<Arc<Channel>> = Vec::new();
        for channel in candidates {
            if channel.is_drained() {
                notes.push(format!("{}: drained", channel.name()));
                continue;
            }
            let outcome = self
                .start_on(
                    ctx,
                    &set,
                    &channel,
                    appkey,
                    user_agent,
                    Tries {
                        attempts,
                        panic: false,
                    },
                )
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
                Attempt::Granted(started) => {
                    self.end_panic();
                    return Ok(started);
                }
                Attempt::Skipped(note) => {
                    notes.push(format!("{}: {note}", channel.name()));
                    refused.push(channel);
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
        // No channel was tried (a fault or a full bulkhead would say so):
        // every one that is not drained refused.
        let untried = last_error.is_none() && !saturated;
        if let Some(channel) = longest_open(&refused).filter(|_| untried) {
            // As when every channel was tried: a fault is the channels'
            // unavailability, anything else the channel's answer.
            match self
                .panic_route(ctx, &set, channel, appkey, user_agent)
                .await
            {
                Attempt::Granted(started) => return Ok(started),
                Attempt::Failed(e) if e.is_upstream_fault() => {
                    notes.push(format!("{} (panic-routed): {}", channel.name(), e.class()));
                    last_error = Some(e);
                }
                Attempt::Failed(e) => return Err(Error::Upstream(e)),
                Attempt::Skipped(note) => notes.push(format!("{}: {note}", channel.name())),
            }
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

    /// Sends the session start to `channel` past its open circuit, because
    /// every candidate refused (see the module's doc). Tried once, whatever
    /// the mode: a forced mode's retries would only add load to a vendor
    /// its circuit already found sick.
    async fn panic_route(
        &self,
        ctx: &CallContext,
        set: &ChannelSet,
        channel: &Arc<Channel>,
        appkey: &Appkey,
        user_agent: &str,
    ) -> Attempt {
        self.outcomes.panic(channel);
        if !self.panicking.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                channel = channel.name(),
                "every 3D channel's circuit is open: routing to the one open longest"
            );
        }
        self.start_on(
            ctx,
            set,
            channel,
            appkey,
            user_agent,
            Tries {
                attempts: 1,
                panic: true,
            },
        )
        .await
    }

    /// A session start went through a circuit that admitted it: a panic
    /// episode, if any, is over.
    fn end_panic(&self) {
        if self.panicking.swap(false, Ordering::Relaxed) {
            tracing::info!("a 3D channel's circuit admits calls again: panic routing ended");
        }
    }
}

/// The channel whose circuit has been open longest.
fn longest_open(refused: &[Arc<Channel>]) -> Option<&Arc<Channel>> {
    refused
        .iter()
        .min_by_key(|c| c.breaker().open_since().unwrap_or_else(Instant::now))
}
