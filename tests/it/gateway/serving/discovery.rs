//! The gateway can be discovered with the tools callers already hold:
//! gRPC health answers for the server and each journey service, and
//! reflection lists and describes them.

use crate::support::gateway::*;

#[tokio::test]
async fn health_answers_serving_for_the_server_and_the_journey_service() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let gw = TestGateway::start().await;
    let channel = tonic::transport::Channel::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    for service in [
        "",
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
    ] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health check")
            .into_inner()
            .status();
        assert_eq!(status, ServingStatus::Serving, "{service:?}");
    }
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    gw.stop().await;
}

#[tokio::test]
async fn reflection_lists_and_describes_the_journey_services() {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let gw = TestGateway::start().await;
    let channel = tonic::transport::Channel::from_shared(gw.gateway.grpc_url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut client = ServerReflectionClient::new(channel);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol("idgate.v1.JourneyService".into()),
    ]
    .map(|m| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    });
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection stream")
        .into_inner();

    let first = responses.message().await.expect("answer").expect("one");
    let services: Vec<String> = match first.message_response {
        Some(MessageResponse::ListServicesResponse(l)) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("expected a service list, got {other:?}"),
    };
    for name in [
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
        "grpc.health.v1.Health",
    ] {
        assert!(services.iter().any(|s| s == name), "{name} in {services:?}");
    }

    let second = responses.message().await.expect("answer").expect("two");
    match second.message_response {
        Some(MessageResponse::FileDescriptorResponse(f)) => {
            assert!(!f.file_descriptor_proto.is_empty());
        }
        other => panic!("expected file descriptors, got {other:?}"),
    }
    gw.stop().await;
}
