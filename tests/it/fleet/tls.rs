//! A fleet on a Redis that speaks TLS only, on a certificate of the test's
//! own CA: one server (`rediss://`), one that also asks every client for a
//! certificate (`tls-auth-clients yes`), a master found through sentinels
//! that speak TLS only too (`rediss://` sentinels), or a Redis Cluster
//! whose nodes ask for a certificate. Replicas
//! given the CA (`[cluster] ca_file`), and where asked a client
//! certificate (`cert_file`, `key_file`), share notices and drains through
//! it; a replica without what the Redis asks does not reach it and
//! refuses fleet-wide changes.

use idgate::config::Config;
use idgate::testing::GatewayParts as _;

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, FleetRedis, assert_complete},
    gateway::{by_appkey, drain_within, happy_person, reason},
    redis::RedisServer,
    redis_cluster::RedisClusterSet,
    redis_sentinel::{SentinelPair, TlsFiles},
    tls::TestCa,
    wait::eventually,
};

/// Two replicas configured by `trusted` share a notice and a drain; a
/// third, configured by `refused`, is not up and refuses to undrain.
async fn two_share_and_a_third_is_refused<R: FleetRedis>(
    fleet: &mut Fleet<R>,
    trusted: impl Fn(&mut Config),
    refused: impl FnOnce(&mut Config),
) {
    fleet.add_replicas_with(2, trusted).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);

    // Watched before its proof: the watch waits for the notice.
    let created = a.create_journey_for(happy_person()).await;
    let watcher = b.watch(by_appkey(&created.appkey)).await;
    fleet.finish_journey(0, &created).await;
    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_tls"))
            .await,
        (202, "accepted".to_owned())
    );
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    a.drain("primary").await.expect("drain over TLS");
    eventually("B sees the drain", EVENT_WAIT, async || {
        b.drained("primary").await
    })
    .await;

    let c = fleet.add_replica_with(refused).await;
    let c = &fleet.replicas[c];
    assert!(!c.gateway.shared_state().is_up());
    let err = c.undrain("primary").await.unwrap_err();
    assert_eq!(reason(&err), "CLUSTER_UNAVAILABLE");
    assert!(fleet.replicas[0].drained("primary").await);
}

/// [`two_share_and_a_third_is_refused`] with the two given `ca`'s file
/// and the third trusting the system's roots, which do not know it.
async fn given_the_ca_two_share_and_the_systems_roots_are_refused<R: FleetRedis>(
    fleet: &mut Fleet<R>,
    ca: &TestCa,
) {
    let ca_file = ca.ca_file();
    two_share_and_a_third_is_refused(fleet, |c| c.cluster.ca_file = Some(ca_file.clone()), |_| {})
        .await;
}

/// [`two_share_and_a_third_is_refused`] with the two given `ca`'s file and
/// a client certificate of it, and the third the CA only, no certificate
/// to present.
async fn presenting_a_certificate_two_share_and_one_without_is_refused<R: FleetRedis>(
    fleet: &mut Fleet<R>,
    ca: &TestCa,
) {
    let (client_cert, client_key) = ca.write("replica", &ca.leaf(&["idgate-replica"]));
    let ca_file = ca.ca_file();
    two_share_and_a_third_is_refused(
        fleet,
        |c| {
            c.cluster.ca_file = Some(ca_file.clone());
            c.cluster.cert_file = Some(client_cert.clone());
            c.cluster.key_file = Some(client_key.clone());
        },
        |c| c.cluster.ca_file = Some(ca_file.clone()),
    )
    .await;
}

/// The test CA and a certificate of it for 127.0.0.1, as files.
fn ca_and_server_files() -> (TestCa, std::path::PathBuf, std::path::PathBuf) {
    let ca = TestCa::new();
    let (cert, key) = ca.write("redis", &ca.leaf(&["127.0.0.1", "localhost"]));
    (ca, cert, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_given_the_ca_share_notices_and_drains_over_rediss_and_others_are_refused() {
    let (ca, cert, key) = ca_and_server_files();
    let redis = RedisServer::start_tls(cert, key, ca.ca_file());
    assert!(redis.url().starts_with("rediss://"));
    let mut fleet = Fleet::start_on(redis, 0, 30).await;
    given_the_ca_two_share_and_the_systems_roots_are_refused(&mut fleet, &ca).await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_presenting_a_client_certificate_reach_a_redis_that_asks_for_one_and_others_are_refused()
 {
    let (ca, cert, key) = ca_and_server_files();
    let redis = RedisServer::start_mtls(cert, key, ca.ca_file());
    let mut fleet = Fleet::start_on(redis, 0, 30).await;
    presenting_a_certificate_two_share_and_one_without_is_refused(&mut fleet, &ca).await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_find_a_tls_only_master_through_rediss_sentinels_and_others_are_refused() {
    let (ca, cert, key) = ca_and_server_files();
    let files = TlsFiles {
        cert,
        key,
        ca: ca.ca_file(),
    };
    let set = tokio::task::block_in_place(|| SentinelPair::start(Some(files), None));
    assert!(set.sentinel_url().starts_with("rediss://"));
    let mut fleet = Fleet::start_on(set, 0, 30).await;
    given_the_ca_two_share_and_the_systems_roots_are_refused(&mut fleet, &ca).await;

    // What they shared is on the master the sentinel named, which answers
    // nothing but TLS.
    let master = fleet.redis.master();
    let keys: Vec<String> =
        tokio::task::block_in_place(|| master.query(redis::cmd("KEYS").arg("idgate:*")))
            .expect("the master, over TLS");
    assert!(!keys.is_empty());
    let plaintext = format!("redis://127.0.0.1:{}", master.port());
    let refused = tokio::task::block_in_place(|| {
        redis::Client::open(plaintext)
            .and_then(|c| c.get_connection_with_timeout(std::time::Duration::from_secs(2)))
            .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn))
    });
    assert!(refused.is_err(), "the master answered in plaintext");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_presenting_a_client_certificate_reach_a_tls_redis_cluster_and_others_are_refused()
{
    let (ca, cert, key) = ca_and_server_files();
    let files = TlsFiles {
        cert,
        key,
        ca: ca.ca_file(),
    };
    let set = tokio::task::block_in_place(|| RedisClusterSet::start_tls(&files));
    assert!(set.urls().iter().all(|u| u.starts_with("rediss://")));
    let mut fleet = Fleet::start_on(set, 0, 30).await;
    presenting_a_certificate_two_share_and_one_without_is_refused(&mut fleet, &ca).await;
    // The shared state is spread over the nodes, read over TLS.
    assert!(tokio::task::block_in_place(|| fleet.redis.nodes_with_keys()) >= 1);
    fleet.stop().await;
}
