//! The weighted split: each channel gets about its share, a journey always
//! the same channel, unavailable channels drop out, a failing pick fails
//! over as in auto, and new weights move only new sessions.

use super::*;
use crate::channels::CircuitState;

fn weighted(text: &str) -> RoutingMode {
    text.parse().expect("a weighted mode")
}

/// Sessions of journeys `0..n` per channel.
async fn split_of(router: &ChannelRouter, n: u32) -> HashMap<String, u32> {
    let mut by = HashMap::new();
    for i in 0..n {
        *by.entry(start(router, i).await.unwrap().channel)
            .or_default() += 1;
    }
    by
}

#[tokio::test(start_paused = true)]
async fn a_weighted_split_sends_about_its_share_and_a_journey_always_to_the_same_channel() {
    let (router, _) = router();
    router
        .set_mode(weighted("weighted:primary=90,alternative=10"))
        .unwrap();
    let by = split_of(&router, 2_000).await;
    let primary = by["primary"];
    assert!((1_700..=1_900).contains(&primary), "{by:?}");
    assert_eq!(primary + by["alternative"], 2_000);
    for i in 0..200 {
        let first = start(&router, i).await.unwrap().channel;
        assert_eq!(
            start(&router, i).await.unwrap().channel,
            first,
            "journey {i}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_drained_or_open_circuit_channel_drops_out_of_the_split() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=50,alternative=50"))
        .unwrap();
    router.drain("alternative").unwrap();
    assert_eq!(split_of(&router, 300).await["primary"], 300);
    assert!(!double.calls().contains(&session("alternative")));

    // An open circuit: its share goes to the rest without a call to it.
    router.undrain("alternative").unwrap();
    double.on_start("alternative", Start::Status(503));
    for i in 1_000..1_100 {
        start(&router, i).await.unwrap();
    }
    assert_eq!(
        channel(&router.snapshot(), "alternative").circuit,
        CircuitState::Open
    );
    double.clear();
    assert_eq!(split_of(&router, 300).await["primary"], 300);
    assert!(!double.calls().contains(&session("alternative")));
}

#[tokio::test(start_paused = true)]
async fn a_weighted_pick_that_fails_fails_over_as_in_auto() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=0,alternative=1"))
        .unwrap();
    double.on_start("alternative", Start::Status(500));
    let started = start(&router, 1).await.unwrap();
    assert_eq!(started.channel, "primary");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("primary")]
    );
    assert_eq!(channel(&router.snapshot(), "alternative").failovers, 1);
}

#[tokio::test(start_paused = true)]
async fn changing_the_weights_moves_new_sessions_but_never_a_started_one() {
    let (router, double) = router();
    router
        .set_mode(weighted("weighted:primary=0,alternative=1"))
        .unwrap();
    let started = start(&router, 500).await.unwrap();
    assert_eq!(started.channel, "alternative");
    router
        .set_mode(weighted("weighted:primary=1,alternative=0"))
        .unwrap();
    assert_eq!(split_of(&router, 50).await["primary"], 50);
    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(500), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("alternative")]);
}

#[tokio::test(start_paused = true)]
async fn a_weighted_mode_naming_an_unknown_channel_is_refused() {
    let (router, _) = router();
    let err = router
        .set_mode(weighted("weighted:primary=9,ghost=1"))
        .unwrap_err();
    assert!(
        matches!(err, Error::ChannelUnknown(ref n) if n == "ghost"),
        "{err:?}"
    );
    assert_eq!(router.mode(), RoutingMode::Auto);
}
