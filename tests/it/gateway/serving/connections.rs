//! Connections a caller holds open: past the connection cap a new one is
//! closed at once, a stalled request head or body is cut after its
//! timeout (or the caller's sooner deadline), and an idle connection is
//! closed unless it carries a watch stream.

use idgate::proto::v1;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use super::{
    CREATE_JOURNEY, connect, grpc_frame, grpc_status, h2_call, h2_connect, health, sample,
};
use crate::support::{
    gateway::*,
    net::http_client,
    wait::{EVENT_WAIT, eventually},
};

/// Reads `stream` until the peer closes it (end of stream or reset),
/// whatever it sends first; panics if it stays open for [`EVENT_WAIT`].
async fn assert_closed_by_peer(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(EVENT_WAIT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: the connection is still open after {EVENT_WAIT:?}"));
}

#[tokio::test]
async fn past_max_connections_a_new_connection_is_closed_at_once_and_health_keeps_answering() {
    let gw = TestGateway::start_with(|c| c.serving.max_connections = 2).await;
    // The test gateway's own client holds one connection; this is the
    // second, admitted (it answers).
    let admitted = connect(gw.gateway.grpc_addr()).await;
    assert_eq!(health(&admitted, "").await, ServingStatus::Serving);

    let mut third = TcpStream::connect(gw.gateway.grpc_addr())
        .await
        .expect("the kernel accepts the TCP handshake");
    assert_closed_by_peer(&mut third, "a connection past the cap").await;

    assert_eq!(health(&admitted, "").await, ServingStatus::Serving);
    gw.create_journey().await;
    // One HTTP client, one connection on the HTTP listener.
    let http = http_client();
    let healthz = http
        .get(format!("{}/healthz", gw.http_url()))
        .send()
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    let metrics = http
        .get(format!("{}/metrics", gw.http_url()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert_eq!(
        sample(
            &metrics,
            r#"idgate_connections_rejected_total{listener="grpc"}"#
        ),
        1,
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_stalled_http1_request_head_is_closed_after_the_header_read_timeout() {
    let gw = TestGateway::start_with(|c| c.serving.header_read_timeout_ms = 200).await;
    let mut slow = TcpStream::connect(gw.gateway.http_addr())
        .await
        .expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("partial head");
    assert_closed_by_peer(&mut slow, "a stalled request head").await;
    let healthz = http_client()
        .get(format!("{}/healthz", gw.http_url()))
        .send()
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn a_stalled_grpc_request_body_is_answered_request_body_timeout_and_frees_its_slot() {
    let gw = TestGateway::start_with(|c| {
        c.serving.request_body_timeout_ms = 200;
        c.serving.max_in_flight = 1;
    })
    .await;
    let addr = gw.gateway.grpc_addr();
    let (send, _driver) = h2_connect(addr).await;
    let (response, mut body) = h2_call(send, addr, CREATE_JOURNEY).await;
    // The frame promises 100 bytes; 3 arrive, then nothing.
    body.send_data(grpc_frame(100, &[0x0A, 0x0B, b'1']), false)
        .expect("partial body");
    let status = grpc_status(response).await;
    assert_error(&status, Code::DeadlineExceeded, "REQUEST_BODY_TIMEOUT");
    // The one unary slot is free again.
    eventually(
        "the stalled call's slot is released",
        EVENT_WAIT,
        async || gw.journeys().create_journey(happy_person()).await.is_ok(),
    )
    .await;
    drop(body);
    gw.stop().await;
}

#[tokio::test]
async fn a_stalled_grpc_body_is_cut_at_the_callers_deadline_when_it_is_sooner() {
    // The gateway's own body timeout (30 s by default) is far off.
    let gw = TestGateway::start().await;
    let addr = gw.gateway.grpc_addr();
    let (send, _driver) = h2_connect(addr).await;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{CREATE_JOURNEY}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", "300m")
        .body(())
        .expect("request");
    let mut send = send.ready().await.expect("h2 ready");
    let (response, mut body) = send.send_request(request, false).expect("send request");
    body.send_data(grpc_frame(100, &[0x0A]), false)
        .expect("partial body");
    let status = grpc_status(response).await;
    assert_error(&status, Code::DeadlineExceeded, "REQUEST_BODY_TIMEOUT");
    drop(body);
    gw.stop().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_one_carrying_a_watch_stream_stays_open() {
    let gw = TestGateway::start_with(|c| c.serving.idle_timeout_secs = 1).await;
    let created = gw.journey_in_processing().await;
    let stream = gw.watch(by_appkey(&created.appkey)).await;

    // Opened after the watch's connection last had no request in flight.
    let mut idle = TcpStream::connect(gw.gateway.grpc_addr())
        .await
        .expect("connect");
    assert_closed_by_peer(&mut idle, "an idle connection").await;

    // The watch's connection outlived the idle one: the stream still
    // delivers the result.
    gw.finish_processing();
    let (items, end) = drain(stream).await;
    assert!(end.is_none(), "the stream ended OK: {end:?}");
    assert_eq!(statuses(&items).last(), Some(&v1::JourneyStatus::Complete));
    gw.stop().await;
}

#[tokio::test]
async fn an_idle_http1_keep_alive_connection_is_closed_after_its_last_response() {
    let gw = TestGateway::start_with(|c| c.serving.idle_timeout_secs = 1).await;
    let mut conn = TcpStream::connect(gw.gateway.http_addr())
        .await
        .expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("request");
    let mut answer = Vec::new();
    tokio::time::timeout(EVENT_WAIT, conn.read_to_end(&mut answer))
        .await
        .expect("the idle keep-alive connection is closed")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    gw.stop().await;
}
