//! How tests reach a running gateway: its embedded sandbox, typed gRPC
//! clients, the addresses of its HTTP listener, and a channel to any URL.

use idgate::{
    proto::v1::{
        document_service_client::DocumentServiceClient,
        journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::SandboxHandle,
};
use tonic::transport::Channel;

use super::TestGateway;

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

    /// A `JourneyService` client.
    pub fn journeys(&self) -> JourneyServiceClient<Channel> {
        JourneyServiceClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }

    /// A `LivenessService` client.
    pub fn liveness(&self) -> LivenessServiceClient<Channel> {
        LivenessServiceClient::new(self.channel.clone())
    }

    /// A `DocumentService` client.
    pub fn documents(&self) -> DocumentServiceClient<Channel> {
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
