//! Operators steering the router: forced modes and drains (what they do to
//! the next call, and what they never do to a verification), the fleet's
//! control state and in-process admin changes, and the refusal of a mode
//! or reload that cannot apply, leaving the router as it was.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn forced_modes_apply_to_the_next_call_and_verification_stays_with_the_issuer() {
    let (router, double) = router();
    assert_eq!(start(&router, 1).await.unwrap().channel, "primary");

    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();

    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await
        .unwrap();

    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    assert_eq!(start(&router, 4).await.unwrap().channel, "alternative");

    assert_eq!(
        double.calls(),
        vec![
            session("primary"),
            session("alternative"),
            liveness("primary"),
            session("primary"),
            liveness("alternative"),
            session("alternative"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_forced_channel_is_retried_in_place_and_never_failed_over() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    double.on_start("alternative", Start::Status(503));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "UPSTREAM_UNAVAILABLE");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("alternative")],
        "session-token consumes nothing: retried on the forced channel, never elsewhere"
    );
    double.clear();

    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    router.drain("primary").unwrap();
    let err = start(&router, 2).await.unwrap_err();
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    assert!(err.to_string().contains("primary: drained"), "{err}");
    assert!(
        double.calls().is_empty(),
        "nothing sent to a drained forced channel"
    );
}

#[tokio::test(start_paused = true)]
async fn a_transient_fault_on_a_forced_channel_is_absorbed_by_the_retry() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    double.on_start("primary", Start::StatusOnce(503));
    let started = start(&router, 1).await.expect("the retry succeeds");
    assert_eq!(started.channel, "primary");
    assert_eq!(double.calls(), vec![session("primary"), session("primary")]);
}

#[tokio::test(start_paused = true)]
async fn a_forced_channel_is_not_retried_on_a_client_error() {
    let (router, double) = router();
    router.set_mode(RoutingMode::ForcePrimary).unwrap();
    double.on_start("primary", Start::Status(401));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert_eq!(double.calls(), vec![session("primary")]);
}

#[tokio::test(start_paused = true)]
async fn drained_channels_are_skipped_and_all_drained_means_unavailable() {
    let (router, double) = router();
    router.drain("primary").unwrap();
    assert_eq!(start(&router, 1).await.unwrap().channel, "alternative");
    router.drain("alternative").unwrap();
    let err = start(&router, 2).await.unwrap_err();
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    router.undrain("primary").unwrap();
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    assert_eq!(
        double.calls(),
        vec![session("alternative"), session("primary")]
    );
    assert!(matches!(
        router.drain("ghost"),
        Err(Error::ChannelUnknown(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn mode_changes_and_reloads_that_cannot_apply_are_refused() {
    let (router, _double) = router();
    assert!(matches!(
        router.set_mode(RoutingMode::Channel("ghost".into())),
        Err(Error::ChannelUnknown(_))
    ));
    router
        .set_mode(RoutingMode::Channel("alternative".into()))
        .unwrap();
    let err = router.reload(vec![spec("primary", 0, 3)]).unwrap_err();
    assert!(err.0.contains("alternative"), "{err}");
    assert_eq!(router.snapshot().channels.len(), 2, "nothing changed");
    router.set_mode(RoutingMode::ForceAlternative).unwrap();
    assert!(router.reload(vec![spec("primary", 0, 3)]).is_err());
    let dup = vec![spec("a", 0, 3), spec("a", 1, 3)];
    assert!(router.reload(dup).is_err());

    let (single, _) = router_with(vec![spec("only", 0, 3)], RoutingConfig::default());
    assert_eq!(
        single
            .set_mode(RoutingMode::ForceAlternative)
            .unwrap_err()
            .reason(),
        "INVALID_REQUEST"
    );
}

#[tokio::test(start_paused = true)]
async fn the_fleets_control_state_applies_whole_and_skips_what_does_not_fit() {
    use crate::cluster::ControlState;
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: false });
    double.on_start("alternative", Start::Grant { contingency: false });
    assert!(!router.snapshot().fleet_control);

    router.apply_control(&ControlState {
        mode: Some("force_alternative".into()),
        drained: ["primary".to_owned(), "elsewhere".to_owned()].into(),
        hold: None,
    });
    let snap = router.snapshot();
    assert!(snap.fleet_control);
    assert_eq!(snap.mode, RoutingMode::ForceAlternative);
    assert!(channel(&snap, "primary").drained);
    assert!(!channel(&snap, "alternative").drained);

    // A mode naming a channel not configured here is kept out; drains
    // follow the fleet both ways.
    router.apply_control(&ControlState {
        mode: Some("channel:ghost".into()),
        drained: Default::default(),
        hold: Some(Duration::from_secs(30)),
    });
    let snap = router.snapshot();
    assert_eq!(snap.mode, RoutingMode::ForceAlternative);
    assert!(!channel(&snap, "primary").drained);
    assert!(
        snap.contingency_hold_active,
        "the fleet's hold applies here"
    );
    assert_eq!(
        router.control_state().mode.as_deref(),
        Some("force_alternative")
    );
}

#[tokio::test(start_paused = true)]
async fn in_one_process_admin_changes_apply_at_once() {
    let (router, _) = router();
    router.change_drain("primary", true).await.unwrap();
    assert!(channel(&router.snapshot(), "primary").drained);
    assert_eq!(
        router
            .change_drain("ghost", true)
            .await
            .unwrap_err()
            .reason(),
        crate::error::Reason::ChannelUnknown
    );
    router
        .change_mode(RoutingMode::ForceAlternative)
        .await
        .unwrap();
    assert_eq!(router.mode(), RoutingMode::ForceAlternative);
    assert!(!router.snapshot().fleet_control);
}
