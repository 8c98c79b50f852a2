//! The drain and shutdown: health reports `NOT_SERVING` at once while
//! calls are still served, a call in flight finishes, and a stalled upload
//! is closed when the grace runs out, in process and for `idgate serve` on
//! SIGTERM.

use std::net::SocketAddr;

use idgate::proto::v1;
use tokio::net::TcpStream;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use super::{
    CREATE_JOURNEY, GatedUpstream, connect, grpc_frame, h2_call, h2_connect, h2_health_check,
    health,
};
use crate::support::{
    gateway::*,
    metrics,
    net::http_client,
    process::{ServeProcess, quick_serve_config},
    wait::{EVENT_WAIT, eventually},
};

#[tokio::test]
async fn draining_reports_not_serving_at_once_while_calls_are_still_served() {
    let gw = TestGateway::start_with(|c| c.serving.drain_delay_secs = 1).await;
    let probe = connect(gw.gateway.grpc_addr()).await;
    assert_eq!(health(&probe, "").await, ServingStatus::Serving);

    gw.gateway.begin_drain().await;
    for service in [
        "",
        "idgate.v1.JourneyService",
        "idgate.v1.LivenessService",
        "idgate.v1.DocumentService",
    ] {
        assert_eq!(
            health(&probe, service).await,
            ServingStatus::NotServing,
            "{service:?}"
        );
    }
    let healthz = http_client()
        .get(format!("{}/healthz", gw.http_url()))
        .send()
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 503);
    // Still serving: on the open connection and on a new one.
    gw.create_journey().await;
    let mut fresh = v1::journey_service_client::JourneyServiceClient::new(
        connect(gw.gateway.grpc_addr()).await,
    );
    fresh
        .create_journey(happy_person())
        .await
        .expect("a call during the drain delay");
    assert_eq!(
        metrics::value(&gw.metrics_text().await, "idgate_draining", &[]),
        1.0
    );
    gw.stop().await;
}

#[tokio::test]
async fn shutdown_lets_a_call_in_flight_finish_and_closes_a_stalled_upload_after_the_grace() {
    let up = GatedUpstream::start(
        |_| {},
        |c| {
            c.serving.drain_delay_secs = 1;
            c.serving.shutdown_grace_secs = 2;
        },
    )
    .await;
    let GatedUpstream {
        gw,
        gate,
        appkey,
        _sandbox: _keep,
    } = up;
    let addr = gw.gateway.grpc_addr();
    let before = gate.arrived();
    let mut client = gw.journeys();
    let in_flight = tokio::spawn(async move { client.create_journey(happy_person()).await });
    gate.arrivals(before + 1).await;
    // A stalled upload (the body timeout is 30 s by default).
    let (send, driver) = h2_connect(addr).await;
    let (stalled, mut body) = h2_call(send.clone(), addr, CREATE_JOURNEY).await;
    body.send_data(grpc_frame(100, &[0x0A]), false)
        .expect("partial body");
    h2_health_check(&send, addr).await;
    // A watch stream: it ends when the listeners stop.
    let watch = gw.watch(by_appkey(&appkey)).await;
    let probe = connect(addr).await;

    let TestGateway { gateway, .. } = gw;
    let shutdown = tokio::spawn(gateway.shutdown());
    eventually("health says NOT_SERVING", EVENT_WAIT, async || {
        health(&probe, "").await == ServingStatus::NotServing
    })
    .await;
    // The listeners stop after the drain delay: the watch ends,
    let (_, end) = drain(watch).await;
    let end = end.expect("the watch ends with a status");
    assert_error(&end, Code::Unavailable, "SHUTTING_DOWN");
    // The listener no longer accepts...
    eventually(
        "the gRPC listener stops accepting",
        EVENT_WAIT,
        async || TcpStream::connect(addr).await.is_err(),
    )
    .await;
    // ...while the held call is still in flight; it finishes OK.
    assert!(!in_flight.is_finished());
    gate.open();
    in_flight
        .await
        .expect("task")
        .expect("the call in flight at shutdown succeeds");

    tokio::time::timeout(EVENT_WAIT, shutdown)
        .await
        .expect("shutdown returns despite the stalled upload")
        .expect("shutdown task");
    // The stalled upload's connection was closed.
    tokio::time::timeout(EVENT_WAIT, driver)
        .await
        .expect("the stalled connection is closed")
        .expect("driver task")
        .ok();
    let _ = tokio::time::timeout(EVENT_WAIT, stalled).await;
    drop(body);
}

#[tokio::test]
async fn idgate_serve_exits_on_sigterm_within_its_grace_with_a_stalled_upload_open() {
    let dir = crate::support::temp::dir("term");
    let config = quick_serve_config(dir.path(), "");
    let mut serve = ServeProcess::start(&config);
    let grpc: SocketAddr = serve
        .field("idgate listening", "grpc")
        .parse()
        .expect("grpc address");
    let (send, driver) = h2_connect(grpc).await;
    let (stalled, mut body) = h2_call(send.clone(), grpc, CREATE_JOURNEY).await;
    body.send_data(grpc_frame(100, &[0x0A]), false)
        .expect("partial body");
    // The upload has reached the gateway before the signal.
    h2_health_check(&send, grpc).await;

    serve.signal("TERM");
    // What ends it is the grace, not the stalled call: the gateway drains,
    // its 1 s grace runs out, and it closes the connection left open.
    assert_eq!(
        serve.field("draining: health reports NOT_SERVING", "drain_delay_secs"),
        "0"
    );
    assert_eq!(
        serve.field("shutdown grace over", "grace_secs"),
        "1",
        "the grace, as configured, ended the wait"
    );
    let status = serve
        .exit_within(EVENT_WAIT)
        .await
        .expect("idgate serve exits after SIGTERM");
    assert!(status.success(), "{status}");
    let cut = tokio::time::timeout(EVENT_WAIT, stalled)
        .await
        .expect("the stalled call ends with its connection");
    assert!(
        cut.is_err(),
        "the stalled call was cut, not answered: {cut:?}"
    );
    drop(body);
    drop(driver);
}
