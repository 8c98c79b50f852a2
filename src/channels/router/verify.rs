//! The sticky verification: sent once, to the channel (generation) that
//! issued the session, never retried or failed over.

use tokio::time::Instant;

use super::{ChannelRouter, budget, health};
use crate::{
    Error,
    channels::call_outcome::CallOutcome,
    context::CallContext,
    domain::{Appkey, JourneyRef, Operation, SessionToken},
    proto::v1::LivenessVerdict,
    upstream::UpstreamError,
};

impl ChannelRouter {
    /// Verifies a 3D session on the channel that issued it.
    ///
    /// The channel comes from this gateway's binding of the appkey, else
    /// from the fleet's (`[cluster]`: the replica that started the session
    /// shared it), else from `channel` (as returned by `StartSession3D`, so
    /// that any gateway instance can route it). If both exist and disagree the call is
    /// refused before anything is sent ([`Error::ChannelMismatch`]): a
    /// verification on the wrong channel could finish the appkey for
    /// nothing, and only the caller knows which session it means. An empty
    /// name counts as absent.
    ///
    /// Sent once; never retried or failed over. The binding is dropped
    /// after a definite answer (a verdict or a 4xx) and kept after an
    /// ambiguous failure, so a caller's retry still reaches the same
    /// channel.
    pub async fn verify(
        &self,
        ctx: &CallContext,
        appkey: &Appkey,
        token: &SessionToken,
        channel: Option<&str>,
    ) -> Result<LivenessVerdict, Error> {
        let key = JourneyRef::from_appkey(appkey);
        let now = Instant::now();
        let requested = channel.filter(|n| !n.is_empty());
        let bound = self.bound_channel(&key).await;
        let target = match (bound, requested) {
            (Some(b), Some(name)) if b.name() != name => {
                return Err(Error::ChannelMismatch {
                    requested: name.to_owned(),
                    issuing: b.name().to_owned(),
                });
            }
            (Some(b), _) => b,
            (None, Some(name)) => self
                .current()
                .get(name)
                .cloned()
                .ok_or_else(|| Error::ChannelUnknown(name.to_owned()))?,
            (None, None) => return Err(Error::SessionUnknown),
        };
        if ctx.is_expired() {
            return Err(Error::DeadlineExceeded("3D liveness verification"));
        }

        let (until, caller_bound) = budget(&target, ctx, now);
        let attempt = CallContext::with_deadline(until);
        let call = self
            .transport
            .liveness(target.endpoint(), appkey, token, &attempt);
        let sent = Instant::now();
        let result =
            tokio::time::timeout_at(until, call)
                .await
                .unwrap_or(Err(UpstreamError::Timeout {
                    op: Operation::Liveness3D,
                }));
        let now = Instant::now();
        self.outcomes
            .record(&target, &CallOutcome::verification(&result, now - sent));
        target.breaker().record(health(&result, caller_bound), now);
        match &result {
            Err(e) => {
                tracing::warn!(
                    channel = target.name(),
                    journey = %key,
                    error_class = e.class(),
                    "3D verification failed; not retried"
                );
                if !e.is_upstream_fault() {
                    self.bindings.release_session(&key, &target);
                }
            }
            Ok(_) => self.bindings.release_session(&key, &target),
        }
        result.map_err(Error::Upstream)
    }
}
