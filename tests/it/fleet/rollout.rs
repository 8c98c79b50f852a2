//! The guarded rollout in a fleet: its record, step and verdicts on
//! Redis, its driver under a lease. The replica driving the steps is
//! stopped mid-rollout; its lease runs out and another replica carries the
//! rollout on to its end.

use idgate::proto::v1::RolloutState;

use crate::{
    gateway::rollout::quick_rollouts,
    support::{
        fleet::Fleet,
        rollout::{drive_until, ended, start_request},
    },
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_driving_replica_stops_mid_rollout_another_replica_carries_it_to_its_end() {
    let mut fleet = Fleet::start(0, 1).await;
    // The first replica alone when the rollout starts: it takes the lease.
    fleet.add_replicas_with(1, quick_rollouts).await;
    let started = fleet.replicas[0]
        .start_rollout(start_request(&[25, 50, 100], 20))
        .await
        .expect("rollout started");
    let first_driver = started.driver.clone();
    fleet.add_replicas_with(1, quick_rollouts).await;

    let mut next = 0;
    let gateways: Vec<_> = fleet.replicas.iter().collect();
    let r = drive_until(&gateways, &mut next, "the first step passes", |r| {
        r.step >= 1 || ended(r)
    })
    .await;
    assert_eq!(r.state(), RolloutState::Running, "{r:?}");
    assert_eq!(r.driver, first_driver, "the first replica drove step 1");

    let driver = fleet.replicas.remove(0);
    driver.stop().await;
    let survivor = &fleet.replicas[0];
    let r = drive_until(&[survivor], &mut next, "the rollout ends", ended).await;
    assert_eq!(r.state(), RolloutState::Completed, "{r:?}");
    assert_ne!(
        r.driver, first_driver,
        "another replica drove the last steps"
    );
    let weights: Vec<u32> = r.verdicts.iter().map(|v| v.weight).collect();
    assert_eq!(weights, [25, 50, 100], "every step judged once");
    assert_eq!(
        survivor.list_channels().await.weights,
        crate::support::gateway::weights(&[("primary", 0), ("alternative", 100)])
    );
    fleet.stop().await;
}
