//! Server reflection, so that grpcurl and its kin need no proto files: the
//! public and the admin listeners each list their own services, in both
//! protocol versions (v1alpha, which most tools still speak, and v1), and
//! v1alpha serves the descriptors too. Each describes only what it serves:
//! the public listener answers `NOT_FOUND` for the admin symbols, and the
//! admin listener's reflection asks for the admin token, as its service
//! does.

use std::collections::BTreeSet;

use tonic::transport::Channel;
use tonic_reflection::pb::{v1 as r1, v1alpha as ralpha};

use crate::support::{
    gateway::{ADMIN_TOKEN, connect, start_gateway as start, test_config},
    telemetry::quiet_telemetry,
};

/// Adds `authorization: Bearer <token>` to every call when `token` is
/// given (the admin listener's reflection asks for it).
fn bearer(
    token: Option<&'static str>,
) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |mut request| {
        if let Some(token) = token {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("an ASCII header"),
            );
        }
        Ok(request)
    }
}

/// The services a v1alpha reflection client lists on `channel`.
async fn list_v1alpha(channel: Channel, token: Option<&'static str>) -> BTreeSet<String> {
    use ralpha::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::with_interceptor(channel, bearer(token))
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
async fn list_v1(channel: Channel, token: Option<&'static str>) -> BTreeSet<String> {
    use r1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::with_interceptor(channel, bearer(token))
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

/// The code for "no such symbol" (as a status or in an `ErrorResponse`).
const NOT_FOUND: i32 = tonic::Code::NotFound as i32;

/// A v1 client asks for the file that defines a symbol: the number of
/// files, or the error code answered.
async fn v1_file_of(
    channel: Channel,
    token: Option<&'static str>,
    symbol: &str,
) -> Result<usize, i32> {
    use r1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
    };
    // Refused before the stream (the admin token's check), or ended by
    // tonic-reflection with the status, or answered with an
    // `ErrorResponse` by other servers: each is the error code.
    let mut responses = match ServerReflectionClient::with_interceptor(channel, bearer(token))
        .server_reflection_info(tokio_stream::iter([request]))
        .await
    {
        Ok(responses) => responses.into_inner(),
        Err(status) => return Err(status.code() as i32),
    };
    let answer = match responses.message().await {
        Ok(answer) => answer,
        Err(status) => return Err(status.code() as i32),
    };
    match answer.and_then(|r| r.message_response) {
        Some(MessageResponse::FileDescriptorResponse(files)) => {
            Ok(files.file_descriptor_proto.len())
        }
        Some(MessageResponse::ErrorResponse(e)) => Err(e.error_code),
        other => panic!("unexpected reflection answer: {other:?}"),
    }
}

/// A v1alpha client asks for the file that defines a symbol.
async fn v1alpha_file_of(channel: Channel, token: Option<&'static str>, symbol: &str) -> usize {
    v1alpha_answer_of(channel, token, symbol)
        .await
        .unwrap_or_else(|code| panic!("reflection error {code} for {symbol}"))
}

/// A v1alpha client asks for the file that defines a symbol: the number
/// of files, or the error code answered.
async fn v1alpha_answer_of(
    channel: Channel,
    token: Option<&'static str>,
    symbol: &str,
) -> Result<usize, i32> {
    use ralpha::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
    };
    // Refused before the stream (the admin token's check), or ended by
    // tonic-reflection with the status, or answered with an
    // `ErrorResponse` by other servers: each is the error code.
    let mut responses = match ServerReflectionClient::with_interceptor(channel, bearer(token))
        .server_reflection_info(tokio_stream::iter([request]))
        .await
    {
        Ok(responses) => responses.into_inner(),
        Err(status) => return Err(status.code() as i32),
    };
    let answer = match responses.message().await {
        Ok(answer) => answer,
        Err(status) => return Err(status.code() as i32),
    };
    match answer.and_then(|r| r.message_response) {
        Some(MessageResponse::FileDescriptorResponse(files)) => {
            Ok(files.file_descriptor_proto.len())
        }
        Some(MessageResponse::ErrorResponse(e)) => Err(e.error_code),
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
    assert_eq!(list_v1alpha(channel.clone(), None).await, expected);
    assert_eq!(list_v1(channel.clone(), None).await, expected);
    assert!(
        v1alpha_file_of(channel, None, "idgate.v1.JourneyService").await >= 1,
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
    assert_eq!(
        list_v1alpha(channel.clone(), Some(ADMIN_TOKEN)).await,
        expected
    );
    assert_eq!(list_v1(channel, Some(ADMIN_TOKEN)).await, expected);
    gw.shutdown().await;
}

/// Symbols of `channel_admin.proto`: the service, a method's messages.
const ADMIN_SYMBOLS: [&str; 3] = [
    "idgate.v1.ChannelAdminService",
    "idgate.v1.SetRoutingModeRequest",
    "idgate.v1.ListChannelsResponse",
];

#[tokio::test]
async fn the_public_listener_cannot_describe_the_admin_service_and_the_admin_one_can() {
    let (_logs, _default) = quiet_telemetry();
    let gw = start(test_config()).await;
    let public = connect(gw.grpc_url()).await;
    for symbol in ADMIN_SYMBOLS {
        assert_eq!(
            v1alpha_answer_of(public.clone(), None, symbol).await,
            Err(NOT_FOUND),
            "v1alpha {symbol}"
        );
        assert_eq!(
            v1_file_of(public.clone(), None, symbol).await,
            Err(NOT_FOUND),
            "v1 {symbol}"
        );
    }
    // The public API still describes itself, with its imports.
    assert!(
        v1_file_of(public.clone(), None, "idgate.v1.DocumentService")
            .await
            .unwrap()
            >= 1
    );
    assert!(v1alpha_file_of(public, None, "idgate.v1.LivenessService").await >= 1);

    let admin = gw.admin_addr().expect("admin listener");
    let admin = connect(format!("http://{admin}")).await;
    for symbol in ADMIN_SYMBOLS {
        assert!(
            v1alpha_file_of(admin.clone(), Some(ADMIN_TOKEN), symbol).await >= 1,
            "{symbol}"
        );
        assert!(
            v1_file_of(admin.clone(), Some(ADMIN_TOKEN), symbol)
                .await
                .unwrap()
                >= 1,
            "{symbol}"
        );
    }
    // The admin listener does not describe the public API either.
    assert_eq!(
        v1_file_of(admin, Some(ADMIN_TOKEN), "idgate.v1.JourneyService").await,
        Err(NOT_FOUND)
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn the_admin_listener_describes_nothing_without_the_admin_token() {
    let (_logs, _default) = quiet_telemetry();
    let gw = start(test_config()).await;
    let admin = gw.admin_addr().expect("admin listener");
    let admin = connect(format!("http://{admin}")).await;
    let unauthenticated = tonic::Code::Unauthenticated as i32;
    for token in [None, Some("not-the-admin-token-0123456789abcdef")] {
        assert_eq!(
            v1_file_of(admin.clone(), token, "idgate.v1.ChannelAdminService").await,
            Err(unauthenticated),
            "v1 with {token:?}"
        );
        assert_eq!(
            v1alpha_answer_of(admin.clone(), token, "idgate.v1.ChannelAdminService").await,
            Err(unauthenticated),
            "v1alpha with {token:?}"
        );
    }
    // The public listener's reflection stays open: it describes only the
    // public API.
    let public = connect(gw.grpc_url()).await;
    assert!(
        v1_file_of(public, None, "idgate.v1.JourneyService")
            .await
            .unwrap()
            >= 1
    );
    gw.shutdown().await;
}
