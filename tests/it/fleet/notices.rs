//! Completion notices across a fleet: a notice posted to any replica ends
//! the watches on every other, with one result read per replica holding
//! watchers (never one per watcher, none where nobody watches), and a
//! delivery seen once is a duplicate on every replica. A replica cut off from Redis reads, once back, the notices
//! and control changes it missed, and one started without Redis those
//! appended since it started.

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, assert_complete},
    gateway::{by_appkey, by_ref, drain_within, happy_person},
    proxy::CutProxy,
    wait::eventually,
};
use idgate::{cluster::DeliveryKey, testing::GatewayParts as _};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_one_replica_ends_the_watches_on_the_others_with_one_read_per_watching_replica()
 {
    // A 30 s grace, longer than the wait below (which only bounds a
    // hang): only the fanned-out notice can end these watches.
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    let created = a.create_journey_for(happy_person()).await;

    // Two watchers on B, one on C, opened before the liveness proof: they
    // wait for the notice.
    let b1 = b.watch(by_ref(&created.journey_ref)).await;
    let b2 = b.watch(by_appkey(&created.appkey)).await;
    let c1 = c.watch(by_appkey(&created.appkey)).await;
    fleet.finish_journey(0, &created).await;
    let reads_before = fleet.result_reads();

    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_fleet_1"))
            .await,
        (202, "accepted".to_owned())
    );
    for stream in [b1, b2, c1] {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }
    assert_eq!(
        fleet.result_reads() - reads_before,
        2,
        "one result read on B and one on C (each for its own watchers), none on A, none per watcher"
    );

    // The same delivery again, to B: not processed again anywhere.
    assert_eq!(
        b.post_notice("Completo", &created.appkey, Some("msg_fleet_1"))
            .await,
        (202, "duplicate".to_owned())
    );
    // Not fanned out again: the fleet's stream holds the delivery once
    // (the replicas' own counts of notices also take the announcements of
    // the final result, one or two here).
    let delivery = DeliveryKey::Id("msg_fleet_1".into()).digest();
    let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg("idgate:{fleet}:events")
        .arg("-")
        .arg("+")
        .query_async(&mut fleet.redis.client().await)
        .await
        .unwrap();
    let fanned_out = entries
        .ids
        .iter()
        .flat_map(|e| e.map.values())
        .filter(|v| matches!(v, redis::Value::BulkString(m) if String::from_utf8_lossy(m).contains(&delivery)))
        .count();
    assert_eq!(fanned_out, 1, "the delivery fanned out once");
    let other = b.create_journey_for(happy_person()).await;
    assert_eq!(b.post_notice("Erro", &other.appkey, None).await.0, 202);
    assert_eq!(
        b.metric("idgate_webhooks_total{outcome=\"duplicate\"}")
            .await,
        1.0
    );
    assert_eq!(
        fleet.result_reads() - reads_before,
        2,
        "no read for the duplicate"
    );
    // Without a webhook-id, the same journey and status is the duplicate.
    assert_eq!(
        c.post_notice("Erro", &other.appkey, None).await,
        (202, "duplicate".to_owned())
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_redis_ends_once_back_the_watches_whose_notices_came_meanwhile() {
    // A 600 s grace: no watcher polls within the test; only the event
    // stream can end B's watches.
    let mut fleet = Fleet::start(1, 600).await;
    let proxy = CutProxy::start(([127, 0, 0, 1], fleet.redis.port()).into()).await;
    let url = proxy.redis_url();
    let b = fleet
        .add_replica_with(|c| c.cluster.redis_url = Some(url))
        .await;
    fleet.all_up().await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[b]);
    let mut journeys = Vec::new();
    for _ in 0..3 {
        journeys.push(a.create_journey_for(happy_person()).await);
    }
    // Watched before the proofs: the watches wait for their notices.
    let mut watchers = Vec::new();
    for journey in &journeys {
        watchers.push(b.watch(by_appkey(&journey.appkey)).await);
    }
    for journey in &journeys {
        fleet.finish_journey(0, journey).await;
    }

    // B loses its path to Redis; A and Redis go on.
    proxy.cut();
    eventually("B sees Redis gone", EVENT_WAIT, async || {
        !b.gateway.shared_state().is_up()
    })
    .await;
    let heard = b.gateway.watches().stats().notices_received;
    for (i, journey) in journeys.iter().enumerate() {
        assert_eq!(
            a.post_notice("Completo", &journey.appkey, Some(&format!("msg_cut_{i}")))
                .await,
            (202, "accepted".to_owned())
        );
    }
    a.drain("primary").await.expect("A drains with Redis up");
    // B tries to come back and is refused while the events wait in Redis:
    // at least once after they were appended, and six times in all (with
    // its backoff doubling from 50 ms, some 3 s cut off).
    let refused = proxy.refused();
    eventually("B retries and is refused", EVENT_WAIT, async || {
        proxy.refused() > refused && proxy.refused() >= 6
    })
    .await;
    assert_eq!(
        b.gateway.watches().stats().notices_received,
        heard,
        "B heard nothing while cut off"
    );
    assert!(!b.drained("primary").await);

    proxy.restore();
    for stream in watchers {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }
    assert_eq!(
        b.gateway.watches().stats().notices_received,
        heard + 3,
        "each missed notice read once"
    );
    eventually("B applies the drain it missed", EVENT_WAIT, async || {
        b.drained("primary").await
    })
    .await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_without_redis_ends_once_connected_the_watches_whose_notices_came_first()
{
    // A 600 s grace, as above: only the event stream can end the watch.
    let mut fleet = Fleet::start(1, 600).await;
    let proxy = CutProxy::start(([127, 0, 0, 1], fleet.redis.port()).into()).await;
    proxy.cut();
    let url = proxy.redis_url();
    let b = fleet
        .add_replica_with(|c| c.cluster.redis_url = Some(url))
        .await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[b]);
    assert!(!b.gateway.shared_state().is_up(), "B starts without Redis");

    let journey = a.create_journey_for(happy_person()).await;
    let watcher = b.watch(by_appkey(&journey.appkey)).await;
    fleet.finish_journey(0, &journey).await;
    assert_eq!(
        a.post_notice("Completo", &journey.appkey, Some("msg_before_b"))
            .await,
        (202, "accepted".to_owned())
    );
    let refused = proxy.refused();
    eventually("B retries and is refused", EVENT_WAIT, async || {
        proxy.refused() > refused
    })
    .await;

    proxy.restore();
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    fleet.stop().await;
}
