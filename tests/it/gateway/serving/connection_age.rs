//! Connection age (`[serving] max_connection_age_secs`), over real
//! sockets: a caller that keeps one channel moves to a new connection at
//! each age without a failed call, even while another of its streams
//! holds the aged connection open and while the CPU is saturated; a watch
//! open at the age ends `UNAVAILABLE` / `CONNECTION_AGED` and watching
//! again completes; and behind a balancer one long-lived channel reaches
//! a second replica.
//!
//! Every caller here calls through idgate's [`ResendingChannel`]: tonic's
//! `Channel` loses a call it queues on a connection that has just read the
//! GOAWAY (`CANCELLED`, "connection closed", never sent), which no server
//! can prevent (`idgate::client` says why).
//!
//! Under load nothing here races a clock: a loop goes on until what it
//! waits for was seen (with an overall deadline far past the age), and
//! every call on the way must succeed.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::FutureExt;
use idgate::{client::ResendingChannel, proto::v1};
use tokio::{sync::watch, task::JoinSet};
use tonic::Code;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::support::{balancer::Balancer, gateway::*, metrics, wait::EVENT_WAIT};

/// The age the tests configure: short enough to age several times in a
/// test, long enough that a call is never still being sent at it.
const AGE_SECS: u64 = 2;
/// Overall bound on a loop that waits for connections to age: 30 ages.
const AGES_WAIT: Duration = Duration::from_secs(60);
/// Pause between a steady caller's calls, to spare the CPU.
const PACE: Duration = Duration::from_millis(20);

/// A gateway whose connections age after `age_secs`, its typed clients
/// calling through a [`ResendingChannel`].
async fn gateway_aging_after(age_secs: u64) -> TestGateway {
    let mut gw = TestGateway::start_with(|c| {
        c.serving.max_connection_age_secs = age_secs;
        c.serving.max_connection_age_grace_secs = 30;
        c.watch.webhook_grace_secs = 3600;
    })
    .await;
    gw.resend_unsent_calls();
    gw
}

/// A gateway whose connections age after [`AGE_SECS`].
async fn aging_gateway() -> TestGateway {
    gateway_aging_after(AGE_SECS).await
}

/// A channel to `url` that the test keeps for its whole run.
fn long_lived(url: &str) -> ResendingChannel {
    resending(url)
}

/// One health check on `channel`; any status but OK fails the test (so a
/// passing test saw no failed call).
async fn call(channel: &ResendingChannel, n: usize) {
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
    let channel = long_lived(&proxy.url());
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
    let channel = long_lived(&balancer.url());
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

#[tokio::test]
async fn a_call_sent_while_another_stream_holds_the_aged_connection_open_goes_on_a_new_connection()
{
    let gw = aging_gateway().await;
    let proxy = Balancer::start(vec![gw.gateway.grpc_addr()]).await;
    let channel = long_lived(&proxy.url());
    // A stream the age does not end (health's Watch; a slow call does the
    // same): the first connection stays open after its GOAWAY.
    let mut held = HealthClient::new(channel.clone())
        .watch(HealthCheckRequest::default())
        .await
        .expect("health watch")
        .into_inner();
    held.message()
        .await
        .expect("the serving status")
        .expect("a message");
    let started = tokio::time::Instant::now();
    let mut calls = 0;
    while proxy.accepted()[0] < 2 {
        assert!(
            started.elapsed() < AGES_WAIT,
            "no second connection after {calls} calls in {AGES_WAIT:?}"
        );
        call(&channel, calls).await;
        calls += 1;
        tokio::time::sleep(PACE).await;
    }
    call(&channel, calls).await;
    // Nothing was closed under the held stream: it is still open, and
    // the first connection aged (not closed for a reason of its own).
    assert!(
        held.message().now_or_never().is_none(),
        "the held stream is still open"
    );
    let text = gw.metrics_text().await;
    assert!(
        metrics::counted(&text, r#"idgate_connections_aged_total{listener="grpc"}"#) >= 1.0,
        "connections aged: {text}"
    );
    // Else the aged connection would hold the gateway's stop until its
    // grace ends.
    drop(held);
    gw.stop().await;
}

/// Threads that keep every core busy until dropped, so the test's tasks
/// and the gateway's run late, as on a loaded 2-core machine.
struct CpuLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    fn on_every_core() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The ages the load test goes through: this many connections after the
/// first.
const LOADED_AGES: usize = 6;
/// Callers calling steadily on the one channel, each on its own task.
const LOADED_CALLERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_watches_on_one_channel_across_many_ages_under_cpu_load_all_succeed() {
    let gw = gateway_aging_after(1).await;
    let journey = gw.journey_in_processing().await;
    let proxy = Balancer::start(vec![gw.gateway.grpc_addr()]).await;
    let channel = long_lived(&proxy.url());
    let load = CpuLoad::on_every_core();
    let (done, until_done) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for caller in 0..LOADED_CALLERS {
        let (channel, mut until_done) = (channel.clone(), until_done.clone());
        tasks.spawn(async move {
            let mut calls = 0;
            while !*until_done.borrow_and_update() {
                call(&channel, caller * 1_000_000 + calls).await;
                calls += 1;
                tokio::time::sleep(PACE / 10).await;
            }
            calls
        });
    }
    // A watcher whose stream is open when each connection ages: it ends
    // CONNECTION_AGED and the watcher watches again at once.
    let watcher = {
        let (channel, mut until_done) = (channel.clone(), until_done.clone());
        let journey_ref = journey.journey_ref.clone();
        tokio::spawn(async move {
            let mut watches = 0;
            while !*until_done.borrow_and_update() {
                let stream = v1::journey_service_client::JourneyServiceClient::new(channel.clone())
                    .watch_journey(by_ref(&journey_ref))
                    .await
                    .unwrap_or_else(|s| panic!("watch {watches} failed: {s:?}"))
                    .into_inner();
                let (items, end) = drain_within(stream, AGES_WAIT).await;
                assert_only_processing(&items);
                let end = end.expect("a watch of a processing journey ends only at an age");
                assert_error(&end, Code::Unavailable, "CONNECTION_AGED");
                watches += 1;
            }
            watches
        })
    };
    let started = tokio::time::Instant::now();
    while proxy.accepted()[0] <= LOADED_AGES {
        assert!(
            started.elapsed() < AGES_WAIT,
            "only {:?} connections in {AGES_WAIT:?}",
            proxy.accepted()
        );
        // A caller that failed ends the test at once, with its status.
        if let Some(ended) = tasks.try_join_next() {
            ended.expect("a caller failed");
        }
        assert!(!watcher.is_finished(), "the watcher failed");
        tokio::time::sleep(PACE).await;
    }
    done.send_replace(true);
    let mut calls = 0;
    while let Some(ended) = tasks.join_next().await {
        calls += ended.expect("a caller failed");
    }
    drop(load);
    // The watcher ends at the next age.
    let watches = watcher.await.expect("the watcher failed");
    assert!(calls > LOADED_AGES, "{calls} calls");
    assert!(watches >= 1, "{watches} watches ended CONNECTION_AGED");
    gw.stop().await;
}
