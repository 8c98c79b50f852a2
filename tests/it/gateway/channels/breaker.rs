//! The circuit breaker: once a primary's breaker opens, sessions skip it
//! without calling it; after its ejection it is probed once, and a
//! recovered primary closes the breaker.

use idgate::{
    channels::BreakerConfig, domain::Operation, proto::v1::CircuitState, sandbox::FaultAction,
};

use super::{VENDOR_A, session_fault};
use crate::support::{
    gateway::*,
    wait::{EVENT_WAIT, eventually},
};

/// A gateway whose primary's breaker opens after two faults and stays
/// open for `ejection_ms`, with the primary answering 503 to session
/// requests (the fault's id returned) after two sessions that failed
/// over opened its breaker; and the journey's appkey.
async fn primary_ejected_for(ejection_ms: u64) -> (TestGateway, u64, String) {
    let gw = TestGateway::start_with(|c| {
        c.embedded_channels.breaker = BreakerConfig {
            failure_threshold: 2,
            minimum_calls: 2,
            failure_rate_percent: 100,
            base_ejection_ms: ejection_ms,
            max_ejection_ms: ejection_ms,
            half_open_trials: 1,
            ..BreakerConfig::default()
        };
    })
    .await;
    let fault = gw
        .sandbox()
        .add_fault(session_fault(
            FaultAction::Status { status: 503 },
            "primary",
        ))
        .expect("fault");
    // An appkey may open many sessions until a proof binds it.
    let appkey = gw.create_journey().await;
    for _ in 0..2 {
        let s = gw.start_3d(&appkey).await.expect("session");
        assert_eq!(s.channel, "alternative");
    }
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    // Open, or already half-open after a short ejection: not asserted here.
    assert_eq!(gw.channel_status("primary").await.consecutive_failures, 2);
    (gw, fault, appkey)
}

#[tokio::test]
async fn an_open_breaker_skips_the_primary_without_calling_it() {
    // Ejected for an hour: the next session falls in it however slow the
    // machine, so no elapsed time decides the test.
    let (gw, _fault, appkey) = primary_ejected_for(3_600_000).await;
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Open, "{primary:?}");
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "alternative");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Open, "{primary:?}");
    assert_eq!(primary.failovers, 2, "a skip is not a failover");
    gw.stop().await;
}

#[tokio::test]
async fn a_recovered_primary_is_probed_once_after_its_ejection_and_closes_the_breaker() {
    let (gw, fault, appkey) = primary_ejected_for(200).await;
    // The primary recovers; once the back-off ends (waited on, whenever it
    // ends) one probe closes the breaker.
    assert!(gw.sandbox().remove_fault(fault));
    eventually("the primary's breaker half-opens", EVENT_WAIT, async || {
        gw.channel_status("primary").await.circuit_state() == CircuitState::HalfOpen
    })
    .await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 3);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.circuit_state(), CircuitState::Closed, "{primary:?}");
    assert_eq!(primary.consecutive_failures, 0);
    gw.stop().await;
}
