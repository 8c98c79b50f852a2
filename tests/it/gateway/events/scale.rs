//! Watching at scale: a thousand watchers on a hundred journeys all end
//! with their result, each read shared by all of its journey's watchers, and the watches (and the process's
//! memory) returns to its baseline round after round.

use futures_util::{StreamExt as _, stream};
use idgate::proto::v1;
use idgate::testing::GatewayParts as _;

use super::assert_ends_complete;
use crate::support::{
    gateway::*,
    process::alone_in_own_process,
    wait::{EVENT_WAIT, eventually},
};

/// The resident set size of this process, in KiB.
fn vm_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

type Watchers = Vec<(String, tonic::Streaming<v1::WatchJourneyResponse>)>;

/// Opens `per_journey` watch streams on each journey, half by appkey and
/// half by reference, 64 at a time.
async fn open_watchers(
    gw: &TestGateway,
    journeys: &[v1::CreateJourneyResponse],
    per_journey: usize,
) -> Watchers {
    let requests = journeys.iter().flat_map(|j| {
        (0..per_journey).map(move |i| {
            let request = if i % 2 == 0 {
                by_appkey(&j.appkey)
            } else {
                by_ref(&j.journey_ref)
            };
            (j.journey_ref.clone(), request)
        })
    });
    stream::iter(requests)
        .map(|(journey_ref, request)| async move { (journey_ref, gw.watch(request).await) })
        .buffer_unordered(64)
        .collect()
        .await
}

/// Drains every stream concurrently; asserts each ended with its result.
async fn all_end_complete(watchers: Watchers) {
    let count = watchers.len();
    let ended: Vec<_> = stream::iter(watchers)
        .map(|(journey_ref, watcher)| async move { (journey_ref, drain(watcher).await) })
        .buffer_unordered(count.max(1))
        .collect()
        .await;
    assert_eq!(ended.len(), count);
    for (journey_ref, watched) in &ended {
        assert_ends_complete(watched, journey_ref);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watchers_on_a_hundred_journeys_complete_and_the_hub_returns_to_baseline() {
    if !alone_in_own_process(
        "gateway::events::scale::a_thousand_watchers_on_a_hundred_journeys_complete_and_the_hub_returns_to_baseline",
    ) {
        return;
    }
    const JOURNEYS: usize = 100;
    const PER_JOURNEY: usize = 10;
    const ROUNDS_AFTER_THE_FIRST: usize = 6;
    /// Rounds after the first that may still settle the allocator.
    const SETTLING_ROUNDS: usize = 2;
    let gw = TestGateway::start_with(|c| {
        c.watch.webhook_grace_secs = 3600;
        // A thousand streams share the test's one connection: above the
        // default per-connection cap (256), which would hold the rest back.
        c.serving.max_concurrent_streams = 2_048;
        // ... and above the default per-connection watch cap (100).
        c.serving.max_streams_per_connection = 2_048;
    })
    .await;
    let journeys: Vec<v1::CreateJourneyResponse> = stream::iter(0..JOURNEYS)
        .map(|_| gw.journey_in_processing())
        .buffer_unordered(16)
        .collect()
        .await;
    let watches = gw.gateway.watches();
    assert_eq!(records_held(watches, &journeys), JOURNEYS);
    let baseline = vm_rss_kib();

    let watchers = open_watchers(&gw, &journeys, PER_JOURNEY).await;
    let stats = watches.stats();
    assert_eq!(
        (stats.journeys, stats.watchers, stats.tasks),
        (JOURNEYS, JOURNEYS * PER_JOURNEY, JOURNEYS)
    );
    // The current state first: one read per journey (still processing),
    // whatever its number of watchers.
    eventually(
        "each journey's current state is read",
        EVENT_WAIT,
        async || watches.stats().result_reads == JOURNEYS as u64,
    )
    .await;
    let peak = vm_rss_kib();
    // The watches count a read as it sends it; the sandbox as it arrives.
    eventually(
        "the sandbox has received each journey's one read",
        EVENT_WAIT,
        async || gw.result_reads() == JOURNEYS as u64,
    )
    .await;

    gw.finish_processing();
    all_end_complete(watchers).await;
    assert_eq!(gw.sandbox().webhook_stats().delivered, JOURNEYS as u64);
    // One more read per journey after its notice, whatever its number of
    // watchers.
    assert_eq!(gw.result_reads(), 2 * JOURNEYS as u64);

    tokio::time::timeout(EVENT_WAIT, watches.tasks_finished())
        .await
        .expect("reading tasks stop");
    let stats = watches.stats();
    assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
    // What stays is bounded by configuration: one reference and one
    // notice per journey, not per watcher.
    assert_eq!(records_held(watches, &journeys), JOURNEYS);
    assert_eq!(stats.notices_remembered, JOURNEYS);
    let after = vm_rss_kib();

    // More rounds on the finished journeys (the remembered notices make
    // them read at once): a leak grows with every round, allocator reuse
    // does not. This test runs alone in its own process, so the whole
    // process's RSS is this gateway's.
    let mut after_rounds = vec![after];
    for _ in 0..ROUNDS_AFTER_THE_FIRST {
        let watchers = open_watchers(&gw, &journeys, PER_JOURNEY).await;
        all_end_complete(watchers).await;
        tokio::time::timeout(EVENT_WAIT, watches.tasks_finished())
            .await
            .expect("reading tasks stop");
        let stats = watches.stats();
        assert_eq!((stats.journeys, stats.watchers, stats.tasks), (0, 0, 0));
        assert_eq!(records_held(watches, &journeys), JOURNEYS);
        after_rounds.push(vm_rss_kib());
    }
    println!(
        "VmRSS (KiB, this test's own process): before watchers {baseline}, with {} watchers \
         {peak}, after each round {after_rounds:?}",
        JOURNEYS * PER_JOURNEY
    );
    // Once the allocator settled, the remaining rounds (4000 watchers) may
    // not raise RSS above its settled high-water mark by more than an
    // eighth of what one round of open watchers took: a leak of 1/16 of
    // each watcher's footprint per round exceeds it (measured here: one
    // round of watchers takes about 17 MiB, the settled rounds add at most
    // about 1.2 MiB). The high-water mark, not one sample: the allocator
    // may hand pages back for a round and take them again the next.
    let footprint = peak.saturating_sub(baseline);
    let bound = footprint / 8;
    let settled = after_rounds[..=SETTLING_ROUNDS]
        .iter()
        .copied()
        .max()
        .expect("rounds");
    let last = *after_rounds.last().expect("rounds");
    assert!(
        last <= settled + bound,
        "VmRSS grew by {} KiB over {} rounds of {} watchers, more than {bound} KiB \
         (an eighth of the {footprint} KiB one round of watchers took): {after_rounds:?}",
        last.saturating_sub(settled),
        ROUNDS_AFTER_THE_FIRST - SETTLING_ROUNDS,
        JOURNEYS * PER_JOURNEY
    );
    gw.stop().await;
}

/// How many of `journeys` the gateway holds the record of.
fn records_held(
    watches: &idgate::events::JourneyWatches,
    journeys: &[v1::CreateJourneyResponse],
) -> usize {
    journeys
        .iter()
        .filter_map(|j| idgate::domain::JourneyRef::parse(&j.journey_ref))
        .filter(|j| watches.journeys().held(j).is_some())
        .count()
}
