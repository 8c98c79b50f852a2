//! Routing control is the fleet's: a drain, a mode or a weighted split set
//! on one replica applies to every replica within the fleet bound, and to
//! a replica started later from its first call; a contingency hold started
//! on one replica steers every replica to the alternative channel.

use idgate::testing::GatewayParts as _;
use std::collections::BTreeMap;

use idgate::{domain::Operation, proto::v1};

use super::EVENT_WAIT;
use crate::support::{
    fleet::Fleet,
    gateway::{TestGateway, happy_person},
    wait::eventually,
};

impl TestGateway {
    /// The weighted split this replica routes by, as `name=weight` text.
    async fn split(&self) -> String {
        let listed = self.list_channels().await;
        if listed.mode() != v1::RoutingMode::Weighted {
            return String::new();
        }
        let entries: Vec<String> = listed
            .weights
            .iter()
            .map(|w| format!("{}={}", w.channel, w.weight))
            .collect();
        entries.join(",")
    }

    /// A journey of its own (a customer reference per journey).
    async fn own_journey(&self, i: usize) -> String {
        self.create_journey_for(v1::CreateJourneyRequest {
            customer_reference: format!("FLEETW{i:04}"),
            ..happy_person()
        })
        .await
        .appkey
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_or_mode_change_on_one_replica_applies_to_all_and_to_a_replica_started_later() {
    let mut fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert!(
        a.list_channels().await.fleet_control,
        "the mode and drains are the fleet's"
    );

    a.drain("primary").await.expect("drain on A");
    eventually("B and C see the drain", EVENT_WAIT, async || {
        b.drained("primary").await && c.drained("primary").await
    })
    .await;
    for r in [b, c] {
        let created = r.create_journey_for(happy_person()).await;
        let s = r.start_3d(&created.appkey).await.expect("start 3D");
        assert_eq!(
            s.channel, "alternative",
            "no new session on the drained channel"
        );
    }

    // A mode set on C applies to A and B.
    c.try_set_mode(v1::RoutingMode::ForceAlternative)
        .await
        .expect("mode on C");
    eventually("A and B take the mode", EVENT_WAIT, async || {
        a.list_channels().await.mode() == v1::RoutingMode::ForceAlternative
            && b.list_channels().await.mode() == v1::RoutingMode::ForceAlternative
    })
    .await;

    // A replica started now serves with the fleet's state from its first call.
    let d = fleet.add_replica().await;
    let d = &fleet.replicas[d];
    let listed = d.list_channels().await;
    assert!(listed.fleet_control);
    assert_eq!(listed.mode(), v1::RoutingMode::ForceAlternative);
    assert!(d.drained("primary").await);
    let created = d.create_journey_for(happy_person()).await;
    assert_eq!(
        d.start_3d(&created.appkey).await.unwrap().channel,
        "alternative"
    );

    // And an undrain from the newcomer reaches everyone.
    d.try_set_mode(v1::RoutingMode::Auto).await.unwrap();
    d.undrain("primary").await.unwrap();
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    eventually("A, B and C see the undrain", EVENT_WAIT, async || {
        !a.drained("primary").await && !b.drained("primary").await && !c.drained("primary").await
    })
    .await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contingency_hold_started_on_one_replica_steers_every_replica_to_the_alternative() {
    let fleet = Fleet::start(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    fleet.sandbox.set_contingency("primary", true).unwrap();
    let created = a.create_journey_for(happy_person()).await;
    let s = a.start_3d(&created.appkey).await.unwrap();
    assert_eq!((s.channel.as_str(), s.contingency), ("primary", true));
    fleet.sandbox.set_contingency("primary", false).unwrap();

    eventually("B and C hold off the primary", EVENT_WAIT, async || {
        b.gateway.router().snapshot().contingency_hold_active
            && c.gateway.router().snapshot().contingency_hold_active
    })
    .await;
    for r in [b, c] {
        let created = r.create_journey_for(happy_person()).await;
        assert_eq!(
            r.start_3d(&created.appkey).await.unwrap().channel,
            "alternative"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_split_set_on_one_replica_applies_to_all_and_a_journey_picks_the_same_channel_on_each()
 {
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.set_weighted(&[("primary", 50), ("alternative", 50)])
        .await
        .expect("weighted mode on A");
    eventually("B takes the split", EVENT_WAIT, async || {
        b.split().await == "primary=50,alternative=50"
    })
    .await;

    let mut on_primary = None;
    let mut seen = BTreeMap::new();
    for i in 0..40 {
        let appkey = a.own_journey(i).await;
        let first = a.start_3d(&appkey).await.expect("start on A");
        let again = b.start_3d(&appkey).await.expect("start on B");
        assert_eq!(first.channel, again.channel, "one journey, one channel");
        *seen.entry(first.channel.clone()).or_insert(0) += 1;
        if first.channel == "primary" {
            on_primary = Some((appkey, again.session_token));
        }
    }
    assert_eq!(seen.len(), 2, "both channels get a share: {seen:?}");

    // New weights from B reach A; new sessions follow them, a started
    // session still verifies on its channel.
    b.set_weighted(&[("primary", 0), ("alternative", 1)])
        .await
        .expect("weights on B");
    eventually("A takes the new weights", EVENT_WAIT, async || {
        a.split().await == "primary=0,alternative=1"
    })
    .await;
    for i in 100..110 {
        let appkey = a.own_journey(i).await;
        assert_eq!(a.start_3d(&appkey).await.unwrap().channel, "alternative");
    }
    let (appkey, token) = on_primary.expect("a session on the primary");
    let before = fleet.sandbox.calls(Operation::Liveness3D, Some("primary"));
    let verdict = a.verify_3d(&appkey, &token, "").await.expect("verify");
    assert!(verdict.valid);
    assert_eq!(
        fleet.sandbox.calls(Operation::Liveness3D, Some("primary")),
        before + 1
    );
    fleet.stop().await;
}
