//! Automatic routing of new sessions: the primary first, failover to the
//! next channel on a fault (never on a client error, never past the
//! caller's deadline), the breaker that stops asking a failing channel and
//! probes it back, and the contingency hold that prefers the alternative
//! while the primary answers in contingency.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::channels::CircuitState;

#[tokio::test(start_paused = true)]
async fn a_healthy_primary_serves_new_sessions() {
    let (router, double) = router();
    let started = start(&router, 1).await.unwrap();
    assert_eq!(started.channel, "primary");
    assert_eq!(started.grant.vendor, "vendor-primary");
    assert_eq!(double.calls(), vec![session("primary")]);
    assert_eq!(channel(&router.snapshot(), "primary").sessions_started, 1);
}

#[tokio::test(start_paused = true)]
async fn connect_timeout_and_5xx_on_the_primary_fail_over_to_the_alternative() {
    for (fault, class) in [
        (Start::Connect, "connect"),
        (Start::Hang, "timeout"),
        (Start::Status(500), "http_5xx"),
        (Start::Status(503), "http_5xx"),
    ] {
        let (router, double) = router();
        double.on_start("primary", fault);
        let t0 = Instant::now();
        let started = start(&router, 1).await.unwrap();
        assert_eq!(started.channel, "alternative", "{class}");
        assert_eq!(
            double.calls(),
            vec![session("primary"), session("alternative")]
        );
        let snap = router.snapshot();
        let p = channel(&snap, "primary");
        assert_eq!(
            (p.failovers, p.session_failures, p.last_error_class),
            (1, 1, class)
        );
        assert_eq!(p.consecutive_failures, 1);
        assert_eq!(channel(&snap, "alternative").sessions_started, 1);
        if class == "timeout" {
            // The primary's own budget (timeout_ms), not the test, ended the call.
            assert_eq!(t0.elapsed(), Duration::from_millis(10_000));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_4xx_on_start_is_returned_at_once_without_failover() {
    let (router, double) = router();
    double.on_start("primary", Start::Status(401));
    let err = start(&router, 1).await.unwrap_err();
    assert_eq!(err.reason(), "APPKEY_EXPIRED");
    assert_eq!(double.calls(), vec![session("primary")]);
    let p = router.snapshot().channels[0].clone();
    assert_eq!(
        (p.consecutive_failures, p.failovers),
        (0, 0),
        "a 4xx is not a fault"
    );
    assert_eq!(p.last_error_class, "http_4xx");
}

#[tokio::test(start_paused = true)]
async fn failover_stops_at_the_callers_deadline_without_blaming_the_channel() {
    let (router, double) = router();
    double.on_start("primary", Start::Hang);
    let deadline = Instant::now() + Duration::from_secs(3);
    let err = router
        .start_session(&CallContext::from_deadline(Some(deadline)), &key(1), "ua")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "DEADLINE_EXCEEDED");
    assert_eq!(Instant::now(), deadline);
    assert_eq!(double.calls(), vec![session("primary")]);
    assert_eq!(router.snapshot().channels[0].consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_skips_the_primary_unasked_then_probes_and_closes() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 2), spec("alternative", 1, 2)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Connect);
    for n in 0..2 {
        assert_eq!(start(&router, n).await.unwrap().channel, "alternative");
    }
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!((p.circuit, p.times_opened), (CircuitState::Open, 1));

    double.clear();
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    assert_eq!(
        double.calls(),
        vec![session("alternative")],
        "primary not called while open"
    );
    assert_eq!(channel(&router.snapshot(), "primary").rejected_open, 1);

    // Still open just before the back-off ends.
    tokio::time::advance(Duration::from_millis(999)).await;
    double.clear();
    start(&router, 3).await.unwrap();
    assert_eq!(double.calls(), vec![session("alternative")]);

    // After the back-off one probe goes; the primary has recovered.
    tokio::time::advance(Duration::from_millis(1)).await;
    double.on_start("primary", Start::Grant { contingency: false });
    double.clear();
    assert_eq!(start(&router, 4).await.unwrap().channel, "primary");
    assert_eq!(double.calls(), vec![session("primary")]);
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!(
        (p.circuit, p.consecutive_failures, p.ejections),
        (CircuitState::Closed, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_for_twice_as_long() {
    let (router, double) = router_with(
        vec![spec("primary", 0, 1), spec("alternative", 1, 1)],
        RoutingConfig::default(),
    );
    double.on_start("primary", Start::Status(502));
    start(&router, 0).await.unwrap();
    tokio::time::advance(Duration::from_millis(1000)).await;
    double.clear();
    start(&router, 1).await.unwrap();
    assert_eq!(
        double.calls(),
        vec![session("primary"), session("alternative")],
        "the probe"
    );
    tokio::time::advance(Duration::from_millis(1999)).await;
    double.clear();
    start(&router, 2).await.unwrap();
    assert_eq!(
        double.calls(),
        vec![session("alternative")],
        "re-opened for 2 s"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    double.clear();
    start(&router, 3).await.unwrap();
    assert_eq!(double.calls()[0], session("primary"));
}

#[tokio::test(start_paused = true)]
async fn contingency_answers_are_returned_recorded_and_reported() {
    let (router, double) = router();
    double.on_start("primary", Start::Grant { contingency: true });
    let started = start(&router, 1).await.unwrap();
    assert!(started.grant.contingency);
    assert_eq!(started.channel, "primary");
    double.on_start("primary", Start::Grant { contingency: false });
    start(&router, 2).await.unwrap();
    let p = channel(&router.snapshot(), "primary").clone();
    assert_eq!(p.contingency_answers, 1);
    assert!(!p.last_contingency, "the last answer was not contingency");
    assert_eq!(p.last_vendor, "vendor-primary");
    // Without a hold configured, routing did not change.
    assert!(!router.snapshot().contingency_hold_active);
}

#[tokio::test(start_paused = true)]
async fn a_contingency_hold_prefers_the_alternative_for_its_duration() {
    let routing = RoutingConfig {
        contingency_hold_secs: 60,
        ..RoutingConfig::default()
    };
    let (router, double) = router_with(two_channels(), routing);
    double.on_start("primary", Start::Grant { contingency: true });
    assert_eq!(start(&router, 1).await.unwrap().channel, "primary");
    assert!(router.snapshot().contingency_hold_active);
    assert_eq!(start(&router, 2).await.unwrap().channel, "alternative");
    // The primary remains a fallback during the hold.
    double.on_start("alternative", Start::Connect);
    assert_eq!(start(&router, 3).await.unwrap().channel, "primary");
    double.on_start("alternative", Start::Grant { contingency: false });
    double.on_start("primary", Start::Grant { contingency: false });
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(start(&router, 4).await.unwrap().channel, "primary");
}
