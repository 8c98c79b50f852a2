//! Routing modes set at run time, and what a session reports of its
//! channel: a mode applies to the next session and never moves a started
//! one, a forced mode does not fail over, and a contingency answer is
//! reported to the caller and listed.

use idgate::{domain::Operation, proto::v1::RoutingMode, sandbox::FaultAction};
use tonic::Code;

use super::{VENDOR_A, VENDOR_B, session_fault};
use crate::support::gateway::*;

#[tokio::test]
async fn routing_modes_apply_to_the_next_session_and_never_move_a_started_one() {
    let gw = TestGateway::start().await;
    let before = gw.create_journey().await;
    let during = gw.create_journey().await;
    let after = gw.create_journey().await;

    let b = gw.start_3d(&before).await.expect("session");
    assert_eq!(b.channel, "primary");

    gw.set_mode(RoutingMode::ForceAlternative).await;
    assert_eq!(
        gw.list_channels().await.mode(),
        RoutingMode::ForceAlternative
    );
    let d = gw.start_3d(&during).await.expect("session");
    assert_eq!(
        (d.channel.as_str(), d.vendor.as_str()),
        ("alternative", VENDOR_B)
    );
    // Started before the switch: verified on its issuing channel, with no
    // channel named by the caller.
    assert!(
        gw.verify_3d(&before, &b.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 0);

    gw.set_mode(RoutingMode::ForcePrimary).await;
    let a = gw.start_3d(&after).await.expect("session");
    assert_eq!(
        (a.channel.as_str(), a.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert!(
        gw.verify_3d(&during, &d.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 2);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        1
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_forced_mode_does_not_fail_over() {
    let gw = TestGateway::start().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    gw.sandbox()
        .add_fault(session_fault(
            FaultAction::Status { status: 503 },
            "primary",
        ))
        .expect("fault");
    let appkey = gw.create_journey().await;
    let err = gw.start_3d(&appkey).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_contingency_answer_is_reported_to_the_caller_and_listed() {
    let gw = TestGateway::start().await;
    gw.sandbox()
        .set_contingency("primary", true)
        .expect("contingency on");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert!(s.contingency);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.contingency_answers, 1, "{primary:?}");
    assert!(primary.last_contingency);
    let alternative = gw.channel_status("alternative").await;
    assert_eq!(alternative.contingency_answers, 0);

    gw.sandbox()
        .set_contingency("primary", false)
        .expect("contingency off");
    let s = gw.start_3d(&appkey).await.expect("session");
    assert!(!s.contingency);
    let primary = gw.channel_status("primary").await;
    assert_eq!(primary.contingency_answers, 1);
    assert!(!primary.last_contingency);
    gw.stop().await;
}
