//! What each listener offers: the HTTP/2 settings the gRPC listener
//! advertises, serving threads that poll only when configured to, and the
//! services reflection lists on each listener.

use std::net::SocketAddr;

use super::{connect, h2_connect, h2_health_check};
use crate::support::{
    gateway::*,
    metrics,
    wait::{EVENT_WAIT, eventually},
};

#[tokio::test]
async fn the_grpc_listener_advertises_its_max_concurrent_streams() {
    let gw = TestGateway::start_with(|c| c.serving.max_concurrent_streams = 7).await;
    let addr = gw.gateway.grpc_addr();
    let (send, _driver) = h2_connect(addr).await;
    // Answered, so the server's SETTINGS have been applied.
    h2_health_check(&send, addr).await;
    assert_eq!(send.current_max_send_streams(), 7);
    gw.stop().await;
}

/// Seconds the serving threads spent polling instead of sleeping, in the
/// metrics `text` (a panic if the series is not exposed).
fn idle_poll_seconds(text: &str) -> f64 {
    metrics::series(text, "idgate_serving_idle_poll_seconds_total")
}

#[tokio::test]
async fn a_serving_thread_polls_after_a_lone_call_and_never_with_a_zero_window() {
    // A window far longer than a sandbox call, so that the upstream's
    // answer always comes within it.
    let polling = TestGateway::start_with(|c| {
        c.serving.grpc_threads = 1;
        c.serving.idle_poll_us = 50_000;
    })
    .await;
    polling.create_journey().await;
    eventually(
        "the serving thread counts its polling",
        EVENT_WAIT,
        async || idle_poll_seconds(&polling.metrics_text().await) > 0.0,
    )
    .await;
    polling.stop().await;

    let sleeping = TestGateway::start_with(|c| {
        c.serving.grpc_threads = 1;
        c.serving.idle_poll_us = 0;
    })
    .await;
    sleeping.create_journey().await;
    let metrics = sleeping.metrics_text().await;
    assert_eq!(idle_poll_seconds(&metrics), 0.0, "{metrics}");
    sleeping.stop().await;
}

/// The services reflection lists on `addr`; with `bearer`, sent as the
/// admin token (the admin listener's reflection asks for it).
async fn reflected_services(addr: SocketAddr, bearer: Option<&'static str>) -> Vec<String> {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let mut client = ServerReflectionClient::with_interceptor(
        connect(addr).await,
        move |mut r: tonic::Request<()>| {
            if let Some(token) = bearer {
                r.metadata_mut()
                    .insert("authorization", format!("Bearer {token}").parse().unwrap());
            }
            Ok(r)
        },
    );
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection stream")
        .into_inner();
    match responses
        .message()
        .await
        .expect("answer")
        .expect("one")
        .message_response
    {
        Some(MessageResponse::ListServicesResponse(l)) => {
            let mut names: Vec<String> = l.service.into_iter().map(|s| s.name).collect();
            names.sort();
            names
        }
        other => panic!("expected a service list, got {other:?}"),
    }
}

#[tokio::test]
async fn reflection_lists_only_the_services_each_listener_serves() {
    let gw = TestGateway::start().await;
    assert_eq!(
        reflected_services(gw.gateway.grpc_addr(), None).await,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "idgate.v1.DocumentService",
            "idgate.v1.JourneyService",
            "idgate.v1.LivenessService",
        ]
    );
    let admin = gw.gateway.admin_addr().expect("admin listener");
    assert_eq!(
        reflected_services(admin, Some(ADMIN_TOKEN)).await,
        [
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "idgate.v1.ChannelAdminService",
        ]
    );
    gw.stop().await;
}
