//! Retries never repeat what may have consumed the appkey: safe
//! operations retry transient statuses and dropped connections, operations
//! that consume it are sent exactly once and end as outcome unknown, a
//! refused connection sent nothing, and failover between channels is left
//! to the router.

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use idgate::domain::{Operation, SessionToken, Snapshot};
use idgate::upstream::{ChannelEndpoint, UpstreamError};
use tonic::Code;

use super::{ak, answering, core_channel, ctx};
use crate::support::{net::RefusingPort, upstream::*};

#[tokio::test]
async fn a_503_on_a_safe_operation_is_retried_up_to_safe_attempts() {
    let count = Counter::default();
    let addr = serve(answering(RESULT, 503, "", count.clone())).await;
    let err = client_with(addr, |c| c.safe_attempts = 3)
        .journey_result(&ctx(), &ak())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Status {
            op: Operation::Result,
            status: 503
        }
    );
    assert_eq!(count.get(), 3);
    assert_eq!(
        grpc(err),
        (Code::Unavailable, "UPSTREAM_UNAVAILABLE".into(), true)
    );
}

#[tokio::test]
async fn a_transient_502_then_success_returns_the_answer() {
    let count = Counter::default();
    let c2 = count.clone();
    let addr = serve(Router::new().route(
        RESULT,
        post(move || {
            let n = c2.hit();
            async move {
                if n == 0 {
                    (StatusCode::BAD_GATEWAY, "")
                } else {
                    (StatusCode::OK, r#"{"status":"Em processamento"}"#)
                }
            }
        }),
    ))
    .await;
    let r = client(addr)
        .journey_result(&ctx(), &ak())
        .await
        .expect("second attempt");
    assert_eq!(r.raw_status, "Em processamento");
    assert_eq!(count.get(), 2);
}

#[tokio::test]
async fn a_500_on_a_safe_operation_is_not_retried() {
    let count = Counter::default();
    let addr = serve(answering(CHALLENGE, 500, "", count.clone())).await;
    let err = client(addr).challenge(&ctx(), &ak()).await.unwrap_err();
    assert_eq!(count.get(), 1);
    assert_eq!(
        grpc(err),
        (Code::Internal, "UPSTREAM_INTERNAL".into(), false)
    );
}

#[tokio::test]
async fn consuming_operations_are_sent_once_on_500_and_the_outcome_is_unknown() {
    for path in [CAPTCHA, LIVENESS_3D, DOCUMENT] {
        let count = Counter::default();
        let addr = serve(answering(path, 500, "", count.clone())).await;
        let c = client_with(addr, |c| c.safe_attempts = 5);
        let err = match path {
            CAPTCHA => c
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
                .unwrap_err(),
            LIVENESS_3D => c
                .liveness_3d(&ctx(), &core_channel(addr), &ak(), &SessionToken::new("st"))
                .await
                .unwrap_err(),
            _ => c
                .document_images(&ctx(), &ak(), &[jpeg(b"d")])
                .await
                .unwrap_err(),
        };
        assert_eq!(count.get(), 1, "{path} sent exactly once");
        assert!(err.outcome_unknown(), "{path}: {err:?}");
        assert_eq!(
            grpc(err),
            (Code::Unknown, "OUTCOME_UNKNOWN".into(), false),
            "{path}"
        );
    }
}

#[tokio::test]
async fn consuming_operations_are_sent_once_on_a_dropped_connection() {
    for op in [
        Operation::Captcha,
        Operation::Liveness3D,
        Operation::DocumentImages,
        Operation::DigitalLicence,
    ] {
        let count = Counter::default();
        let addr = serve_dropping(count.clone()).await;
        let c = client_with(addr, |c| c.safe_attempts = 5);
        let err = match op {
            Operation::Captcha => {
                c.captcha(
                    &ctx(),
                    &ak(),
                    "ch",
                    &[Snapshot {
                        image: jpeg(b"s"),
                        face_type_code: "1".to_owned(),
                    }],
                )
                .await
            }
            Operation::Liveness3D => {
                c.liveness_3d(&ctx(), &core_channel(addr), &ak(), &SessionToken::new("st"))
                    .await
            }
            Operation::DocumentImages => c
                .document_images(&ctx(), &ak(), &[jpeg(b"d")])
                .await
                .map(|_| Default::default()),
            _ => c
                .digital_licence(&ctx(), &ak(), &jpeg(b"q"))
                .await
                .map(|_| Default::default()),
        }
        .unwrap_err();
        assert_eq!(err, UpstreamError::Transport { op }, "{op}");
        assert_eq!(count.get(), 1, "{op} sent exactly once");
        assert_eq!(
            grpc(err),
            (Code::Unknown, "OUTCOME_UNKNOWN".into(), false),
            "{op}"
        );
    }
}

#[tokio::test]
async fn a_dropped_connection_on_a_safe_operation_is_retried() {
    let count = Counter::default();
    let addr = serve_dropping(count.clone()).await;
    let err = client_with(addr, |c| c.safe_attempts = 3)
        .challenge(&ctx(), &ak())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Transport {
            op: Operation::Challenge
        }
    );
    assert_eq!(count.get(), 3);
    assert_eq!(
        grpc(err),
        (Code::Unavailable, "UPSTREAM_UNAVAILABLE".into(), true)
    );
}

#[tokio::test]
async fn a_refused_connection_is_connect_and_safe_to_retry_even_for_captcha() {
    let refusing = RefusingPort::bind();
    let err = client(refusing.addr())
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
        UpstreamError::Connect {
            op: Operation::Captcha
        }
    );
    assert!(err.request_not_sent());
    assert_eq!(
        grpc(err),
        (Code::Unavailable, "UPSTREAM_UNAVAILABLE".into(), true)
    );
}

#[tokio::test]
async fn a_channel_with_one_session_attempt_leaves_failover_to_the_router() {
    let count = Counter::default();
    let addr = serve(answering(SESSION_3D, 503, "", count.clone())).await;
    let c = client_with(addr, |c| c.safe_attempts = 3);
    let one = ChannelEndpoint::new(
        format!("http://{addr}"),
        SESSION_3D,
        LIVENESS_3D,
        Duration::from_secs(2),
    );
    let err = c
        .session_token_3d(&ctx(), &one, &ak(), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Status {
            op: Operation::SessionToken3D,
            status: 503
        }
    );
    assert_eq!(count.get(), 1);
}
