//! The real [`Liveness3DTransport`]: the shared REST client, one attempt
//! per channel call (the router owns failover between channels).

use std::time::Duration;

use tokio::time::Instant;

use super::{ChannelSpec, Liveness3DTransport, SessionGrant};
use crate::{
    domain::{Appkey, SessionToken},
    proto::v1::LivenessVerdict,
    upstream::{CallContext, ChannelEndpoint, UpstreamClient, UpstreamError},
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

fn endpoint(channel: &ChannelSpec) -> ChannelEndpoint {
    ChannelEndpoint::new(
        channel.base_url.clone(),
        channel.session_token_path.clone(),
        channel.liveness_path.clone(),
        Duration::from_millis(channel.timeout_ms),
    )
    .named(channel.name.clone())
}

#[tonic::async_trait]
impl Liveness3DTransport for HttpTransport {
    async fn session_token(
        &self,
        channel: &ChannelSpec,
        appkey: &Appkey,
        user_agent: &str,
        deadline: Option<Instant>,
    ) -> Result<SessionGrant, UpstreamError> {
        let ctx = CallContext::from_deadline(deadline.map(Instant::into_std));
        let ua = (!user_agent.is_empty()).then_some(user_agent);
        let s = self
            .client
            .session_token_3d(&ctx, &endpoint(channel), appkey, ua)
            .await?;
        Ok(SessionGrant {
            token: s.session_token,
            vendor: s.vendor,
            vendor_url: s.vendor_url,
            contingency: s.contingency,
        })
    }

    async fn liveness(
        &self,
        channel: &ChannelSpec,
        appkey: &Appkey,
        token: &SessionToken,
        deadline: Option<Instant>,
    ) -> Result<LivenessVerdict, UpstreamError> {
        let ctx = CallContext::from_deadline(deadline.map(Instant::into_std));
        self.client
            .liveness_3d(&ctx, &endpoint(channel), appkey, token)
            .await
    }
}
