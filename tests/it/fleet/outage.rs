//! The fleet without its Redis: with Redis stopped, core RPCs keep
//! working, fleet-wide admin changes are refused (applied nowhere) and
//! watchers still finish; once Redis is back the replicas converge without
//! a restart. A replica with the wrong Redis password behaves the same,
//! and so does one without the password of sentinels that require one.

use idgate::proto::v1;
use idgate::testing::GatewayParts as _;

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, assert_complete},
    gateway::{
        assert_error, by_appkey, by_ref, drain_within, happy_person, retryable, secret_file,
    },
    redis::RedisServer,
    redis_sentinel::SentinelPair,
    wait::eventually,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_stopped_core_rpcs_work_admin_changes_are_refused_and_the_fleet_converges_after()
{
    // A 1 s grace: with Redis down, watchers on other replicas poll.
    let mut fleet = Fleet::start(3, 1).await;
    assert_eq!(fleet.replicas[0].metric("idgate_cluster_up").await, 1.0);

    let created = fleet.replicas[1].create_journey_for(happy_person()).await;
    fleet.stop_redis().await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert_eq!(a.metric("idgate_cluster_up").await, 0.0);

    // No new journey the fleet could not record (its appkey would be
    // foreign everywhere else): refused before any vendor call.
    let before = fleet.appkey_calls();
    let err = a
        .journeys()
        .create_journey(happy_person())
        .await
        .expect_err("no journey without Redis");
    assert_error(&err, tonic::Code::Unavailable, "CLUSTER_UNAVAILABLE");
    assert!(retryable(&err), "docs/api.md: retry when Redis is back");
    assert_eq!(fleet.appkey_calls(), before);

    // Core RPCs on a live journey: liveness (with the hint), documents,
    // result.
    assert!(b.pass_3d(&created.appkey).await.valid);
    b.submit_rg(&created.appkey).await;
    fleet.finish_processing();
    b.result(&created.appkey)
        .await
        .expect("result with Redis down");

    // Admin changes are refused, and applied nowhere.
    for err in [
        a.drain("primary").await.unwrap_err(),
        b.try_set_mode(v1::RoutingMode::ForceAlternative)
            .await
            .unwrap_err(),
        c.undrain("alternative").await.unwrap_err(),
    ] {
        assert_error(&err, tonic::Code::Unavailable, "CLUSTER_UNAVAILABLE");
        assert!(retryable(&err), "docs/api.md: retry when Redis is back");
    }
    assert!(!a.drained("primary").await);
    assert_eq!(b.list_channels().await.mode(), v1::RoutingMode::Auto);

    // Watchers still finish: B by its own notice, C by polling.
    let on_b = b.watch(by_appkey(&created.appkey)).await;
    let on_c = c.watch(by_appkey(&created.appkey)).await;
    assert_eq!(
        b.post_notice("Completo", &created.appkey, None).await.0,
        202
    );
    for stream in [on_b, on_c] {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }

    // Redis returns (empty): the replicas reconnect and converge.
    fleet.redis.restart();
    fleet.all_up().await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    assert_eq!(a.metric("idgate_cluster_up").await, 1.0);
    a.drain("primary").await.expect("drain once Redis is back");
    eventually("B and C see the drain", EVENT_WAIT, async || {
        b.drained("primary").await && c.drained("primary").await
    })
    .await;
    let again = a.create_journey_for(happy_person()).await;
    let watcher = c.watch(by_ref(&again.journey_ref)).await;
    drop(watcher);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_protected_redis_admits_replicas_with_the_password_only() {
    let redis = RedisServer::start_with(Some("fleet-redis-password-0c41"));
    let mut fleet = Fleet::start_on(redis, 2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.drain("primary").await.expect("drain with the password");
    eventually("B sees the drain", EVENT_WAIT, async || {
        b.drained("primary").await
    })
    .await;

    // A replica with the wrong password starts, on its own state, and
    // refuses fleet-wide changes rather than applying them alone.
    fleet.password = Some("not-the-password".into());
    let c = fleet.add_replica().await;
    let c = &fleet.replicas[c];
    assert!(!c.gateway.shared_state().is_up());
    assert!(!c.list_channels().await.fleet_control);
    let err = c.undrain("primary").await.unwrap_err();
    assert_error(&err, tonic::Code::Unavailable, "CLUSTER_UNAVAILABLE");
    assert!(retryable(&err), "docs/api.md: retry when Redis is back");
    assert!(fleet.replicas[0].drained("primary").await);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_that_require_a_password_admit_replicas_with_it_only() {
    const PASSWORD: &str = "fleet-sentinel-password-7d2e";
    let pair = tokio::task::block_in_place(|| SentinelPair::start(None, Some(PASSWORD)));
    let mut fleet = Fleet::start_on(pair, 0, 30).await;
    let password = secret_file(PASSWORD);
    fleet
        .add_replicas_with(2, |c| {
            c.cluster.sentinel_password_file = Some(password.clone());
        })
        .await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.drain("primary")
        .await
        .expect("drain through the sentinel");
    eventually("B sees the drain", EVENT_WAIT, async || {
        b.drained("primary").await
    })
    .await;

    // Without the sentinels' password no master is named: the replica
    // starts on its own state and refuses fleet-wide changes.
    let c = fleet.add_replica().await;
    let c = &fleet.replicas[c];
    assert!(!c.gateway.shared_state().is_up());
    let err = c.undrain("primary").await.unwrap_err();
    assert_error(&err, tonic::Code::Unavailable, "CLUSTER_UNAVAILABLE");
    assert!(fleet.replicas[0].drained("primary").await);
    fleet.stop().await;
}
