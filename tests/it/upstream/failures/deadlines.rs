//! A slow upstream is bounded by time: the configured timeout ends a call
//! once (without a retry when the appkey may be consumed), the caller's
//! deadline caps a call and its retries, and a passed deadline sends
//! nothing.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use idgate::domain::{Operation, Snapshot};
use idgate::{context::CallContext, upstream::UpstreamError};
use tonic::Code;

use super::{ak, answering, ctx};
use crate::support::upstream::*;

fn slow(path: &'static str, count: Counter) -> Router {
    Router::new().route(
        path,
        post(move || {
            count.hit();
            async move {
                tokio::time::sleep(FOREVER).await;
                "{}"
            }
        }),
    )
}

#[tokio::test]
async fn a_slow_captcha_times_out_once_with_an_unknown_outcome() {
    let count = Counter::default();
    let addr = serve(slow(CAPTCHA, count.clone())).await;
    let c = client_with(addr, |c| c.timeout_ms = 200);
    let err = c
        .captcha(
            &ctx(),
            &ak(),
            "ch",
            &[Snapshot {
                image: jpeg(b"s"),
                face_type_code: "1".to_owned(),
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Timeout {
            op: Operation::Captcha
        }
    );
    assert_eq!(count.get(), 1);
    assert_eq!(
        grpc(err),
        (Code::DeadlineExceeded, "OUTCOME_UNKNOWN".into(), false)
    );
}

#[tokio::test]
async fn the_callers_deadline_caps_a_slow_safe_call_and_its_retries() {
    let count = Counter::default();
    let addr = serve(slow(RESULT, count.clone())).await;
    // The configured timeout (10 s) would allow far more; the caller gives 300 ms.
    let c = client_with(addr, |c| {
        c.timeout_ms = 10_000;
        c.safe_attempts = 5;
    });
    let started = Instant::now();
    let err = c
        .journey_result(
            &CallContext::with_timeout(Duration::from_millis(300)),
            &ak(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Timeout {
            op: Operation::Result
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the caller's deadline"
    );
    assert_eq!(count.get(), 1, "no time was left for a retry");
    assert_eq!(
        grpc(err),
        (Code::DeadlineExceeded, "UPSTREAM_TIMEOUT".into(), true)
    );
}

#[tokio::test]
async fn a_passed_deadline_sends_nothing() {
    let count = Counter::default();
    let addr = serve(answering(CAPTCHA, 200, "{}", count.clone())).await;
    let past = CallContext::with_deadline(tokio::time::Instant::now());
    let err = client(addr)
        .captcha(
            &past,
            &ak(),
            "ch",
            &[Snapshot {
                image: jpeg(b"s"),
                face_type_code: "1".to_owned(),
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::DeadlineExceeded {
            op: Operation::Captcha
        }
    );
    assert_eq!(count.get(), 0);
    assert_eq!(
        grpc(err),
        (Code::DeadlineExceeded, "DEADLINE_EXCEEDED".into(), false)
    );
}
