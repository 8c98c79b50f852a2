//! Serving under pressure, over real sockets with small configured
//! limits: admission caps and bulkheads, connection caps and age, header,
//! body and idle timeouts, the drain, the statuses of caller faults, and what the
//! gateway refuses to start with, and its discovery (gRPC health and
//! reflection). Promptness is proven by ordering, never
//! by the clock: the admitted calls are held at a [`Gate`] on the upstream
//! path while the refused ones are answered. This file holds what the
//! modules share: the gated upstream, health checks, metric samples and
//! raw HTTP/2 calls.

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use idgate::{
    config::{Config, UpstreamConfig},
    sandbox::{ManualClock, SandboxConfig, SandboxHandle},
};
use tonic::{Code, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::support::{gateway::*, metrics, net::gated_proxy, sandbox, wait::Gate};

mod admission;
mod caller_faults;
mod connection_age;
mod connections;
mod discovery;
mod listeners;
mod shutdown;
mod startup;
mod upstream;

/// A gateway whose upstream (a sandbox of its own) sits behind a gated
/// proxy. The credential is exchanged with the gate open, then the gate is
/// closed: from then on each `CreateJourney` is one held `/appkey` request.
struct GatedUpstream {
    gw: TestGateway,
    gate: Gate,
    /// The journey created with the gate open.
    appkey: String,
    _sandbox: SandboxHandle,
}

impl GatedUpstream {
    async fn start(
        edit_upstream: impl FnOnce(&mut UpstreamConfig),
        edit: impl FnOnce(&mut Config),
    ) -> Self {
        let sandbox =
            sandbox::start_on(SandboxConfig::default(), Arc::new(ManualClock::new())).await;
        let gate = Gate::opened();
        let proxy = gated_proxy(&sandbox.base_url(), gate.clone()).await;
        let mut upstream = UpstreamConfig {
            base_url: proxy,
            result_base_url: sandbox.result_base_url(),
            // Held calls must not time out while the test looks at them.
            timeout_ms: 120_000,
            ..UpstreamConfig::default()
        };
        edit_upstream(&mut upstream);
        let gw = TestGateway::start_with(|c| {
            use_upstream(c, upstream);
            edit(c);
        })
        .await;
        let appkey = gw.create_journey().await;
        gate.close();
        GatedUpstream {
            gw,
            gate,
            appkey,
            _sandbox: sandbox,
        }
    }
}

/// A new connection to the public listener, for health checks.
async fn connect(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

/// The gRPC health status of `service` on `channel`.
async fn health(channel: &Channel, service: &str) -> ServingStatus {
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health check")
        .into_inner()
        .status()
}

/// The value of the sample `series` (name and labels, as exposed) in the
/// metrics `text`; 0 for a label set never counted, but a panic when the
/// metric itself is absent, so a renamed metric cannot pass `== 0`.
fn sample(text: &str, series: &str) -> u64 {
    metrics::counted(text, series) as u64
}

// Raw HTTP/2, for the request bodies a tonic client would never send.

use crate::support::raw_grpc::{connect as h2_connect, frame as grpc_frame, status as grpc_status};

/// Opens a unary gRPC request to `path`; the body is the caller's to send.
async fn h2_call(
    send: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    crate::support::raw_grpc::call(send, addr, path, None).await
}

/// Sends `message` (raw bytes) as a whole `CreateJourney` request.
async fn raw_create_journey(addr: SocketAddr, message: &[u8]) -> tonic::Status {
    let (send, _driver) = h2_connect(addr).await;
    let (response, mut body) = h2_call(send, addr, CREATE_JOURNEY).await;
    let len = u32::try_from(message.len()).expect("small");
    body.send_data(grpc_frame(len, message), true)
        .expect("send body");
    grpc_status(response).await
}

/// A health check sent on the raw connection `send` after whatever it
/// already carries: HTTP/2 frames are read in order, so once it is
/// answered, the gateway has read every request sent before it.
async fn h2_health_check(send: &h2::client::SendRequest<Bytes>, addr: SocketAddr) {
    let (response, mut body) = h2_call(send.clone(), addr, "/grpc.health.v1.Health/Check").await;
    body.send_data(grpc_frame(0, &[]), true).expect("send body");
    assert_eq!(grpc_status(response).await.code(), Code::Ok);
}

const CREATE_JOURNEY: &str = "/idgate.v1.JourneyService/CreateJourney";
