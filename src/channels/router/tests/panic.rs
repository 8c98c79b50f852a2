//! Panic routing: when every channel's circuit refuses, a session start
//! goes to the channel open longest instead of being refused, and its
//! success closes that circuit; drained channels are never panic-routed.

use std::time::Duration;

use super::*;
use crate::channels::CircuitState;

/// A router whose primary opened first, then its alternative 100 ms later
/// (each after one unanswered call).
async fn both_open() -> (Arc<ChannelRouter>, Arc<Double>) {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Connect);
    assert_eq!(start(&router, 0).await.unwrap().channel, "alternative");
    tokio::time::advance(Duration::from_millis(100)).await;
    double.on_start("alternative", Start::Connect);
    assert!(
        start(&router, 1).await.is_err(),
        "the alternative failed too"
    );
    let snap = router.snapshot();
    for name in ["primary", "alternative"] {
        assert_eq!(channel(&snap, name).circuit, CircuitState::Open, "{name}");
    }
    double.clear();
    (router, double)
}

#[tokio::test(start_paused = true)]
async fn with_every_circuit_open_a_start_goes_to_the_channel_open_longest() {
    let (router, double) = both_open().await;
    let err = start(&router, 2).await.unwrap_err();
    assert!(matches!(err, Error::NoChannelAvailable(_)), "{err:?}");
    assert_eq!(double.calls(), vec![session("primary")], "panic-routed");
    // The failure changed nothing: still open, for the same time.
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!((p.circuit, p.ejections), (CircuitState::Open, 1));

    // The vendor is back: the next start is served, and closes the circuit.
    double.on_start("primary", Start::Grant { contingency: false });
    double.clear();
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    assert_eq!(double.calls(), vec![session("primary")]);
    assert_eq!(
        channel(&router.snapshot(), "primary").circuit,
        CircuitState::Closed
    );
    double.clear();
    assert_eq!(start(&router, 4).await.unwrap().channel, "primary");
}

#[tokio::test(start_paused = true)]
async fn a_drained_channel_is_never_panic_routed() {
    let (router, double) = both_open().await;
    router.drain("primary").unwrap();
    double.on_start("alternative", Start::Grant { contingency: false });
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    router.drain("alternative").unwrap();
    double.clear();
    let err = start(&router, 3).await.unwrap_err();
    assert!(matches!(err, Error::NoChannelAvailable(_)), "{err:?}");
    assert!(double.calls().is_empty());
}
