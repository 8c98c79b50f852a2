//! Watching one journey from many replicas costs the vendor one poll per
//! interval for the fleet, and one read of the final result per replica
//! holding watchers: without a webhook, one replica at a time holds the
//! journey's read turn and polls for the fleet; when it finds the result
//! final it says so, and every other replica holding watchers reads it
//! once for its own (the result itself never crosses Redis).

use idgate::testing::GatewayParts as _;
use std::time::{Duration, Instant};

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, assert_complete},
    gateway::{by_appkey, by_ref, drain_within, happy_person},
    wait::eventually,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_without_a_webhook_poll_a_watched_result_once_per_interval_between_them_and_read_it_final_once_each()
 {
    const POLL: Duration = Duration::from_millis(200);
    let mut fleet = Fleet::start(0, 3600).await;
    // No receiver: every replica polls from the start.
    fleet
        .add_replicas_with(2, |c| {
            c.webhook.basic_user = None;
            c.webhook.basic_password_file = None;
            c.watch.poll_initial_ms = POLL.as_millis() as u64;
            c.watch.poll_max_ms = POLL.as_millis() as u64;
        })
        .await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let created = a.create_journey_for(happy_person()).await;
    assert!(a.pass_3d(&created.appkey).await.valid);
    a.submit_rg(&created.appkey).await;

    // Twenty watchers split across the two replicas, by reference and by
    // appkey; the journey stays in processing meanwhile.
    let reads_before = fleet.result_reads();
    let started = Instant::now();
    let mut watchers = Vec::new();
    for i in 0..20 {
        let replica = if i % 2 == 0 { a } else { b };
        let request = if i % 4 < 2 {
            by_ref(&created.journey_ref)
        } else {
            by_appkey(&created.appkey)
        };
        watchers.push(replica.watch(request).await);
    }
    eventually(
        "ten polls of the processing result",
        EVENT_WAIT,
        async || fleet.result_reads() - reads_before >= 10,
    )
    .await;
    fleet.finish_processing();
    for stream in watchers {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }
    let elapsed = started.elapsed();
    let reads = fleet.result_reads() - reads_before;
    let (on_a, on_b) = (
        a.gateway.watches().stats().result_reads,
        b.gateway.watches().stats().result_reads,
    );
    // One replica held the turn throughout (it renews it with every read,
    // for a step and the upstream timeout): the other read once, when the
    // holder announced the final result, for all its ten watchers.
    assert_eq!(on_a.min(on_b), 1, "reads on A {on_a}, on B {on_b}");
    assert_eq!(on_a + on_b, reads);
    let holder = if on_a > 1 { a } else { b };
    assert_eq!(holder.gateway.watches().stats().fleet_results, 0);
    // The holder's reads are a jittered step apart (75-100 % of the
    // interval): at most one per interval, however many replicas watch.
    let polls = holder.gateway.watches().stats().result_reads;
    let bound = elapsed.as_secs_f64() / (0.75 * POLL.as_secs_f64()) + 1.0;
    assert!(
        (polls as f64) <= bound,
        "{polls} reads in {elapsed:?}: more than one per {POLL:?} interval"
    );
    fleet.stop().await;
}

/// A rolling upgrade from the release that shared final results on
/// Redis: a replica of that release holds the journey's read turn (for
/// ten minutes here, so only its word can end the watch within the wait),
/// reads the result, writes it sealed to `{p}result:<ref>` and announces
/// it. The upgraded replica, whose watcher heard the webhook but could
/// not take the turn, reads the result itself on that word, once, and
/// never needs the shared copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ends_on_the_word_of_a_replica_of_the_previous_release_holding_the_read_turn() {
    const OLD_REPLICA: &str = "a-replica-of-the-previous-release";
    let fleet = Fleet::start(1, 30).await;
    let b = &fleet.replicas[0];
    let created = b.create_journey_for(happy_person()).await;
    let watcher = b.watch(by_ref(&created.journey_ref)).await;
    fleet.finish_journey(0, &created).await;
    let mut conn = fleet.redis.client().await;
    let () = redis::cmd("SET")
        .arg(format!("idgate:turn:{}", created.journey_ref))
        .arg(OLD_REPLICA)
        .arg("PX")
        .arg(600_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let reads_before = fleet.result_reads();
    assert_eq!(
        b.post_notice("Completo", &created.appkey, None).await.0,
        202
    );
    // The old replica's copy: nothing an upgraded replica opens.
    let () = redis::cmd("SET")
        .arg(format!("idgate:result:{}", created.journey_ref))
        .arg("c2VhbGVkIGJ5IHRoZSBwcmV2aW91cyByZWxlYXNl")
        .query_async(&mut conn)
        .await
        .unwrap();
    let word = serde_json::json!({
        "origin": OLD_REPLICA,
        "sent_ms": 0,
        "kind": "notice",
        "journey_ref": created.journey_ref,
        "status": "complete",
        "delivery": "result-read",
    });
    let _: String = redis::cmd("XADD")
        .arg("idgate:{fleet}:events")
        .arg("*")
        .arg("m")
        .arg(word.to_string())
        .query_async(&mut conn)
        .await
        .unwrap();
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    assert_eq!(fleet.result_reads() - reads_before, 1, "read here, once");
    assert_eq!(b.gateway.watches().stats().fleet_results, 1);
    fleet.stop().await;
}
