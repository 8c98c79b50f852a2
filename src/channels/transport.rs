//! The seam between channel routing and the REST client.
//!
//! The router decides *which* channel a call goes to and *whether* it may be
//! retried elsewhere; the transport only performs one HTTP exchange on the
//! channel it is given. Keeping that split lets the routing, breaker and
//! binding logic be tested with an in-memory transport, and lets the REST
//! client own wire types, redaction and status mapping.

use crate::{
    context::CallContext,
    domain::{Appkey, SessionToken},
    proto::v1::LivenessVerdict,
    upstream::{ChannelEndpoint, UpstreamError},
};

pub use crate::domain::SessionGrant;

/// One HTTP exchange with a 3D channel.
///
/// Contract for implementors:
/// - Call the `channel` given (never a URL of your own): the channel may
///   change with every call and every reload. [`super::HttpTransport`]
///   hands it to the REST client, whose URLs it carries, parsed once.
/// - Honour the deadline of `ctx` (the router passes the earlier of the
///   caller's deadline and the channel's `timeout_ms`); report it as
///   [`UpstreamError::Timeout`]. The router also enforces it, as a backstop.
/// - Send `/3d/liveness` at most once: never retry it inside the transport.
///   `/3d/session-token` may be retried inside the transport only when the
///   request certainly was not sent (connect errors); failover between
///   channels is the router's job.
/// - Errors carry [`crate::domain::Operation::SessionToken3D`] or
///   [`crate::domain::Operation::Liveness3D`].
/// - Never log the appkey or the token.
#[tonic::async_trait]
pub trait Liveness3DTransport: Send + Sync + 'static {
    /// `POST {base_url}{session_token_path}` with JSON `{appkey, userAgent}`.
    async fn session_token(
        &self,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        user_agent: &str,
        ctx: &CallContext,
    ) -> Result<SessionGrant, UpstreamError>;

    /// `POST {base_url}{liveness_path}` with JSON `{appkey, sessionToken}`;
    /// sent at most once.
    async fn liveness(
        &self,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        token: &SessionToken,
        ctx: &CallContext,
    ) -> Result<LivenessVerdict, UpstreamError>;
}
