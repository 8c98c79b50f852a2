//! What the router shows its callers: figures counted per channel, errors
//! and snapshots that never carry an appkey or a token, and futures a
//! tonic handler can await.

use super::*;

#[tokio::test(start_paused = true)]
async fn no_appkey_or_token_appears_in_errors_or_snapshots() {
    let (router, double) = router();
    double.on_start("primary", Start::Connect);
    double.on_start("alternative", Start::Status(500));
    let err = start(&router, 77).await.unwrap_err();
    let shown = format!("{err} {err:?} {:?}", router.snapshot());
    assert!(!shown.contains("appkey-77"), "{shown}");
    assert!(!shown.contains("token-"), "{shown}");
    assert_eq!(err.reason(), "NO_CHANNEL_AVAILABLE");
    assert!(shown.contains("primary: connect") && shown.contains("alternative: http_5xx"));
}

#[tokio::test(start_paused = true)]
async fn router_futures_are_send_so_tonic_handlers_can_await_them() {
    fn is_send<T: Send>(_: &T) {}
    let (router, double) = router();
    let (k, t) = (key(1), token());
    let ctx = CallContext::unbounded();
    let start = router.start_session(&ctx, &k, "ua");
    is_send(&start);
    let verify = router.verify(&ctx, &k, &t, None);
    is_send(&verify);
    // Dropping a session start before it is polled sends nothing.
    drop((start, verify));
    assert!(double.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn figures_count_sessions_outcomes_errors_and_latency_per_channel() {
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: true });
    start(&router, 1).await.unwrap();
    router
        .verify(&CallContext::unbounded(), &key(1), &token(), None)
        .await
        .unwrap();
    double.on_verify("primary", Verify::Status(503));
    start(&router, 2).await.unwrap();
    let _ = router
        .verify(&CallContext::unbounded(), &key(2), &token(), None)
        .await;
    let figures = router.figures().window(60);
    let p = figures["primary"];
    assert_eq!((p.sessions_started, p.contingency_answers), (2, 2));
    assert_eq!(p.verifications(), 2);
    assert_eq!(
        p.verification_errors.classes().collect::<Vec<_>>(),
        [("http_5xx", 1)]
    );
    assert_eq!(p.session_latency.count(), 2);
    assert_eq!(p.liveness_latency.count(), 2);
    assert!(!figures.contains_key("alternative"), "nothing sent there");
}
