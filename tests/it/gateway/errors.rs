//! Every upstream status code of the REST interface, and every broken
//! answer, mapped to the gRPC error that `docs/upstream.md#status-codes` and
//! the error model of `docs/api.md` promise; calls
//! that consume the appkey are sent exactly once; safe calls are retried.
//! Faults are injected in the sandbox; counters prove what was sent. Every
//! upstream status row of the error table (400, 401, 403, 404, 409, 429,
//! 5xx, any other) is driven here.

use std::time::Duration;

use crate::support::{gateway::*, net::RefusingPort};
use idgate::{
    domain::Operation,
    proto::v1::{self, submit_digital_licence_request::Licence},
    sandbox::{
        FaultAction, FaultRule, SandboxHandle,
        samples::{self, DocumentType, LivenessOutcome},
    },
};
use tonic::Code;
use tonic_types::StatusExt;

/// `req` with a caller deadline.
fn with_deadline<T>(req: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(req);
    req.set_timeout(Duration::from_secs(10));
    req
}

fn inject(sandbox: &SandboxHandle, op: Operation, action: FaultAction) {
    sandbox
        .add_fault(FaultRule::new(action).on(op))
        .expect("valid fault");
}

/// Forgets faults and counters, for the next case on the same sandbox.
fn reset(sandbox: &SandboxHandle) {
    sandbox.clear_faults();
    sandbox.reset_calls();
}

/// `ErrorInfo.metadata[key]`.
fn meta(status: &tonic::Status, key: &str) -> Option<String> {
    status
        .get_details_error_info()
        .and_then(|i| i.metadata.get(key).cloned())
}

/// The operations that consume the appkey, each driven through the
/// gateway on a fresh appkey of `gw`; returns the gRPC outcome.
#[derive(Debug, Clone, Copy)]
enum Consuming {
    Captcha,
    Liveness3D,
    DocumentImages,
    DigitalLicence,
}

impl Consuming {
    const ALL: [Consuming; 4] = [
        Consuming::Captcha,
        Consuming::Liveness3D,
        Consuming::DocumentImages,
        Consuming::DigitalLicence,
    ];

    fn op(self) -> Operation {
        match self {
            Consuming::Captcha => Operation::Captcha,
            Consuming::Liveness3D => Operation::Liveness3D,
            Consuming::DocumentImages => Operation::DocumentImages,
            Consuming::DigitalLicence => Operation::DigitalLicence,
        }
    }

    /// Prepares a fresh appkey up to the operation (no fault installed
    /// yet), then returns a closure-like call of the operation.
    async fn prepare(self, gw: &TestGateway) -> Prepared {
        let appkey = gw.create_journey().await;
        match self {
            Consuming::Captcha => {
                let ch = gw.challenges(&appkey).await.expect("challenges");
                Prepared::Captcha(appkey, ch)
            }
            Consuming::Liveness3D => {
                let s = gw
                    .liveness()
                    .start_session3_d(v1::StartSession3DRequest {
                        appkey: appkey.clone(),
                        user_agent: samples::USER_AGENT_VALID.into(),
                    })
                    .await
                    .expect("session")
                    .into_inner();
                Prepared::Liveness3D(v1::VerifyLiveness3DRequest {
                    appkey,
                    session_token: s.session_token,
                    channel: s.channel,
                })
            }
            Consuming::DocumentImages | Consuming::DigitalLicence => {
                gw.pass_3d(&appkey).await;
                if matches!(self, Consuming::DocumentImages) {
                    Prepared::Documents(appkey)
                } else {
                    Prepared::Licence(appkey)
                }
            }
        }
    }
}

enum Prepared {
    Captcha(String, v1::CreateChallengesResponse),
    Liveness3D(v1::VerifyLiveness3DRequest),
    Documents(String),
    Licence(String),
}

impl Prepared {
    fn appkey(&self) -> &str {
        match self {
            Prepared::Captcha(a, _) | Prepared::Documents(a) | Prepared::Licence(a) => a,
            Prepared::Liveness3D(r) => &r.appkey,
        }
    }

    /// Sends the consuming call; `Ok(())` on success.
    async fn send(&self, gw: &TestGateway) -> Result<(), tonic::Status> {
        match self {
            Prepared::Captcha(appkey, ch) => gw
                .answer_challenges(appkey, ch, LivenessOutcome::Valid)
                .await
                .map(drop),
            Prepared::Liveness3D(req) => gw
                .liveness()
                .verify_liveness3_d(req.clone())
                .await
                .map(drop),
            Prepared::Documents(appkey) => gw
                .submit_images(appkey, &document_pair(DocumentType::Rg))
                .await
                .map(drop),
            Prepared::Licence(appkey) => gw
                .submit_licence(
                    appkey,
                    Licence::QrImage(samples::digital_licence_image().into()),
                )
                .await
                .map(drop),
        }
    }
}

/// Calls of `op` on every channel (and none).
fn calls_any_channel(sandbox: &SandboxHandle, op: Operation) -> u64 {
    sandbox
        .all_calls()
        .iter()
        .filter(|c| c.operation == op.as_str())
        .map(|c| c.count)
        .sum()
}

/// Installs `action` on each consuming operation in turn and asserts the
/// call fails with `code`/`reason`, without RetryInfo, sent exactly once.
async fn assert_consuming_sent_once(
    gw: &TestGateway,
    action: FaultAction,
    code: Code,
    reason_: &str,
) {
    assert_consuming_sent_once_on(gw, gw, gw.sandbox(), action, code, reason_).await;
}

/// [`assert_consuming_sent_once`] with the journeys prepared through
/// `prepare` and the consuming calls sent through `gw`, both on `sb`.
async fn assert_consuming_sent_once_on(
    prepare: &TestGateway,
    gw: &TestGateway,
    sb: &SandboxHandle,
    action: FaultAction,
    code: Code,
    reason_: &str,
) {
    for c in Consuming::ALL {
        let prepared = c.prepare(prepare).await;
        reset(sb);
        inject(sb, c.op(), action);
        let err = prepared.send(gw).await.expect_err("fault answers");
        assert_error(&err, code, reason_);
        assert!(!retryable(&err), "{c:?} {action:?}: no RetryInfo");
        assert_eq!(meta(&err, "operation").as_deref(), Some(c.op().as_str()));
        assert!(!err.message().contains(prepared.appkey()));
        assert_eq!(
            calls_any_channel(sb, c.op()),
            1,
            "{c:?} {action:?}: sent exactly once"
        );
        reset(sb);
    }
}

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
async fn upstream_500_is_internal_on_safe_operations_and_not_retried() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let failure = FaultAction::Status { status: 500 };

    inject(sb, Operation::Credential, failure);
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_INTERNAL");
    assert!(!retryable(&err));
    assert_eq!(gw.calls(Operation::Credential), 1);
    reset(sb);

    let appkey = gw.create_journey().await;
    inject(sb, Operation::Challenge, failure);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_INTERNAL");
    assert_eq!(meta(&err, "upstream_status").as_deref(), Some("500"));
    assert_eq!(gw.calls(Operation::Challenge), 1);
    reset(sb);

    gw.pass_3d(&appkey).await;
    inject(sb, Operation::Result, failure);
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Internal, "UPSTREAM_INTERNAL");
    assert_eq!(gw.calls(Operation::Result), 1);
    gw.stop().await;
}

#[tokio::test]
async fn upstream_500_on_consuming_operations_is_outcome_unknown_and_sent_once() {
    let gw = TestGateway::start().await;
    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 500 },
        Code::Unknown,
        "OUTCOME_UNKNOWN",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn upstream_502_503_504_are_unavailable_with_retry_info_on_safe_operations() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let appkey = gw.create_journey().await;
    for status in [502, 503, 504] {
        reset(sb);
        inject(sb, Operation::Challenge, FaultAction::Status { status });
        let err = gw.challenges(&appkey).await.unwrap_err();
        assert_error(&err, Code::Unavailable, "UPSTREAM_UNAVAILABLE");
        assert!(retryable(&err), "{status}: RetryInfo");
        assert_eq!(
            meta(&err, "upstream_status").as_deref(),
            Some(status.to_string().as_str())
        );
        assert_eq!(gw.calls(Operation::Challenge), 2, "{status}: safe_attempts");
    }
    gw.pass_3d(&appkey).await;
    for status in [502, 503, 504] {
        reset(sb);
        inject(sb, Operation::Result, FaultAction::Status { status });
        let err = gw.result(&appkey).await.unwrap_err();
        assert_error(&err, Code::Unavailable, "UPSTREAM_UNAVAILABLE");
        assert!(retryable(&err));
        assert_eq!(gw.calls(Operation::Result), 2, "{status}: safe_attempts");
    }
    gw.stop().await;
}

#[tokio::test]
async fn upstream_503_on_consuming_operations_is_outcome_unknown_and_sent_once() {
    let gw = TestGateway::start().await;
    assert_consuming_sent_once(
        &gw,
        FaultAction::Status { status: 503 },
        Code::Unknown,
        "OUTCOME_UNKNOWN",
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_transient_503_on_a_safe_operation_is_retried_within_the_deadline() {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let once = |op| {
        sb.add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(op)
                .times(1),
        )
        .expect("fault");
    };

    once(Operation::Credential);
    gw.journeys()
        .create_journey(with_deadline(happy_person()))
        .await
        .expect("journey after one 503 on /credencial");
    assert_eq!(gw.calls(Operation::Credential), 2);
    let appkey = gw.create_journey().await;

    once(Operation::Challenge);
    gw.liveness()
        .create_challenges(with_deadline(v1::CreateChallengesRequest {
            appkey: appkey.clone(),
        }))
        .await
        .expect("challenges after one 503");
    assert_eq!(gw.calls(Operation::Challenge), 2);

    gw.pass_3d(&appkey).await;
    once(Operation::Result);
    gw.journeys()
        .get_journey_result(with_deadline(v1::GetJourneyResultRequest {
            appkey: appkey.clone(),
        }))
        .await
        .expect("result after one 503");
    assert_eq!(gw.calls(Operation::Result), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_closed_connection_is_unavailable_on_safe_operations_and_outcome_unknown_on_consuming_ones()
 {
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    let appkey = gw.create_journey().await;
    gw.pass_3d(&appkey).await;

    inject(sb, Operation::Result, FaultAction::Drop);
    let err = gw.result(&appkey).await.unwrap_err();
    assert_error(&err, Code::Unavailable, "UPSTREAM_UNAVAILABLE");
    assert!(retryable(&err));
    assert_eq!(gw.calls(Operation::Result), 2, "retried once");
    reset(sb);

    assert_consuming_sent_once(&gw, FaultAction::Drop, Code::Unknown, "OUTCOME_UNKNOWN").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_answer_lost_after_the_captcha_ran_is_outcome_unknown_and_the_appkey_is_bound() {
    let gw = TestGateway::start().await;
    let appkey = gw.create_journey().await;
    let ch = gw.challenges(&appkey).await.expect("challenges");
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Drop)
                .on(Operation::Captcha)
                .after_processing(),
        )
        .expect("fault");
    let err = gw
        .answer_challenges(&appkey, &ch, LivenessOutcome::Valid)
        .await
        .unwrap_err();
    assert_error(&err, Code::Unknown, "OUTCOME_UNKNOWN");
    assert_eq!(gw.calls(Operation::Captcha), 1);
    // A retry would have been refused: the proof took effect.
    let state = gw.sandbox().appkey_state(&appkey).expect("appkey");
    assert_eq!(state.liveness, Some(LivenessOutcome::Valid));
    gw.stop().await;
}

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

#[tokio::test]
async fn an_upstream_slower_than_its_timeout_is_deadline_exceeded() {
    // `gw` has a 300 ms upstream timeout; the calls meant to succeed go
    // through `ext.patient` (default timeout) on the same sandbox.
    let ext = ExternalGateway::start(|u| u.timeout_ms = 300).await;
    let gw = &ext.gw;
    let patient = &ext.patient;
    let sb = &ext.sandbox;
    let slow = |op| {
        sb.add_fault(FaultRule::new(FaultAction::Delay).on(op).latency_ms(3_000))
            .expect("fault");
    };
    let appkey = patient.create_journey().await;

    // Safe: retried up to safe_attempts, then DEADLINE_EXCEEDED with
    // RetryInfo (nothing was consumed).
    slow(Operation::Challenge);
    let err = gw.challenges(&appkey).await.unwrap_err();
    assert_error(&err, Code::DeadlineExceeded, "UPSTREAM_TIMEOUT");
    assert!(retryable(&err));
    assert_eq!(sb.calls(Operation::Challenge, None), 2);
    reset(sb);

    // Consuming (/captcha, /3d/liveness, both /document forms): sent once,
    // and the caller cannot know what happened.
    for c in Consuming::ALL {
        let prepared = c.prepare(patient).await;
        reset(sb);
        slow(c.op());
        let err = prepared.send(gw).await.expect_err("timed out");
        assert_error(&err, Code::DeadlineExceeded, "OUTCOME_UNKNOWN");
        assert!(!retryable(&err), "{c:?}: no RetryInfo");
        assert_eq!(calls_any_channel(sb, c.op()), 1, "{c:?}: sent once");
        reset(sb);
    }
}

#[tokio::test]
async fn a_refused_connection_is_unavailable_with_retry_info() {
    // A port held bound but never listening: connections are refused, and
    // no other test can take the port meanwhile.
    let dead = RefusingPort::bind();
    let url = format!("http://{}", dead.addr());
    let gw = TestGateway::start_with(|c| {
        use_upstream(
            c,
            idgate::config::UpstreamConfig {
                base_url: url.clone(),
                result_base_url: url,
                ..Default::default()
            },
        );
        // "some-appkey" below must reach the (dead) upstream.
        c.guard.accept_foreign_appkeys = true;
    })
    .await;
    let err = gw
        .journeys()
        .create_journey(happy_person())
        .await
        .unwrap_err();
    assert_error(&err, Code::Unavailable, "UPSTREAM_UNAVAILABLE");
    assert!(retryable(&err));

    // A consuming call that never left is safe to retry too.
    let err = gw
        .submit_images("some-appkey", &document_pair(DocumentType::Rg))
        .await
        .unwrap_err();
    assert_error(&err, Code::Unavailable, "UPSTREAM_UNAVAILABLE");
    assert!(retryable(&err));
    gw.stop().await;
    drop(dead);
}

#[tokio::test]
async fn appkey_failures_follow_the_status_table_and_appkey_is_sent_once() {
    // A failed CreateJourney leaves the caller holding nothing: its
    // failures are not OUTCOME_UNKNOWN (the README's error model lists only
    // /captcha, /3d/liveness and /document there), but /appkey is still
    // never sent twice by the gateway.
    let gw = TestGateway::start().await;
    let sb = gw.sandbox();
    gw.create_journey().await;
    let cases = [
        (
            FaultAction::Status { status: 500 },
            Code::Internal,
            "UPSTREAM_INTERNAL",
            false,
        ),
        (
            FaultAction::Status { status: 503 },
            Code::Unavailable,
            "UPSTREAM_UNAVAILABLE",
            true,
        ),
        (
            FaultAction::Drop,
            Code::Unavailable,
            "UPSTREAM_UNAVAILABLE",
            true,
        ),
        (
            FaultAction::Malformed,
            Code::Internal,
            "UPSTREAM_MALFORMED_RESPONSE",
            false,
        ),
    ];
    for (action, code, reason_, retry) in cases {
        reset(sb);
        inject(sb, Operation::Appkey, action);
        let err = gw
            .journeys()
            .create_journey(happy_person())
            .await
            .unwrap_err();
        assert_error(&err, code, reason_);
        assert_eq!(retryable(&err), retry, "{action:?}");
        assert_eq!(gw.calls(Operation::Appkey), 1, "{action:?}: sent once");
    }
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
