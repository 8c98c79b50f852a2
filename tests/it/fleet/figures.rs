//! Vendor figures of a fleet: `idgate channels compare` through any one
//! replica counts every replica's calls (from Redis); with Redis down, a
//! replica answers with its own calls and says so, and the figures of
//! every replica given are summed as before; what was counted meanwhile
//! reaches Redis once it is back.

use idgate::cli::{channels::AdminTarget, compare};
use idgate::testing::GatewayParts as _;
use serde_json::Value;

use super::EVENT_WAIT;
use crate::support::{
    fleet::Fleet,
    gateway::{TestGateway, admin_token, happy_person},
    wait::eventually,
};

/// `idgate channels compare --json --window 1h` through `gateways`.
async fn compare_json(gateways: &[&TestGateway]) -> Value {
    let targets = gateways
        .iter()
        .map(|g| AdminTarget::from(&g.admin_addr()))
        .collect();
    let json = compare::compare(targets, &admin_token(), 3_600, true)
        .await
        .expect("compare --json");
    serde_json::from_str(&json).expect("JSON")
}

/// Sessions started and valid verdicts, every channel together.
fn totals(figures: &Value) -> (u64, u64) {
    let channels = figures["channels"].as_array().expect("channels");
    let sum = |field: &str| channels.iter().map(|c| c[field].as_u64().unwrap()).sum();
    (sum("sessions"), sum("valid"))
}

/// Sessions started and valid verdicts a replica counted itself.
fn own_totals(replica: &TestGateway) -> (u64, u64) {
    let window = replica.gateway.router().figures().window(60);
    (
        window.values().map(|t| t.sessions_started).sum(),
        window.values().map(|t| t.valid).sum(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_through_any_one_replica_counts_every_replicas_calls() {
    let mut fleet = Fleet::start(3, 30).await;
    // Replica i passes i + 1 liveness checks: 6 sessions, 6 valid in all.
    for (i, replica) in fleet.replicas.iter().enumerate() {
        for _ in 0..=i {
            let journey = replica.create_journey_for(happy_person()).await;
            assert!(replica.pass_3d(&journey.appkey).await.valid);
        }
    }
    let own: Vec<(u64, u64)> = fleet.replicas.iter().map(own_totals).collect();
    assert_eq!(own, [(1, 1), (2, 2), (3, 3)]);

    // Each replica adds its counts within a second; then any one answers
    // for all three.
    for replica in &fleet.replicas {
        let mut last = Value::Null;
        eventually(
            "the fleet's figures through one replica",
            EVENT_WAIT,
            async || {
                last = compare_json(&[replica]).await;
                totals(&last) == (6, 6)
            },
        )
        .await;
        assert_eq!(last["scope"], "fleet", "{last}");
        assert_eq!(last["gateways"], 1);
    }
    // Given every replica, the fleet's answer is taken once, not thrice.
    let all: Vec<&TestGateway> = fleet.replicas.iter().collect();
    let through_all = compare_json(&all).await;
    assert_eq!(through_all["scope"], "fleet");
    assert_eq!(totals(&through_all), (6, 6));

    // A journey for the outage below, created while Redis records it.
    let journey = fleet.replicas[0].create_journey_for(happy_person()).await;
    // Without Redis each replica answers with its own calls, and says so;
    // the sum over every replica is the fleet's again.
    fleet.stop_redis().await;
    let alone = compare_json(&[&fleet.replicas[1]]).await;
    assert_eq!(alone["scope"], "replicas", "{alone}");
    assert_eq!(totals(&alone), (2, 2));
    let all: Vec<&TestGateway> = fleet.replicas.iter().collect();
    let summed = compare_json(&all).await;
    assert_eq!(summed["scope"], "replicas");
    assert_eq!(totals(&summed), (6, 6));

    // A call counted while Redis was away is added once it is back (here
    // a Redis restarted empty: that call is all the fleet's figures hold).
    assert!(fleet.replicas[0].pass_3d(&journey.appkey).await.valid);
    fleet.redis.restart();
    fleet.all_up().await;
    let mut last = Value::Null;
    eventually("the queued call reaches Redis", EVENT_WAIT, async || {
        last = compare_json(&[&fleet.replicas[2]]).await;
        last["scope"] == "fleet" && totals(&last) == (1, 1)
    })
    .await;
    fleet.stop().await;
}
