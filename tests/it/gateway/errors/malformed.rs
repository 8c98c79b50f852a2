//! Broken answers: garbage JSON, an empty body or one past the configured
//! size bound is an `INTERNAL` error of its own reason, never retried, and
//! a consuming call that got one is sent once and its outcome unknown.

use idgate::{domain::Operation, sandbox::FaultAction};
use tonic::Code;

use super::{assert_consuming_sent_once, assert_consuming_sent_once_on, inject, reset};
use crate::support::gateway::*;

#[tokio::test]
async fn garbage_json_is_a_malformed_response_error() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();

    inject(sb, Operation::Credential, FaultAction::Malformed);
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    assert!(!retryable(&err));
    reset(sb);

    let appkey = gw.create_journey().await;
    inject(sb, Operation::Challenge, FaultAction::Malformed);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    assert_eq!(gw.calls(Operation::Challenge), 1, "not retried");
    reset(sb);

    gw.pass_3d(&appkey).await;
    inject(sb, Operation::Result, FaultAction::Malformed);
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    reset(sb);

    assert_consuming_sent_once(
        &gw,
        FaultAction::Malformed,
        Code::Unknown,
        "OUTCOME_UNKNOWN",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn an_empty_body_is_a_malformed_response_error() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    // 204: a success status with no body at all.
    let empty = FaultAction::Status { status: 204 };

    inject(sb, Operation::Credential, empty);
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    reset(sb);

    let appkey = gw.create_journey().await;
    inject(sb, Operation::Challenge, empty);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    reset(sb);

    gw.pass_3d(&appkey).await;
    inject(sb, Operation::Result, empty);
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_MALFORMED_RESPONSE");
    reset(sb);

    assert_consuming_sent_once(&gw, empty, Code::Unknown, "OUTCOME_UNKNOWN").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_oversize_body_is_refused_past_the_configured_bound() {
    let ext = ExternalGateway::start(|u| u.max_response_bytes = 64 * 1024).await;
    let gw = &ext.gw;
    let sb = &ext.sandbox;
    let oversize = FaultAction::Oversize { bytes: 256 * 1024 };
    let appkey = ext.patient.create_journey().await;

    inject(sb, Operation::Challenge, oversize);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_RESPONSE_TOO_LARGE");
    assert!(!retryable(&err));
    assert_eq!(sb.calls(Operation::Challenge, None), 1);
    reset(sb);

    // Every consuming operation: sent once, its outcome unknown. The
    // journeys are prepared through `ext.patient` (default bound).
    assert_consuming_sent_once_on(
        &ext.patient,
        gw,
        sb,
        oversize,
        Code::Unknown,
        "OUTCOME_UNKNOWN",
    )
    .await;
}
