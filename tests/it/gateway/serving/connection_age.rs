//! Connection age (`[serving] max_connection_age_secs`), over real
//! sockets: a caller that keeps one channel moves to a new connection at
//! each age without a failed call, a watch open at the age ends
//! `UNAVAILABLE` / `CONNECTION_AGED` and watching again completes, and
//! behind a balancer one long-lived channel reaches a second replica.
//!
//! Under load nothing here races a clock: a loop goes on until what it
//! waits for was seen (with an overall deadline far past the 2 s age),
//! and every call on the way must succeed.

use std::time::Duration;

use idgate::proto::v1;
use tonic::{Code, transport::Channel};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::support::{balancer::Balancer, gateway::*, metrics, wait::EVENT_WAIT};

/// The age the tests configure: short enough to age several times in a
/// test, long enough that a call is never still being sent at it.
const AGE_SECS: u64 = 2;
/// Overall bound on a loop that waits for connections to age: 30 ages.
const AGES_WAIT: Duration = Duration::from_secs(60);
/// Pause between a steady caller's calls, to spare the CPU.
const PACE: Duration = Duration::from_millis(20);

/// A gateway whose connections age after [`AGE_SECS`].
async fn aging_gateway() -> TestGateway {
    TestGateway::start_with(|c| {
        c.serving.max_connection_age_secs = AGE_SECS;
        c.serving.max_connection_age_grace_secs = 30;
        c.watch.webhook_grace_secs = 3600;
    })
    .await
}

/// A channel to `url` that the test keeps for its whole run.
async fn long_lived(url: String) -> Channel {
    Channel::from_shared(url)
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

/// One health check on `channel`; any status but OK fails the test (so a
/// passing test saw no failed call).
async fn call(channel: &Channel, n: usize) {
    if let Err(status) = HealthClient::new(channel.clone())
        .check(HealthCheckRequest::default())
        .await
    {
        panic!("call {n} failed: {status:?}");
    }
}

const HEALTH_CHECKS: &str =
    r#"idgate_rpc_requests_total{method="grpc.health.v1.Health/Check",code="OK"}"#;

#[tokio::test]
async fn one_channel_calling_steadily_moves_to_a_new_connection_at_each_age_without_a_failed_call()
{
    let gw = aging_gateway().await;
    let proxy = Balancer::start(vec![gw.gateway.grpc_addr()]).await;
    let channel = long_lived(proxy.url()).await;
    let started = tokio::time::Instant::now();
    // At least 4 connections: the first and three after an age each. With
    // a 2 s age that takes about 6 s (well within the issue's 10 s); under
    // load the loop runs until they were seen, up to AGES_WAIT.
    let mut calls = 0;
    while proxy.accepted()[0] < 4 {
        assert!(
            started.elapsed() < AGES_WAIT,
            "only {:?} connections after {calls} calls in {AGES_WAIT:?}",
            proxy.accepted()
        );
        call(&channel, calls).await;
        calls += 1;
        tokio::time::sleep(PACE).await;
    }
    // The new connection carries calls too.
    call(&channel, calls).await;
    // Counted before each GOAWAY was sent, so before the reconnect the
    // loop saw. (At least one, not three: a connection may also end for a
    // reason of its own, a keepalive ping unanswered on a loaded machine.)
    let text = gw.metrics_text().await;
    assert!(
        metrics::counted(&text, r#"idgate_connections_aged_total{listener="grpc"}"#) >= 1.0,
        "connections aged: {text}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_watch_open_when_its_connection_ages_ends_connection_aged_and_a_rewatch_completes() {
    let gw = aging_gateway().await;
    let journey = gw.journey_in_processing().await;
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let (items, end) = drain(watcher).await;
    // At most the current state (still processing), never a result.
    assert_only_processing(&items);
    let end = end.expect("the stream ends with an error");
    assert_error(&end, Code::Unavailable, "CONNECTION_AGED");
    assert!(retryable(&end), "RetryInfo: watching again is safe");

    // Watching again (the channel reconnects) goes on from the journey's
    // latest state. Should the new connection age too before the journey
    // completes (a loaded machine), that watch ends the same way and the
    // caller watches again, as documented.
    gw.finish_processing();
    let give_up = tokio::time::Instant::now() + EVENT_WAIT;
    loop {
        assert!(
            tokio::time::Instant::now() < give_up,
            "no re-watch completed within {EVENT_WAIT:?}"
        );
        let again = gw.watch(by_ref(&journey.journey_ref)).await;
        let (items, end) = drain(again).await;
        if let Some(end) = &end {
            assert_error(end, Code::Unavailable, "CONNECTION_AGED");
        }
        if items.last().map(v1::WatchJourneyResponse::status) == Some(v1::JourneyStatus::Complete) {
            break;
        }
    }
    gw.stop().await;
}

#[tokio::test]
async fn behind_a_balancer_one_long_lived_channel_reaches_both_replicas_after_an_age() {
    let (one, two) = tokio::join!(aging_gateway(), aging_gateway());
    let balancer = Balancer::start(vec![one.gateway.grpc_addr(), two.gateway.grpc_addr()]).await;
    let channel = long_lived(balancer.url()).await;
    let started = tokio::time::Instant::now();
    let mut calls = 0;
    // The first connection goes to one replica; the one opened after its
    // age, to the other. Within one age, give or take the jitter, when
    // the machine is not loaded; the loop runs until both answered.
    loop {
        call(&channel, calls).await;
        calls += 1;
        let (a, b) = tokio::join!(one.metrics_text(), two.metrics_text());
        // Not exposed on a replica that has answered nothing yet.
        let answered = [&a, &b].map(|text| metrics::reached(text, HEALTH_CHECKS, 1.0));
        if answered.iter().all(|reached| *reached) {
            break;
        }
        assert!(
            started.elapsed() < AGES_WAIT,
            "calls answered by each replica: {answered:?} after {calls} calls in {AGES_WAIT:?}; connections {:?}",
            balancer.accepted()
        );
        tokio::time::sleep(PACE).await;
    }
    one.stop().await;
    two.stop().await;
}
