//! Serving under pressure (issue 10), over real sockets with small
//! configured limits: admission caps and bulkheads, connection caps,
//! header, body and idle timeouts, the drain, and the statuses of caller
//! faults. Promptness is proven by ordering, never by the clock: the
//! admitted calls are held at a [`Gate`] on the upstream path while the
//! refused ones are answered.

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use idgate::{
    config::{Config, UpstreamConfig},
    domain::Operation,
    proto::v1::{self, RoutingMode},
    sandbox::{FaultAction, FaultRule, ManualClock, SandboxConfig, SandboxHandle},
    server::StartOptions,
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};
use tonic::{Code, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::support::{
    gateway::*,
    metrics,
    net::{gated_proxy, http_client},
    process::{ServeProcess, quick_serve_config},
    sandbox,
    wait::{EVENT_WAIT, Gate, eventually},
};

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

// Raw HTTP/2, for the request bodies a tonic client would never send.

/// An HTTP/2 connection to `addr`, its driver spawned.
async fn h2_connect(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    (send, tokio::spawn(connection))
}

/// Opens a unary gRPC request to `path`; the body is the caller's to send.
async fn h2_call(
    send: h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    path: &str,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    let mut send = send.ready().await.expect("h2 ready");
    send.send_request(request, false).expect("send request")
}

/// A gRPC frame: uncompressed, announcing `declared` bytes, carrying `bytes`.
fn grpc_frame(declared: u32, bytes: &[u8]) -> Bytes {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&declared.to_be_bytes());
    frame.extend_from_slice(bytes);
    frame.into()
}

/// The gRPC status of a raw response: trailers-only or in the trailers.
async fn grpc_status(response: h2::client::ResponseFuture) -> tonic::Status {
    tokio::time::timeout(EVENT_WAIT, async {
        let response = response.await.expect("response");
        if let Some(status) = tonic::Status::from_header_map(response.headers()) {
            return status;
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("body");
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await.expect("trailers").expect("trailers");
        tonic::Status::from_header_map(&trailers).expect("grpc-status")
    })
    .await
    .expect("answered in time")
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

// 1. Admission

#[tokio::test]
async fn past_max_in_flight_calls_are_refused_overloaded_while_the_admitted_ones_are_held() {
    let up = GatedUpstream::start(
        |_| {},
        |c| {
            c.serving.max_in_flight = 50;
            // One connection carries all 500 calls.
            c.serving.max_concurrent_streams = 1_000;
        },
    )
    .await;
    let (gw, gate) = (&up.gw, &up.gate);
    let before = gate.arrived();

    let (tx, mut answers) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..500 {
        let mut client = gw.journeys();
        let tx = tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(client.create_journey(happy_person()).await);
        });
    }
    drop(tx);
    gate.arrivals(before + 50).await;

    // Every refused call is answered while the 50 admitted ones are held.
    for _ in 0..450 {
        let answer = tokio::time::timeout(EVENT_WAIT, answers.recv())
            .await
            .expect("refusals answered while the admitted calls are held")
            .expect("an answer");
        let status = answer.expect_err("only refusals can be answered while the gate is closed");
        assert_error(&status, Code::ResourceExhausted, "OVERLOADED");
        assert!(retryable(&status), "RetryInfo: {status:?}");
    }
    assert_eq!(gate.arrived(), before + 50, "the upstream saw 50 calls");
    assert!(answers.try_recv().is_err(), "no admitted call answered yet");
    // Health is never refused, even with the unary cap full.
    let probe = connect(gw.gateway.grpc_addr()).await;
    assert_eq!(health(&probe, "").await, ServingStatus::Serving);

    gate.open();
    let mut ok = 0;
    while let Some(answer) = tokio::time::timeout(EVENT_WAIT, answers.recv())
        .await
        .expect("admitted calls answered")
    {
        answer.expect("an admitted call succeeds");
        ok += 1;
    }
    assert_eq!(ok, 50);
    assert_eq!(
        gate.peak(),
        50,
        "the upstream never saw more than 50 at once"
    );
    let metrics = gw.metrics_text().await;
    assert_eq!(
        sample(&metrics, r#"idgate_rpc_shed_total{limit="in_flight"}"#),
        450,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/CreateJourney",code="RESOURCE_EXHAUSTED"}"#
        ),
        450
    );
    up.gw.stop().await;
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

#[tokio::test]
async fn watch_streams_have_their_own_cap_and_never_take_a_unary_slot() {
    let gw = TestGateway::start_with(|c| {
        c.serving.max_in_flight = 1;
        c.serving.max_streams = 2;
    })
    .await;
    let appkey = gw.create_journey().await;
    let _first = gw.watch(by_appkey(&appkey)).await;
    let _second = gw.watch(by_appkey(&appkey)).await;
    let err = gw
        .journeys()
        .watch_journey(by_appkey(&appkey))
        .await
        .expect_err("a third stream is over the stream cap");
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));
    // Two streams open, and the one unary slot is still free.
    gw.create_journey().await;
    gw.challenges(&appkey).await.expect("a unary call passes");
    let metrics = gw.metrics_text().await;
    assert_eq!(
        sample(&metrics, r#"idgate_rpc_shed_total{limit="streams"}"#),
        1
    );
    assert_eq!(
        sample(&metrics, r#"idgate_rpc_shed_total{limit="in_flight"}"#),
        0
    );
    gw.stop().await;
}

// 2, 3. Bulkheads

#[tokio::test]
async fn a_full_channel_bulkhead_refuses_in_a_forced_mode_and_fails_over_in_auto() {
    let gw = TestGateway::start().await;
    let mut appkeys = Vec::new();
    for _ in 0..4 {
        appkeys.push(gw.create_journey().await);
    }
    let gate = Gate::closed();
    let proxy = gated_proxy(&gw.sandbox_channel_specs()[0].base_url, gate.clone()).await;
    gw.reload_channels(|channels| {
        channels[0].base_url = proxy;
        channels[0].max_concurrent_requests = 2;
    });
    gw.set_mode(RoutingMode::ForcePrimary).await;
    let held: Vec<_> = appkeys[..2]
        .iter()
        .map(|appkey| {
            let mut liveness = gw.liveness();
            let appkey = appkey.clone();
            tokio::spawn(async move {
                liveness
                    .start_session3_d(v1::StartSession3DRequest {
                        appkey,
                        user_agent: "test".into(),
                    })
                    .await
            })
        })
        .collect();
    gate.arrivals(2).await;

    let err = gw.start_3d(&appkeys[2]).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));
    // In auto mode the full primary is passed over for the alternative.
    gw.set_mode(RoutingMode::Auto).await;
    let s = gw.start_3d(&appkeys[3]).await.expect("session elsewhere");
    assert_eq!(s.channel, "alternative");
    assert_eq!(gate.arrived(), 2, "nothing more reached the full channel");
    assert!(held.iter().all(|h| !h.is_finished()));
    let metrics = gw.metrics_text().await;
    assert_eq!(
        metrics::sum(
            &metrics,
            "idgate_upstream_rejected_total",
            &[("channel", "primary")]
        ),
        2.0,
        "{metrics}"
    );

    gate.open();
    for h in held {
        let s = h.await.expect("task").expect("held session").into_inner();
        assert_eq!(s.channel, "primary");
    }
    assert_eq!(gate.peak(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_full_upstream_bulkhead_refuses_overloaded_and_counts_the_rejection() {
    let up = GatedUpstream::start(|u| u.max_concurrent_requests = 2, |_| {}).await;
    let (gw, gate) = (&up.gw, &up.gate);
    let before = gate.arrived();
    let held: Vec<_> = (0..2)
        .map(|_| {
            let mut client = gw.journeys();
            tokio::spawn(async move { client.create_journey(happy_person()).await })
        })
        .collect();
    gate.arrivals(before + 2).await;

    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));
    assert_eq!(gate.arrived(), before + 2);
    let metrics = gw.metrics_text().await;
    assert_eq!(
        metrics::sum(&metrics, "idgate_upstream_rejected_total", &[]),
        1.0,
        "{metrics}"
    );

    gate.open();
    for h in held {
        h.await.expect("task").expect("held call succeeds");
    }
    assert_eq!(gate.peak(), 2);
    up.gw.stop().await;
}

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

// 4. Connection cap

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

// 5. Header and body timeouts

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

// 6. Idle timeout

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

// 7. Drain

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

// 8. Caller faults

#[tokio::test]
async fn undecodable_protobuf_is_invalid_argument_malformed_request_and_counted_so() {
    let gw = TestGateway::start().await;
    let addr = gw.gateway.grpc_addr();
    let garbage: [&[u8]; 3] = [
        // Random bytes: a varint that never ends.
        &[
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ],
        // `cpf` (field 1, length-delimited) with a truncated length varint.
        &[0x0A, 0x80],
        // `cpf` holding invalid UTF-8.
        &[0x0A, 0x02, 0xC3, 0x28],
    ];
    for bytes in garbage {
        let status = raw_create_journey(addr, bytes).await;
        assert_error(&status, Code::InvalidArgument, "MALFORMED_REQUEST");
    }
    assert_eq!(gw.total_calls(), 0, "nothing reached the upstream");
    let metrics = gw.metrics_text().await;
    let series = |code: &str| {
        format!(
            r#"idgate_rpc_requests_total{{method="idgate.v1.JourneyService/CreateJourney",code="{code}"}}"#
        )
    };
    assert_eq!(
        sample(&metrics, &series("INVALID_ARGUMENT")),
        3,
        "{metrics}"
    );
    assert_eq!(sample(&metrics, &series("INTERNAL")), 0, "{metrics}");
    gw.stop().await;
}

#[tokio::test]
async fn a_message_over_the_size_limit_is_resource_exhausted_message_too_large() {
    let gw = TestGateway::start_with(|c| c.limits.max_grpc_message_bytes = Some(1024)).await;
    let mut person = happy_person();
    person.customer_reference = "X".repeat(2048);
    let err = gw.journeys().create_journey(person).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "MESSAGE_TOO_LARGE");
    assert!(!retryable(&err));
    assert_eq!(gw.total_calls(), 0);
    let metrics = gw.metrics_text().await;
    assert_eq!(
        sample(
            &metrics,
            r#"idgate_rpc_requests_total{method="idgate.v1.JourneyService/CreateJourney",code="RESOURCE_EXHAUSTED"}"#
        ),
        1,
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn request_bytes_past_the_budget_in_flight_are_refused_overloaded_while_health_answers() {
    const HELD: usize = 40 * 1024;
    const SENT: usize = 30 * 1024;
    let gw = TestGateway::start_with(|c| {
        c.serving.max_body_bytes_in_flight = 64 * 1024;
        c.limits.max_grpc_message_bytes = Some(48 * 1024);
    })
    .await;
    let addr = gw.gateway.grpc_addr();
    // 40 KiB of a 47 KiB message arrive, then nothing: they stay charged.
    let (send, _driver) = h2_connect(addr).await;
    let (held, mut held_body) = h2_call(send.clone(), addr, CREATE_JOURNEY).await;
    held_body
        .send_data(grpc_frame(47 * 1024, &vec![0x0A; HELD]), false)
        .expect("partial body");
    // Read by the gateway once a later request on the connection is.
    h2_health_check(&send, addr).await;

    // 30 KiB more do not fit in 64 KiB: refused at once, nothing sent.
    let status = raw_create_journey(addr, &vec![0u8; SENT]).await;
    assert_error(&status, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&status));
    assert_eq!(gw.total_calls(), 0);
    // Health still answers.
    let channel = connect(addr).await;
    assert_eq!(health(&channel, "").await, ServingStatus::Serving);
    let metrics = gw.metrics_text().await;
    assert!(
        sample(&metrics, r#"idgate_rpc_shed_total{limit="body_bytes"}"#) >= 1,
        "{metrics}"
    );

    // The held call's bytes are released when it ends: the same request
    // is read (and found malformed) again.
    held_body.send_reset(h2::Reason::CANCEL);
    drop(held);
    eventually("the held bytes are released", EVENT_WAIT, async || {
        reason(&raw_create_journey(addr, &vec![0u8; SENT]).await) == "MALFORMED_REQUEST"
    })
    .await;
    gw.stop().await;
}

// 9. Forced modes retry the session token

#[tokio::test]
async fn a_forced_mode_retries_the_session_token_on_its_channel_after_a_transient_503() {
    let gw = TestGateway::start().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::SessionToken3D)
                .channel("primary")
                .times(1),
        )
        .expect("fault");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("the retry succeeds");
    assert_eq!(s.channel, "primary");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

// 10. Admin token

#[tokio::test]
async fn an_admin_token_shorter_than_32_characters_stops_the_gateway_from_starting() {
    let mut config = test_config();
    config.admin.token_file = Some(secret_file("too-short-token"));
    let err = match idgate::server::start_with(config, StartOptions::default()).await {
        Ok(gateway) => {
            gateway.shutdown().await;
            panic!("a gateway started with a short admin token");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("admin.token"), "{err}");
    assert!(!err.contains("too-short-token"), "{err}");
}

// 11. Reflection per listener

async fn reflected_services(addr: SocketAddr) -> Vec<String> {
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let mut client = ServerReflectionClient::new(connect(addr).await);
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
        reflected_services(gw.gateway.grpc_addr()).await,
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
        reflected_services(admin).await,
        [
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "idgate.v1.ChannelAdminService",
        ]
    );
    gw.stop().await;
}

/// `idgate serve` refuses a configuration foot-gun before it binds
/// anything: the process exits non-zero and says which key, not what value.
#[test]
fn idgate_serve_refuses_to_start_on_an_unbounded_ttl_or_a_pattern_webhook_path() {
    let dir = crate::support::temp::dir("footgun");
    let config = dir.path().join("idgate.toml");
    let listen =
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    for (extra, env, key) in [
        (
            "[webhook]\npath = \"/hooks/:journey\"\n",
            None,
            "webhook.path",
        ),
        (
            "",
            Some(("IDGATE_WATCH__DIRECTORY_TTL_SECS", "9223372036854775807")),
            "watch.directory_ttl_secs",
        ),
    ] {
        std::fs::write(&config, format!("{listen}{extra}")).expect("write config");
        let mut command = crate::support::process::idgate_command();
        command
            .args(["serve", "--config"])
            .arg(&config)
            .env("IDGATE_ADMIN_TOKEN", crate::support::gateway::ADMIN_TOKEN);
        if let Some((var, value)) = env {
            command.env(var, value);
        }
        let out = command.output().expect("run idgate serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{key}: {stdout}");
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(!stdout.contains("idgate listening"), "{stdout}");
        assert!(
            !stderr.contains(":journey") && !stderr.contains("9223372036854775807"),
            "{stderr}"
        );
    }
}
