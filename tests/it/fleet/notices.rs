//! Completion notices across a fleet: a notice posted to any replica ends
//! the watches on every other, with one result read
//! per watching replica, and a delivery seen once is a duplicate on every
//! replica.

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, assert_complete},
    gateway::{by_appkey, by_ref, drain_within, happy_person},
    wait::eventually,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_one_replica_ends_the_watches_on_the_others_with_one_read_per_replica() {
    // A 30 s grace, longer than the wait below (which only bounds a
    // hang): only the fanned-out notice can end these watches.
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    let created = fleet.finished_journey(0).await;
    let reads_before = fleet.result_reads();

    // Two watchers on B (one result read serves both), one on C.
    let b1 = b.watch(by_ref(&created.journey_ref)).await;
    let b2 = b.watch(by_appkey(&created.appkey)).await;
    let c1 = c.watch(by_appkey(&created.appkey)).await;

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
        "one result read per watching replica (B and C), none on A, none per watcher"
    );

    // The same delivery again, to B: not processed again anywhere.
    assert_eq!(
        b.post_notice("Completo", &created.appkey, Some("msg_fleet_1"))
            .await,
        (202, "duplicate".to_owned())
    );
    // A later, distinct notice posted to B reaches C; had the duplicate
    // been fanned out, C would have heard one more (pub/sub keeps order).
    let heard_on_c = c.gateway.hub().stats().notices_received;
    let other = b.create_journey_for(happy_person()).await;
    assert_eq!(b.post_notice("Erro", &other.appkey, None).await.0, 202);
    eventually("C hears the later notice", EVENT_WAIT, async || {
        c.gateway.hub().stats().notices_received > heard_on_c
    })
    .await;
    assert_eq!(c.gateway.hub().stats().notices_received, heard_on_c + 1);
    assert_eq!(
        b.gateway.hub().stats().notices_received,
        2,
        "B: the first (fleet) and its own"
    );
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
