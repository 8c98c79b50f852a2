//! Server reflection, so that grpcurl and its kin need no proto files: the
//! public and the admin listeners each list their own services, in both
//! protocol versions (v1alpha, which most tools still speak, and v1), and
//! v1alpha serves the descriptors too.

use std::collections::BTreeSet;

use tonic::transport::Channel;
use tonic_reflection::pb::{v1 as r1, v1alpha as ralpha};

use crate::support::{
    gateway::{connect, start_gateway as start, test_config},
    telemetry::quiet_telemetry,
};

/// The services a v1alpha reflection client lists on `channel`.
async fn list_v1alpha(channel: Channel) -> BTreeSet<String> {
    use ralpha::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1alpha reflection is served")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("a response")
        .expect("one message");
    match response.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection answer: {other:?}"),
    }
}

/// The services a v1 reflection client lists on `channel`.
async fn list_v1(channel: Channel) -> BTreeSet<String> {
    use r1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1 reflection is served")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("a response")
        .expect("one message");
    match response.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection answer: {other:?}"),
    }
}

/// A v1alpha client asks for the file that defines a symbol.
async fn v1alpha_file_of(channel: Channel, symbol: &str) -> usize {
    use ralpha::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1alpha reflection is served")
        .into_inner();
    match responses
        .message()
        .await
        .expect("a response")
        .and_then(|r| r.message_response)
    {
        Some(MessageResponse::FileDescriptorResponse(files)) => files.file_descriptor_proto.len(),
        other => panic!("unexpected reflection answer: {other:?}"),
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn public_listener_lists_its_services_over_v1alpha_and_v1_alike() {
    let (_logs, _default) = quiet_telemetry();
    let gw = start(test_config()).await;
    let channel = connect(gw.grpc_url()).await;
    let expected = names(&[
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ]);
    assert_eq!(list_v1alpha(channel.clone()).await, expected);
    assert_eq!(list_v1(channel.clone()).await, expected);
    assert!(
        v1alpha_file_of(channel, "idgate.v1.JourneyService").await >= 1,
        "v1alpha serves the descriptors, not only the names"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn admin_listener_lists_only_the_channel_admin_service() {
    let (_logs, _default) = quiet_telemetry();
    let gw = start(test_config()).await;
    let admin = gw.admin_addr().expect("admin listener");
    let channel = connect(format!("http://{admin}")).await;
    let expected = names(&[
        "idgate.v1.ChannelAdminService",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ]);
    assert_eq!(list_v1alpha(channel.clone()).await, expected);
    assert_eq!(list_v1(channel).await, expected);
    gw.shutdown().await;
}
