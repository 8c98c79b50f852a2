//! The guarded rollout in a fleet: its record, step and verdicts on
//! Redis, its driver under a lease. The replica driving the steps is
//! stopped mid-rollout; its lease runs out and another replica carries the
//! rollout on to its end. A probe's verdict is the fleet's too.

use idgate::{
    domain::Operation,
    proto::v1::{self, RolloutState},
    sandbox::{FaultAction, FaultRule},
};
use tonic::Code;

use crate::{
    gateway::{probe::with_probe_person, rollout::quick_rollouts},
    support::{
        fleet::Fleet,
        gateway::assert_error,
        rollout::{drive_until, ended, start_request},
    },
};

/// [`quick_rollouts`] with a lease of 5 s: renewed every 50 ms round, it
/// is lost only by a replica that stops, never by one a loaded machine
/// delays for half a second (a 500 ms lease was: the second replica took
/// it before step 1 in a run beside two `yes`).
fn leased_rollouts(c: &mut idgate::config::Config) {
    quick_rollouts(c);
    c.rollout.lease_ms = 5_000;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_driving_replica_stops_mid_rollout_another_replica_carries_it_to_its_end() {
    let mut fleet = Fleet::start(0, 1).await;
    // The first replica alone when the rollout starts: it takes the lease.
    fleet.add_replicas_with(1, leased_rollouts).await;
    let started = fleet.replicas[0]
        .start_rollout(start_request(&[25, 50, 100], 20))
        .await
        .expect("rollout started");
    let first_driver = started.driver.clone();
    fleet.add_replicas_with(1, leased_rollouts).await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_that_fails_its_probe_on_one_replica_gets_no_weight_on_another() {
    let mut fleet = Fleet::start(0, 1).await;
    fleet.add_replicas_with(2, with_probe_person).await;
    fleet
        .sandbox
        .add_fault(
            FaultRule::new(FaultAction::WrongShape)
                .on(Operation::SessionToken3D)
                .channel("alternative"),
        )
        .expect("fault");
    let report = fleet.replicas[0]
        .admin()
        .await
        .probe_channel(v1::ProbeChannelRequest {
            name: "alternative".into(),
            consume: false,
        })
        .await
        .expect("probe")
        .into_inner();
    assert!(!report.conforming, "{report:?}");

    let refused = fleet.replicas[1]
        .start_rollout(start_request(&[50, 100], 10))
        .await
        .expect_err("refused on the other replica");
    assert_error(&refused, Code::FailedPrecondition, "CHANNEL_NOT_CONFORMING");
    assert!(fleet.replicas[1].rollout().await.is_none());
    fleet.stop().await;
}
