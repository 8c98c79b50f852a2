//! The real [`Liveness3DTransport`]: the shared REST client, one attempt
//! per channel call (the router owns failover between channels).

use super::{Liveness3DTransport, SessionGrant};
use crate::{
    context::CallContext,
    domain::{Appkey, SessionToken},
    proto::v1::LivenessVerdict,
    upstream::{ChannelEndpoint, UpstreamClient, UpstreamError},
};

/// The REST client seen as a 3D transport.
pub struct HttpTransport {
    client: UpstreamClient,
}

impl HttpTransport {
    /// Uses `client`'s connection pool for every channel.
    pub fn new(client: UpstreamClient) -> Self {
        Self { client }
    }
}

#[tonic::async_trait]
impl Liveness3DTransport for HttpTransport {
    async fn session_token(
        &self,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        user_agent: &str,
        ctx: &CallContext,
    ) -> Result<SessionGrant, UpstreamError> {
        let ua = (!user_agent.is_empty()).then_some(user_agent);
        self.client.session_token_3d(ctx, channel, appkey, ua).await
    }

    async fn liveness(
        &self,
        channel: &ChannelEndpoint,
        appkey: &Appkey,
        token: &SessionToken,
        ctx: &CallContext,
    ) -> Result<LivenessVerdict, UpstreamError> {
        self.client.liveness_3d(ctx, channel, appkey, token).await
    }
}
