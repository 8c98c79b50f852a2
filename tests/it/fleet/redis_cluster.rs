//! A fleet on a Redis Cluster (three masters, made with `redis-cli
//! --cluster create`): whole journeys across replicas, idempotent
//! creation, budgets counted fleet-wide by one script over several keys,
//! notices and admin changes fanned out on the event stream (read on a
//! cluster connection of each replica's own), vendor figures shared, with
//! the keys one script or `MULTI` touches together on one slot (their
//! hash tag) and the fleet's keys spread over the nodes.

use idgate::{domain::Operation, proto::v1, spend::BilledOperation};
use tonic::Code;

use super::{EVENT_WAIT, failover::calls_of};
use crate::{
    gateway::spend::budget,
    support::{
        fleet::{Fleet, assert_complete},
        gateway::{by_appkey, by_ref, drain_within, happy_person, reason},
        redis_cluster::RedisClusterSet,
        wait::eventually,
    },
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_three_master_redis_cluster_journeys_idempotent_creation_budgets_and_notices_work_across_replicas()
 {
    let set = tokio::task::block_in_place(RedisClusterSet::start);
    let mut fleet = Fleet::start_on(set, 0, 30).await;
    // Four journeys a minute and ten a day: each take is one script over
    // both windows' keys.
    fleet
        .add_replicas_with(3, |c| {
            c.budgets = vec![budget(
                "default",
                BilledOperation::CreateJourney,
                Some(4),
                Some(10),
            )];
        })
        .await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    // A whole journey: created on A, its 3D session verified on B without
    // a hint, documents on C, watched on B and C, the notice posted to A.
    let first = a.create_journey_for(happy_person()).await;
    let session = a.start_3d(&first.appkey).await.expect("start on A");
    assert!(
        b.verify_3d(&first.appkey, &session.session_token, "")
            .await
            .expect("verify on B with no hint")
            .valid
    );
    c.submit_rg(&first.appkey).await;
    let on_b = b.watch(by_ref(&first.journey_ref)).await;
    let on_c = c.watch(by_appkey(&first.appkey)).await;
    fleet.finish_processing();
    assert_eq!(
        a.post_notice("Completo", &first.appkey, Some("msg_cluster_1"))
            .await,
        (202, "accepted".to_owned())
    );
    for stream in [on_b, on_c] {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }
    assert_eq!(
        c.post_notice("Completo", &first.appkey, Some("msg_cluster_1"))
            .await,
        (202, "duplicate".to_owned())
    );

    // An admin change on A reaches B and C.
    a.drain("alternative").await.expect("drain on a cluster");
    eventually("B and C see the drain", EVENT_WAIT, async || {
        b.drained("alternative").await && c.drained("alternative").await
    })
    .await;

    // One request_id on two replicas: one journey, one /appkey.
    let request = v1::CreateJourneyRequest {
        request_id: "0e7d5c3b-1a2f-4e6d-8b9c-7f1a2b3c4d5e".into(),
        ..happy_person()
    };
    let second = b.create_journey_for(request.clone()).await;
    let replayed = c.create_journey_for(request).await;
    assert_eq!(replayed.journey_ref, second.journey_ref);
    assert_eq!(replayed.appkey, second.appkey);

    // The budget is the fleet's: two more journeys, then every replica
    // refuses, before any call.
    c.create_journey_for(happy_person()).await;
    a.create_journey_for(happy_person()).await;
    for r in [a, b, c] {
        let err = r
            .journeys()
            .create_journey(happy_person())
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert_eq!(reason(&err), "BUDGET_EXCEEDED");
    }
    assert_eq!(calls_of(&fleet, Operation::Appkey), 4);
    assert_eq!(calls_of(&fleet, Operation::Liveness3D), 1);

    // The notice and the drain travelled on the event stream, in the
    // control keys' slot (one MULTI writes both).
    let events: Vec<redis::Value> = fleet.redis.query_owner(
        redis::cmd("XRANGE")
            .arg("idgate:{fleet}:events")
            .arg("-")
            .arg("+"),
    );
    assert!(
        events.len() >= 2,
        "the notice and the drain on the stream: {events:?}"
    );
    // Vendor figures reach their per-minute hash (one slot for them all).
    eventually("the figures' hash is written", EVENT_WAIT, async || {
        fleet
            .redis
            .keys()
            .iter()
            .any(|k| k.starts_with("idgate:{figures}:"))
    })
    .await;

    // Keys used together share a hash tag; the rest spread over nodes.
    let keys = fleet.redis.keys();
    for tagged in [
        "idgate:{fleet}:control:mode",
        "idgate:{fleet}:control:drained",
        "idgate:{fleet}:events",
        "idgate:{budget:default}:create_journey:minute",
        "idgate:{budget:default}:create_journey:day",
    ] {
        assert!(keys.iter().any(|k| k == tagged), "{tagged} in {keys:?}");
    }
    assert!(
        fleet.redis.nodes_with_keys() > 1,
        "the fleet's keys spread over the cluster: {keys:?}"
    );
    fleet.stop().await;
}
