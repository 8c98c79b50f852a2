//! Reloading the channel set under traffic: calls in flight, drains,
//! breakers and counters survive, and a session stays bound to the
//! generation of the channel that issued it.

use super::*;
use crate::channels::CircuitState;

#[tokio::test]
async fn a_reload_adds_a_channel_and_a_drain_keeps_the_call_in_flight() {
    let (router, double) = router();
    let release = Arc::new(Notify::new());
    double.on_start("primary", Start::Hold(release.clone()));
    let in_flight = tokio::spawn({
        let router = router.clone();
        async move { start(&router, 1).await }
    });
    double.entered.notified().await;

    let mut specs = two_channels();
    specs.push(spec("third", 2, 3));
    let summary = router.reload(specs).unwrap();
    assert_eq!(summary.added, vec!["third".to_owned()]);
    assert!(summary.removed.is_empty() && summary.changed.is_empty());
    router.drain("primary").unwrap();
    release.notify_one();

    let started = in_flight.await.unwrap().unwrap();
    assert_eq!(started.channel, "primary");
    let snap = router.snapshot();
    let names: Vec<_> = snap.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["primary", "alternative", "third"]);
    let p = channel(&snap, "primary");
    assert!(p.drained, "the drain survives on the reloaded set");
    assert_eq!(
        p.sessions_started, 1,
        "the in-flight call counted on the same channel"
    );

    router.drain("alternative").unwrap();
    assert_eq!(start(&router, 2).await.unwrap().channel, "third");
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls().last().unwrap(), &liveness("primary"));
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_removes_or_moves_a_channel_keeps_its_bound_verifications() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    start(&router, 2).await.unwrap();
    router.set_mode(RoutingMode::Auto).unwrap();

    // `primary` is gone; `alternative` moved to a new base URL.
    let mut moved = spec("alternative", 1, 3);
    moved.base_url = "http://moved.test".into();
    let summary = router.reload(vec![moved, spec("third", 2, 3)]).unwrap();
    assert_eq!(summary.removed, vec!["primary".to_owned()]);
    assert_eq!(summary.changed, vec!["alternative".to_owned()]);

    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    // Named or not, the binding pins the generation that issued the session.
    router
        .verify(
            &CallContext::unbounded(),
            &key(2),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap();
    let urls: Vec<_> = double
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.base_url.clone())
        .collect();
    assert_eq!(urls, ["http://primary.test", "http://alternative.test"]);
    // Counters of the changed channel carried over the reload.
    assert_eq!(
        channel(&router.snapshot(), "alternative").sessions_started,
        1
    );
    // A new session uses the new URL.
    assert_eq!(start(&router, 3).await.unwrap().channel, "alternative");
    assert_eq!(
        double.calls.lock().unwrap().last().unwrap().base_url,
        "http://moved.test"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_breaker_of_an_unchanged_channel() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Connect);
    start(&router, 1).await.unwrap();
    router
        .reload(vec![
            spec("primary", 0, 1),
            spec("alternative", 1, 1),
            spec("third", 2, 1),
        ])
        .unwrap();
    assert_eq!(
        channel(&router.snapshot(), "primary").circuit,
        CircuitState::Open
    );
}
