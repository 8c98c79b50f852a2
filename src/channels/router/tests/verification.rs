//! Verifications follow the session's binding: sent once to the channel
//! that issued the session and never elsewhere, the binding kept over an
//! ambiguous failure and ended by a definite answer, and calls that cannot
//! be routed refused before anything is sent.

use tokio::time::Instant;

use super::*;
use crate::channels::CircuitState;

#[tokio::test(start_paused = true)]
async fn a_failed_verification_is_sent_once_and_never_elsewhere() {
    for (fault, reason) in [
        (Verify::Status(500), "OUTCOME_UNKNOWN"),
        (Verify::Transport, "OUTCOME_UNKNOWN"),
        (Verify::Hang, "OUTCOME_UNKNOWN"),
    ] {
        let (router, double) = router();
        start(&router, 1).await.unwrap();
        double.on_verify("primary", fault);
        double.clear();
        let err = router
            .verify(&CallContext::unbounded(), &key(1), &token(), None)
            .await
            .unwrap_err();
        assert_eq!(err.reason(), reason);
        assert_eq!(double.calls(), vec![liveness("primary")]);
        let p = channel(&router.snapshot(), "primary").clone();
        assert_eq!((p.verifications, p.verification_failures), (1, 1));
        assert_eq!(
            p.consecutive_failures, 1,
            "the fault counts for the breaker"
        );
        // The binding survives an ambiguous failure: a retry goes to the same channel.
        double.clear();
        let _ = router
            .verify(&CallContext::unbounded(), &key(1), &token(), None)
            .await;
        assert_eq!(double.calls(), vec![liveness("primary")]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_definite_verdict_or_4xx_ends_the_binding() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    let verdict = router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert!(verdict.valid);
    let err = router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SessionUnknown));

    start(&router, 2).await.unwrap();
    double.on_verify("primary", Verify::Status(401));
    let err = router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert!(matches!(
        router
            .verify(&CallContext::unbounded(), &key(2), &token(), None)
            .await,
        Err(Error::SessionUnknown)
    ));
    assert_eq!(router.snapshot().bindings, 0);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_session_without_a_channel_is_refused_before_sending() {
    let (router, double) = router();
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "SESSION_UNKNOWN");
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), Some(""))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "SESSION_UNKNOWN", "an empty name is no name");
    let err = router
        .verify(&CallContext::unbounded(), &key(9), &token(), Some("ghost"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "CHANNEL_UNKNOWN");
    assert!(double.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_named_channel_routes_a_verification_this_instance_did_not_start() {
    let (router, double) = router();
    router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("alternative")]);
}

#[tokio::test(start_paused = true)]
async fn a_channel_name_contradicting_the_binding_is_refused_before_sending() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    double.clear();
    let err = router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("alternative"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "CHANNEL_MISMATCH");
    assert!(double.calls().is_empty());
    // The matching name is fine.
    router
        .verify(
            &CallContext::unbounded(),
            &key(1),
            &token(),
            Some("primary"),
        )
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn verification_ignores_drain_and_open_circuit_of_the_issuer() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    start(&router, 1).await.unwrap();
    double.on_start("primary", Start::Connect);
    start(&router, 2).await.unwrap();
    router.drain("primary").unwrap();
    assert_eq!(
        channel(&router.snapshot(), "primary").circuit,
        CircuitState::Open
    );
    double.clear();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    assert_eq!(double.calls(), vec![liveness("primary")]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_deadline_sends_no_verification() {
    let (router, double) = router();
    start(&router, 1).await.unwrap();
    double.clear();
    let err = router
        .verify(
            &CallContext::from_deadline(Some(Instant::now())),
            &key(1),
            &token(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "DEADLINE_EXCEEDED");
    assert!(double.calls().is_empty());
}
