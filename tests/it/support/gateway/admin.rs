//! The admin listener: its bearer token, a client sending it, and the
//! channel RPCs tests drive (listing channels, setting the routing mode).

use idgate::{
    cli::channels::AdminClient,
    domain::AdminToken,
    proto::v1::{self, ChannelStatus, ListChannelsResponse, RoutingMode, SetRoutingModeRequest},
};

use super::{ADMIN_TOKEN, TestGateway, weights};

/// The admin token of test gateways, typed.
pub fn admin_token() -> AdminToken {
    AdminToken::new(ADMIN_TOKEN).expect("non-empty token")
}

impl TestGateway {
    /// The admin listener's `host:port`.
    pub fn admin_addr(&self) -> String {
        self.gateway
            .admin_addr()
            .expect("admin listener (token configured)")
            .to_string()
    }

    /// A `ChannelAdminService` client sending the right bearer token.
    pub async fn admin(&self) -> AdminClient {
        idgate::cli::channels::connect(&self.admin_addr(), &admin_token())
            .await
            .expect("connect to the admin listener")
    }

    /// `ListChannels` over the admin listener.
    pub async fn list_channels(&self) -> ListChannelsResponse {
        self.admin()
            .await
            .list_channels(v1::ListChannelsRequest {})
            .await
            .expect("list channels")
            .into_inner()
    }

    /// One channel of `ListChannels`.
    pub async fn channel_status(&self, name: &str) -> ChannelStatus {
        self.list_channels()
            .await
            .channels
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("channel {name} listed"))
    }

    /// `SetRoutingMode` over the admin listener.
    pub async fn set_mode(&self, mode: RoutingMode) {
        self.admin()
            .await
            .set_routing_mode(SetRoutingModeRequest {
                mode: mode as i32,
                channel: String::new(),
                weights: Vec::new(),
                force: false,
            })
            .await
            .expect("set routing mode");
    }

    /// `SetRoutingMode` to a weighted split, refused or not.
    pub async fn set_weighted(
        &self,
        split: &[(&str, u32)],
    ) -> Result<v1::SetRoutingModeResponse, tonic::Status> {
        self.admin()
            .await
            .set_routing_mode(SetRoutingModeRequest {
                mode: RoutingMode::Weighted as i32,
                channel: String::new(),
                weights: weights(split),
                force: false,
            })
            .await
            .map(tonic::Response::into_inner)
    }
}
