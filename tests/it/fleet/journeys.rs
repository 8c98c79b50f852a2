//! A journey belongs to the fleet, not to the replica that created it: its
//! reference and its 3D session resolve on any other replica, and a wrong
//! channel hint is refused by the fleet's binding before any call.

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, assert_complete},
    gateway::{TestGateway, assert_error, by_ref, drain_within, happy_person, retryable},
};
use idgate::{config::Config, domain::Operation};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journey_refs_and_3d_sessions_resolve_on_a_replica_other_than_the_creator() {
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    let created = a.create_journey_for(happy_person()).await;
    // The session starts on A; C verifies it without a channel hint.
    let s = a.start_3d(&created.appkey).await.expect("start on A");
    // A wrong hint on B is refused by the fleet's binding, before sending.
    let wrong = if s.channel == "primary" {
        "alternative"
    } else {
        "primary"
    };
    let err = b
        .verify_3d(&created.appkey, &s.session_token, wrong)
        .await
        .unwrap_err();
    assert_error(&err, tonic::Code::FailedPrecondition, "CHANNEL_MISMATCH");
    assert!(!retryable(&err), "docs/api.md: not retryable");
    let v = c
        .verify_3d(&created.appkey, &s.session_token, "")
        .await
        .expect("verify on C with no hint");
    assert!(v.valid);
    assert_eq!(
        fleet.sandbox.calls(Operation::Liveness3D, Some(&s.channel)),
        1
    );

    // WatchJourney by reference on B, a journey B never saw.
    a.submit_rg(&created.appkey).await;
    let watcher = b.watch(by_ref(&created.journey_ref)).await;
    fleet.finish_processing();
    assert_eq!(
        a.post_notice("Completo", &created.appkey, None).await.0,
        202
    );
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    assert_eq!(items.last().unwrap().journey_ref, created.journey_ref);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_asks_the_fleet_once_for_a_journey_it_did_not_create_and_remembers_it() {
    let mut fleet = Fleet::start(1, 30).await;
    let b = fleet.add_replica_with(quiet_rollout).await;
    let a = &fleet.replicas[0];
    let (first, created) = (
        a.create_journey_for(happy_person()).await,
        a.create_journey_for(happy_person()).await,
    );
    let b = &fleet.replicas[b];
    b.start_3d(&first.appkey)
        .await
        .expect("a first journey on B");
    let (gets, outcomes) = gets_for_calls(b, &created.appkey, 3).await;
    for outcome in outcomes {
        outcome.expect("start on B");
    }
    assert_eq!(
        gets, 1.0,
        "one directory read for three calls on the same journey"
    );
    fleet.stop().await;
}

/// A replica of `fleet` on its Redis that reads the rollout record only
/// once an hour, so that every GET it counts is a call's.
fn quiet_rollout(c: &mut Config) {
    c.rollout.tick_ms = 1_800_000;
    c.rollout.lease_ms = 3_600_000;
}

/// `calls` StartSession3D on `replica` with `appkey`; returns the Redis
/// GETs they cost and each call's outcome.
async fn gets_for_calls(
    replica: &TestGateway,
    appkey: &str,
    calls: usize,
) -> (f64, Vec<Result<(), tonic::Status>>) {
    let gets = async || {
        replica
            .metric(r#"idgate_cluster_operations_total{command="GET",outcome="ok"}"#)
            .await
    };
    let before = gets().await;
    let mut outcomes = Vec::with_capacity(calls);
    for _ in 0..calls {
        outcomes.push(replica.start_3d(appkey).await.map(drop));
    }
    (gets().await - before, outcomes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_appkey_the_fleet_did_not_issue_costs_one_redis_read_per_replica_within_unknown_ttl() {
    let mut fleet = Fleet::start(1, 30).await;
    // Another fleet on the same vendor account and Redis (its own key
    // prefix) issues the appkey: foreign to this fleet.
    let other = fleet
        .add_replica_with(|c: &mut Config| c.cluster.key_prefix = "other:".into())
        .await;
    let foreign = fleet.replicas[other]
        .create_journey_for(happy_person())
        .await
        .appkey;
    let accepting = fleet
        .add_replica_with(|c: &mut Config| {
            quiet_rollout(c);
            c.journeys.accept_foreign_appkeys = true;
        })
        .await;
    let refusing = fleet.add_replica_with(quiet_rollout).await;
    let asking_always = fleet
        .add_replica_with(|c: &mut Config| {
            quiet_rollout(c);
            c.journeys.accept_foreign_appkeys = true;
            c.journeys.unknown_ttl_secs = 0;
        })
        .await;

    let (gets, outcomes) = gets_for_calls(&fleet.replicas[accepting], &foreign, 3).await;
    for outcome in outcomes {
        outcome.expect("an accepted foreign appkey reaches the vendor");
    }
    assert_eq!(gets, 1.0, "one directory read for three calls");

    let (gets, outcomes) = gets_for_calls(&fleet.replicas[refusing], &foreign, 3).await;
    for outcome in outcomes {
        assert_error(
            &outcome.unwrap_err(),
            tonic::Code::NotFound,
            "JOURNEY_UNKNOWN",
        );
    }
    assert_eq!(gets, 1.0, "refused three times on one directory read");

    let (gets, outcomes) = gets_for_calls(&fleet.replicas[asking_always], &foreign, 3).await;
    for outcome in outcomes {
        outcome.expect("accepted");
    }
    assert_eq!(gets, 3.0, "unknown_ttl_secs = 0 asks Redis every call");

    // A journey of this fleet is found on the refusing replica at once,
    // whatever it remembered of other appkeys.
    let own = fleet.replicas[0].create_journey_for(happy_person()).await;
    fleet.replicas[refusing]
        .start_3d(&own.appkey)
        .await
        .expect("a journey of the fleet");
    fleet.stop().await;
}
