//! The upstream's refusals (400, 401, 403, 404, 409, 429) and a status
//! outside the contract: each maps to the status and reason the error
//! table promises, with `RetryInfo` only where a retry can succeed, and a
//! consuming call is still sent once.

use std::time::Duration;

use idgate::{
    domain::Operation,
    proto::v1::submit_digital_licence_request::Licence,
    sandbox::{
        FaultAction, FaultRule,
        samples::{self, DocumentType},
    },
};
use tonic::Code;

use super::{assert_consuming_sent_once, inject, meta, reset};
use crate::support::gateway::*;

#[tokio::test]
async fn upstream_400_is_invalid_argument() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    let sb = gw.sandbox();

    inject(sb, Operation::Result, FaultAction::Status { status: 400 });
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::InvalidArgument, "UPSTREAM_REJECTED_REQUEST");
    assert!(!retryable(&err));
    assert_eq!(meta(&err, "upstream_status").as_deref(), Some("400"));
    assert_eq!(meta(&err, "operation").as_deref(), Some("result"));
    assert_eq!(gw.calls(Operation::Result), 1);
    reset(sb);

    inject(
        sb,
        Operation::DocumentImages,
        FaultAction::Status { status: 400 },
    );
    let err = gw
        .submit_images(&appkey, &document_pair(DocumentType::Rg))
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "DOCUMENT_UNUSABLE");
    assert_eq!(gw.calls(Operation::DocumentImages), 1);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_401_is_unauthenticated_with_the_reason_of_the_operation() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let unauthorized = FaultAction::Status { status: 401 };

    // /credencial: the operator's credentials.
    inject(sb, Operation::Credential, unauthorized);
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "OPERATOR_CREDENTIALS_REJECTED");
    assert!(!retryable(&err));
    assert!(!err.message().contains("sandbox"), "no operator secret");
    assert_eq!(gw.calls(Operation::Credential), 1);
    reset(sb);

    // /appkey keeps answering 401: one refresh, one retry, then the error.
    inject(sb, Operation::Appkey, unauthorized);
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "OPERATOR_CREDENTIALS_REJECTED");
    assert_eq!(gw.calls(Operation::Appkey), 2);
    assert_eq!(gw.calls(Operation::Credential), 2);
    reset(sb);

    let appkey = gw.create_journey().await;
    inject(sb, Operation::Challenge, unauthorized);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert_eq!(gw.calls(Operation::Challenge), 1, "a 401 is not retried");
    reset(sb);

    inject(sb, Operation::DigitalLicence, unauthorized);
    let err = gw
        .submit_licence(&appkey, Licence::Pdf(samples::digital_licence_pdf().into()))
        .await
        .unwrap_err();
    assert_error(
        &err,
        Code::Unauthenticated,
        "APPKEY_EXPIRED_OR_LICENCE_REJECTED",
    );
    gw.stop().await;
}

#[tokio::test]
async fn upstream_401_on_the_result_is_unauthenticated_appkey_expired() {
    // The sandbox's state: a result read once the appkey expired.
    let gw = TestGateway::start_with(|c| c.sandbox.result_readable_after_expiry = false).await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    gw.result(&appkey)
        .await
        .expect("readable while the appkey is valid");
    gw.clock.advance(Duration::from_secs(5 * 60 + 1));
    reset(gw.sandbox());
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert!(!retryable(&err));
    assert_eq!(meta(&err, "operation").as_deref(), Some("result"));
    assert!(!err.message().contains(&appkey));
    assert_eq!(gw.calls(Operation::Result), 1, "a 401 is not retried");

    // The same answer as an injected fault, on a valid appkey.
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    reset(gw.sandbox());
    inject(
        gw.sandbox(),
        Operation::Result,
        FaultAction::Status { status: 401 },
    );
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unauthenticated, "APPKEY_EXPIRED");
    assert!(!retryable(&err));
    assert_eq!(gw.calls(Operation::Result), 1);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_404_is_not_found() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    inject(
        gw.sandbox(),
        Operation::Result,
        FaultAction::Status { status: 404 },
    );
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::NotFound, "RESULT_NOT_AVAILABLE");
    assert!(!retryable(&err));
    assert_eq!(gw.calls(Operation::Result), 1);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_403_is_permission_denied_without_retry_info_and_sent_once() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let appkey = gw.create_journey().await;
    inject(
        sb,
        Operation::Challenge,
        FaultAction::Status { status: 403 },
    );
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::PermissionDenied, "UPSTREAM_PERMISSION_DENIED");
    assert!(!retryable(&err), "403: no RetryInfo");
    assert_eq!(meta(&err, "upstream_status").as_deref(), Some("403"));
    assert_eq!(meta(&err, "operation").as_deref(), Some("challenge"));
    assert_eq!(gw.calls(Operation::Challenge), 1, "a 403 is not retried");
    reset(sb);

    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 403 },
        Code::PermissionDenied,
        "UPSTREAM_PERMISSION_DENIED",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn upstream_409_is_aborted_conflict_without_retry_info_and_sent_once() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;
    reset(sb);
    inject(sb, Operation::Result, FaultAction::Status { status: 409 });
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Aborted, "UPSTREAM_CONFLICT");
    assert!(!retryable(&err), "409: no RetryInfo");
    assert_eq!(meta(&err, "upstream_status").as_deref(), Some("409"));
    assert_eq!(gw.calls(Operation::Result), 1, "a 409 is not retried");
    reset(sb);

    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 409 },
        Code::Aborted,
        "UPSTREAM_CONFLICT",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn upstream_429_on_safe_operations_is_rate_limited_with_retry_info_and_a_retry_is_served() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let once = |op| {
        sb.add_fault(
            FaultRule::new(FaultAction::Status { status: 429 })
                .on(op)
                .times(1),
        )
        .expect("fault");
    };
    let appkey = gw.create_journey().await;

    // Nothing was consumed: RetryInfo, and the caller's retry is served.
    reset(sb);
    once(Operation::Challenge);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "UPSTREAM_RATE_LIMITED");
    assert!(retryable(&err), "429 on a safe call: RetryInfo");
    assert_eq!(meta(&err, "upstream_status").as_deref(), Some("429"));
    assert_eq!(meta(&err, "operation").as_deref(), Some("challenge"));
    assert_eq!(gw.calls(Operation::Challenge), 1);
    gw.challenges(&appkey)
        .await
        .expect("the caller's retry is served");
    assert_eq!(gw.calls(Operation::Challenge), 2);

    gw.pass_3d(&appkey).await;
    reset(sb);
    once(Operation::Result);
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::ResourceExhausted, "UPSTREAM_RATE_LIMITED");
    assert!(retryable(&err), "429 on a result read: RetryInfo");
    assert_eq!(meta(&err, "operation").as_deref(), Some("result"));
    assert_eq!(gw.calls(Operation::Result), 1);
    gw.result(&appkey)
        .await
        .expect("the caller's retry is served");
    assert_eq!(gw.calls(Operation::Result), 2);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_429_on_consuming_operations_is_rate_limited_without_retry_info_and_sent_once() {
    let gw = TestGateway::start().await;
    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 429 },
        Code::ResourceExhausted,
        "UPSTREAM_RATE_LIMITED",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn an_upstream_status_outside_the_contract_is_internal_unexpected_status() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let appkey = gw.create_journey().await;
    for status in [418, 302] {
        reset(sb);
        inject(sb, Operation::Challenge, FaultAction::Status { status });
        let err = gw.challenges(&appkey).await.unwrap_err();
        assert_error(&err, Code::Internal, "UPSTREAM_UNEXPECTED_STATUS");
        assert!(!retryable(&err), "{status}: no RetryInfo");
        assert_eq!(
            meta(&err, "upstream_status").as_deref(),
            Some(status.to_string().as_str())
        );
        assert_eq!(gw.calls(Operation::Challenge), 1, "{status}: not retried");
    }
    reset(sb);

    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 418 },
        Code::Internal,
        "UPSTREAM_UNEXPECTED_STATUS",
    )
    .await;
    gw.stop().await;
}
