//! Admission: past the cap of unary calls in flight, of watch streams, or
//! of request bytes in flight, a call is refused `OVERLOADED` at once,
//! with `RetryInfo`, while the admitted ones are held and health still
//! answers.

use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

use super::{
    CREATE_JOURNEY, GatedUpstream, connect, grpc_frame, h2_call, h2_connect, h2_health_check,
    health, raw_create_journey, sample,
};
use crate::support::{
    gateway::*,
    wait::{EVENT_WAIT, eventually},
};

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

#[tokio::test]
async fn health_watch_streams_are_bounded_per_connection_and_per_process_while_checks_answer() {
    let gw = TestGateway::start_with(|c| {
        c.serving.max_service_streams = 3;
        c.serving.max_service_streams_per_connection = 2;
    })
    .await;
    let addr = gw.gateway.grpc_addr();
    // No credential is needed to watch health: each stream is counted on
    // its connection and in the process, whoever opens it.
    let watch = async |channel: &tonic::transport::Channel| {
        tonic_health::pb::health_client::HealthClient::new(channel.clone())
            .watch(tonic_health::pb::HealthCheckRequest::default())
            .await
    };
    let one = connect(addr).await;
    let first = watch(&one).await.expect("a first stream");
    let _second = watch(&one).await.expect("a second stream");
    let err = watch(&one).await.expect_err("a third on one connection");
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    assert!(retryable(&err));

    let two = connect(addr).await;
    let _third = watch(&two).await.expect("another connection's first");
    let err = watch(&two).await.expect_err("past the process's bound");
    assert_error(&err, Code::ResourceExhausted, "OVERLOADED");
    // A health check is never refused.
    assert_eq!(health(&two, "").await, ServingStatus::Serving);

    // A closed stream gives its place back.
    drop(first);
    eventually("a place comes back", EVENT_WAIT, async || {
        watch(&one).await.is_ok()
    })
    .await;
    let metrics = gw.metrics_text().await;
    for limit in ["service_streams", "service_streams_per_connection"] {
        let series = format!(r#"idgate_rpc_shed_total{{limit="{limit}"}}"#);
        assert!(sample(&metrics, &series) >= 1, "{series}: {metrics}");
    }
    gw.stop().await;
}
