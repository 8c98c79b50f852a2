//! A watch stream's own life: an unknown reference is `NOT_FOUND`, and a
//! stream ended by the caller's deadline, by the caller, or by the
//! gateway's shutdown releases its watcher and reads nothing more.

use idgate::testing::GatewayParts as _;
use std::time::Duration;

use crate::support::{
    gateway::*,
    wait::{EVENT_WAIT, eventually},
};

#[tokio::test]
async fn a_reference_this_gateway_did_not_issue_is_not_found() {
    let gw = TestGateway::start().await;
    let status = gw
        .journeys()
        .watch_journey(by_ref("j-0123456789abcdef"))
        .await
        .expect_err("unknown reference");
    assert_error(&status, tonic::Code::NotFound, "JOURNEY_UNKNOWN");
    assert!(!retryable(&status), "{status:?}: no RetryInfo");
    let status = gw
        .journeys()
        .watch_journey(by_ref("not-a-reference"))
        .await
        .expect_err("malformed reference");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(gw.gateway.watches().stats().journeys, 0);
    gw.stop().await;
}

#[tokio::test]
async fn the_callers_deadline_ends_the_stream_with_deadline_exceeded() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let mut request = tonic::Request::new(by_appkey(&journey.appkey));
    request.set_timeout(Duration::from_millis(300));
    let watcher = gw
        .journeys()
        .watch_journey(request)
        .await
        .expect("watch journey")
        .into_inner();
    let (items, end) = drain(watcher).await;
    // At most the current state (still processing), never a result.
    assert_only_processing(&items);
    let end = end.expect("the stream ends with an error");
    assert_eq!(end.code(), tonic::Code::DeadlineExceeded, "{end:?}");
    assert_eq!(reason(&end), "DEADLINE_EXCEEDED");
    let watches = gw.gateway.watches();
    eventually("the watcher is released", EVENT_WAIT, async || {
        watches.stats().watchers == 0
    })
    .await;
    tokio::time::timeout(EVENT_WAIT, watches.tasks_finished())
        .await
        .expect("the reading task stops");
    assert_eq!(watches.stats().journeys, 0);
    // The current state, read once; no polling while the notice is awaited.
    assert!(gw.result_reads() <= 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_cancelled_stream_releases_its_watcher() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let first = gw.watch(by_appkey(&journey.appkey)).await;
    let second = gw.watch(by_ref(&journey.journey_ref)).await;
    let watches = gw.gateway.watches();
    assert_eq!((watches.stats().journeys, watches.stats().watchers), (1, 2));

    drop(first);
    eventually(
        "the cancelled watcher is released",
        EVENT_WAIT,
        async || watches.stats().watchers == 1,
    )
    .await;
    assert_eq!(watches.stats().journeys, 1);
    drop(second);
    eventually("the journey is released", EVENT_WAIT, async || {
        watches.stats().journeys == 0
    })
    .await;
    tokio::time::timeout(EVENT_WAIT, watches.tasks_finished())
        .await
        .expect("the reading task stops");
    assert_eq!(watches.stats().watchers, 0);

    // Nobody watches: the notice is delivered but reads nothing (the
    // current state was read at most once, while watched).
    let reads = gw.result_reads();
    assert!(reads <= 1);
    gw.finish_processing();
    gw.webhook_stats_until(|s| s.delivered == 1).await;
    assert_eq!(gw.result_reads(), reads);
    gw.stop().await;
}

#[tokio::test]
async fn shutting_down_ends_open_watch_streams() {
    let gw = TestGateway::start_with(|c| c.watch.webhook_grace_secs = 3600).await;
    let journey = gw.journey_in_processing().await;
    let watcher = gw.watch(by_appkey(&journey.appkey)).await;
    let watches = gw.gateway.watches().clone();
    tokio::time::timeout(EVENT_WAIT, gw.stop())
        .await
        .expect("the gateway stops with a watcher open");
    let (items, end) = drain(watcher).await;
    assert_only_processing(&items);
    let end = end.expect("the stream ends with an error");
    assert_eq!(end.code(), tonic::Code::Unavailable, "{end:?}");
    assert_eq!(reason(&end), "SHUTTING_DOWN");
    let stats = watches.stats();
    assert_eq!((stats.journeys, stats.watchers), (0, 0));
}
