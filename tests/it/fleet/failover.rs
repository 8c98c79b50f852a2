//! A fleet on a Sentinel-managed Redis outlives its master: when the
//! master dies mid-run (and with it the first sentinel listed) and the
//! sentinels promote its replica, every replica finds the new master by
//! itself (no restart), and journeys,
//! watchers, idempotent creation and admin changes work on it, with no
//! consuming call sent to the vendor twice.

use idgate::domain::Operation;

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, FleetRedis, assert_complete},
    gateway::{by_ref, drain_within, happy_person},
    redis_sentinel::RedisSentinelSet,
    wait::eventually,
};

/// Calls the sandbox received for `op`, on every channel.
pub(super) fn calls_of<R: FleetRedis>(fleet: &Fleet<R>, op: Operation) -> u64 {
    fleet
        .sandbox
        .all_calls()
        .iter()
        .filter(|c| c.operation == op.as_str())
        .map(|c| c.count)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_sentinel_master_dies_journeys_watchers_and_admin_changes_work_with_no_consuming_call_sent_twice()
 {
    let set = tokio::task::block_in_place(RedisSentinelSet::start);
    // A 30 s grace: only a fanned-out notice ends a watch in time.
    let mut fleet = Fleet::start_on(set, 3, 30).await;

    // Before the failover: a finished journey watched on C, a fleet drain.
    // Watched before its proof: the watch waits for the notice.
    let first = fleet.replicas[0].create_journey_for(happy_person()).await;
    let watcher = fleet.replicas[2].watch(by_ref(&first.journey_ref)).await;
    fleet.finish_journey(0, &first).await;
    fleet.replicas[1]
        .drain("alternative")
        .await
        .expect("drain before the failover");
    eventually("A and C see the drain", EVENT_WAIT, async || {
        fleet.replicas[0].drained("alternative").await
            && fleet.replicas[2].drained("alternative").await
    })
    .await;
    tokio::task::block_in_place(|| fleet.redis.sync_replica());

    // The first sentinel every replica lists dies too: they ask the next.
    fleet.redis.kill_sentinel(0);
    fleet.redis.kill_master();
    fleet.all_down().await;
    tokio::task::block_in_place(|| fleet.redis.wait_for_failover());
    fleet.all_up().await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    // The watch opened before the failover ends on a notice posted after.
    assert_eq!(a.post_notice("Completo", &first.appkey, None).await.0, 202);
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);

    // The drain survived; an admin change after it reaches every replica.
    assert!(c.drained("alternative").await);
    c.undrain("alternative")
        .await
        .expect("undrain after the failover");
    eventually("A and B see the undrain", EVENT_WAIT, async || {
        !a.drained("alternative").await && !b.drained("alternative").await
    })
    .await;

    // Idempotent creation on the new master: one request_id, two
    // replicas, one journey.
    let request = idgate::proto::v1::CreateJourneyRequest {
        request_id: "6f1c2a9e-4b7d-4c1e-9a55-0d3e8f7b2c11".into(),
        ..happy_person()
    };
    let second = b.create_journey_for(request.clone()).await;
    let again = c.create_journey_for(request).await;
    assert_eq!(again.journey_ref, second.journey_ref);
    assert_eq!(again.appkey, second.appkey);

    // A whole journey: session on A, verified on B without a hint (the
    // binding is on the new master), watched by reference on C.
    let session = a.start_3d(&second.appkey).await.expect("start on A");
    assert!(
        b.verify_3d(&second.appkey, &session.session_token, "")
            .await
            .expect("verify on B with no hint")
            .valid
    );
    b.submit_rg(&second.appkey).await;
    let watcher = c.watch(by_ref(&second.journey_ref)).await;
    fleet.finish_processing();
    assert_eq!(b.post_notice("Completo", &second.appkey, None).await.0, 202);
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);

    // Each consuming call went to the vendor once: two journeys, two 3D
    // verdicts, two document submissions.
    assert_eq!(calls_of(&fleet, Operation::Appkey), 2);
    assert_eq!(calls_of(&fleet, Operation::Liveness3D), 2);
    assert_eq!(calls_of(&fleet, Operation::DocumentImages), 2);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sentinel_switchover_the_demoted_master_is_left_and_admin_changes_reach_every_replica()
 {
    let set = tokio::task::block_in_place(RedisSentinelSet::start);
    let fleet = Fleet::start_on(set, 2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.drain("alternative")
        .await
        .expect("drain before the switchover");
    eventually("B sees the drain", EVENT_WAIT, async || {
        b.drained("alternative").await
    })
    .await;
    tokio::task::block_in_place(|| fleet.redis.sync_replica());

    // The old master stays up, demoted to a replica (Sentinel drops its
    // clients): each replica must leave it for the promoted one, whose
    // address only the sentinels tell.
    tokio::task::block_in_place(|| {
        fleet.redis.switch_over();
        fleet.redis.wait_for_failover();
    });
    eventually(
        "an undrain on B is applied (refused, never half-applied, until B follows the new master)",
        EVENT_WAIT,
        async || b.undrain("alternative").await.is_ok(),
    )
    .await;
    eventually("A sees the undrain", EVENT_WAIT, async || {
        !a.drained("alternative").await
    })
    .await;
    // A journey created after it resolves on the other replica.
    let created = a.create_journey_for(happy_person()).await;
    let session = a.start_3d(&created.appkey).await.expect("start on A");
    assert!(
        b.verify_3d(&created.appkey, &session.session_token, "")
            .await
            .expect("verify on B with no hint")
            .valid
    );
    fleet.stop().await;
}
