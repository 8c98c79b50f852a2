//! Verification is single-shot and sticky: a verification whose answer is
//! lost is sent once and reported `OUTCOME_UNKNOWN`, never elsewhere, and
//! one that names no channel where no binding is known is refused
//! `SESSION_UNKNOWN`.

use idgate::{
    domain::Operation,
    proto::v1::RoutingMode,
    sandbox::{FaultAction, FaultRule},
};
use tonic::Code;

use crate::support::gateway::*;

fn liveness_fault(action: FaultAction, channel: &str) -> FaultRule {
    FaultRule::new(action)
        .on(Operation::Liveness3D)
        .channel(channel)
}

/// A verification whose answer is lost is sent once, reported as
/// `OUTCOME_UNKNOWN` without `RetryInfo`, and never sent elsewhere.
async fn an_ambiguous_verification_is_sent_once(action: FaultAction) {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "primary");
    gw.sandbox()
        .add_fault(liveness_fault(action, "primary"))
        .expect("fault");
    let err = gw
        .verify_3d(&appkey, &s.session_token, &s.channel)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unknown, "{err:?}");
    assert_eq!(reason(&err), "OUTCOME_UNKNOWN");
    assert!(!retryable(&err));
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_verification_answered_500_is_sent_once_and_its_outcome_unknown() {
    an_ambiguous_verification_is_sent_once(FaultAction::Status { status: 500 }).await;
}

#[tokio::test]
async fn a_verification_whose_connection_drops_is_sent_once_and_its_outcome_unknown() {
    an_ambiguous_verification_is_sent_once(FaultAction::Drop).await;
}

#[tokio::test]
async fn a_verification_without_binding_or_channel_is_refused_as_session_unknown() {
    let gw = TestGateway::start().await;
    let other = gw.sibling().await;
    gw.set_mode(RoutingMode::ForceAlternative).await;
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(s.channel, "alternative");

    // The other instance never saw the session, and the caller names no channel.
    let err = other
        .verify_3d(&appkey, &s.session_token, "")
        .await
        .unwrap_err();
    assert_error(&err, Code::FailedPrecondition, "SESSION_UNKNOWN");
    assert!(!retryable(&err), "{err:?}: no RetryInfo");
    for channel in ["primary", "alternative"] {
        assert_eq!(gw.sandbox_calls(Operation::Liveness3D, channel), 0);
    }

    // With the channel StartSession3D returned, it routes the call there.
    let verdict = other
        .verify_3d(&appkey, &s.session_token, &s.channel)
        .await
        .expect("verify on the named channel");
    assert!(verdict.valid);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 0);
    other.stop().await;
    gw.stop().await;
}
