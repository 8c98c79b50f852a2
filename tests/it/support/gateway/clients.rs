//! How tests reach a running gateway: its embedded sandbox, typed gRPC
//! clients (through tonic's `Channel`, or through idgate's
//! [`ResendingChannel`] for a gateway whose connections age), the
//! addresses of its HTTP listener, and a channel to any URL.

use idgate::{
    client::ResendingChannel,
    proto::v1::{
        document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::SandboxHandle,
};
use tonic::{Status, body::Body, transport::Channel};
use tower::{ServiceExt, util::BoxCloneSyncService};

use super::TestGateway;

/// What a [`TestGateway`]'s typed clients call through. Its errors are
/// already the statuses the typed clients would make of them (a boxed
/// error would not do: spawned calls could not prove it `'static`).
pub type GatewayChannel = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Status>;

/// tonic's `channel`, as a [`GatewayChannel`].
pub fn through_tonic(channel: Channel) -> GatewayChannel {
    BoxCloneSyncService::new(channel.map_err(|e| Status::from_error(Box::new(e))))
}

/// A [`ResendingChannel`] to `url` (`http://host:port`).
pub fn resending(url: &str) -> ResendingChannel {
    ResendingChannel::plaintext(url.parse().expect("url")).expect("an origin")
}

/// A channel connected to `url`.
pub async fn connect(url: String) -> Channel {
    Channel::from_shared(url)
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

impl TestGateway {
    /// The embedded sandbox.
    pub fn sandbox(&self) -> &SandboxHandle {
        self.gateway.sandbox().expect("embedded sandbox")
    }

    /// From now on, this gateway's typed clients call through a
    /// [`ResendingChannel`] of their own: no call is lost when the
    /// gateway ages a connection (tonic's `Channel` loses the one it
    /// queues as the GOAWAY arrives; `idgate::client` says why).
    pub fn resend_unsent_calls(&mut self) {
        let channel = resending(&self.gateway.grpc_url());
        self.channel =
            BoxCloneSyncService::new(channel.map_response(|response| response.map(Body::new)));
    }

    /// A `JourneyService` client.
    pub fn journeys(&self) -> JourneyServiceClient<GatewayChannel> {
        JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }

    /// A `LivenessService` client.
    pub fn liveness(&self) -> LivenessServiceClient<GatewayChannel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    /// A `DocumentService` client.
    pub fn documents(&self) -> DocumentServiceClient<GatewayChannel> {
        DocumentServiceClient::new(self.channel.clone()).max_encoding_message_size(64 << 20)
    }

    /// Base URL of the gateway's HTTP listener.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.gateway.http_addr())
    }

    /// The webhook URL of the gateway.
    pub fn webhook_url(&self) -> String {
        format!("{}{WEBHOOK_PATH}", self.http_url())
    }
}

/// The path of the gateway's webhook receiver in test gateways.
pub const WEBHOOK_PATH: &str = "/webhooks/journey";
