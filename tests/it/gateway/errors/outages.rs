//! An upstream that fails (5xx, a dropped or refused connection, an
//! answer slower than its timeout): a safe call is retried within the
//! deadline and answered `UNAVAILABLE` or `INTERNAL`, while a call that
//! consumes the appkey (and `/appkey` itself) is sent exactly once and,
//! when it may have taken effect, reported `OUTCOME_UNKNOWN`.

use std::time::Duration;

use idgate::{
    domain::Operation,
    proto::v1,
    sandbox::{
        FaultAction, FaultRule,
        samples::{DocumentType, LivenessOutcome},
    },
};
use tonic::Code;

use super::{Consuming, assert_consuming_sent_once, calls_any_channel, inject, meta, reset};
use crate::support::{gateway::*, net::RefusingPort};

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

/// `req` with a caller deadline.
fn with_deadline<T>(req: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(req);
    req.set_timeout(Duration::from_secs(10));
    req
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
        c.journeys.accept_foreign_appkeys = true;
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
