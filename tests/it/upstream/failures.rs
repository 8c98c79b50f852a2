//! Every failure maps to the intended `UpstreamError` and gRPC status,
//! operations that consume the appkey are sent exactly once, and the
//! body bound holds.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::routing::post;
use idgate::domain::{Appkey, SessionToken, Snapshot};
use idgate::{
    context::CallContext,
    domain::Operation,
    upstream::{ChannelEndpoint, UpstreamError},
};
use tonic::Code;

use crate::support::{net::RefusingPort, upstream::*};

/// A route answering `status` with `body`, counting hits.
fn answering(path: &'static str, status: u16, body: &'static str, count: Counter) -> Router {
    Router::new().route(
        path,
        post(move || {
            count.hit();
            async move { (StatusCode::from_u16(status).expect("status"), body) }
        }),
    )
}

/// The core upstream's 3D paths as a channel, as the router's channels
/// are built.
fn core_channel(addr: std::net::SocketAddr) -> ChannelEndpoint {
    ChannelEndpoint::new(
        format!("http://{addr}"),
        SESSION_3D,
        LIVENESS_3D,
        Duration::from_secs(10),
    )
}

fn ctx() -> CallContext {
    CallContext::unbounded()
}

fn ak() -> Appkey {
    Appkey::new("canary-appkey-0001")
}

/// No error message may carry the appkey, the answer, or personal data.
fn assert_clean(err: &UpstreamError) {
    let text = format!("{err} {err:?}");
    for needle in ["canary", "MARIA", "52998224725", "Silva"] {
        assert!(!text.contains(needle), "{text}");
    }
}

#[tokio::test]
async fn garbage_json_is_malformed_and_names_no_value() {
    let count = Counter::default();
    let addr = serve(answering(
        CHALLENGE,
        200,
        r#"{"chkey": MARIA 52998224725"#,
        count.clone(),
    ))
    .await;
    let err = client(addr).challenge(&ctx(), &ak()).await.unwrap_err();
    assert!(
        matches!(
            err,
            UpstreamError::Malformed {
                op: Operation::Challenge,
                ..
            }
        ),
        "{err:?}"
    );
    assert_clean(&err);
    assert_eq!(count.get(), 1, "a malformed answer is not retried");
    assert_eq!(
        grpc(err),
        (Code::Internal, "UPSTREAM_MALFORMED_RESPONSE".into(), false)
    );
}

#[tokio::test]
async fn wrong_scalar_types_are_malformed_with_position_only() {
    let addr = serve(answering(
        CHALLENGE,
        200,
        r#"{"chkey":"k","totalTime":"MARIA","challenges":[]}"#,
        Counter::default(),
    ))
    .await;
    let err = client(addr).challenge(&ctx(), &ak()).await.unwrap_err();
    let UpstreamError::Malformed { detail, .. } = &err else {
        panic!("malformed expected, got {err:?}");
    };
    assert!(
        detail.starts_with("unexpected type or value at line 1 column"),
        "{detail}"
    );
    assert_clean(&err);
}

#[tokio::test]
async fn an_empty_body_is_malformed() {
    let addr = serve(answering(RESULT, 200, "", Counter::default())).await;
    let err = client(addr)
        .journey_result(&ctx(), &ak())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, UpstreamError::Malformed { op: Operation::Result, detail } if detail.starts_with("unexpected end of input")),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_undecodable_result_photo_is_malformed_naming_its_path() {
    let addr = serve(answering(
        RESULT,
        200,
        r#"{"status":"Completo","fotos":{"documento":[{"descricao":"x","imagem":"MARIA!!"}]}}"#,
        Counter::default(),
    ))
    .await;
    let err = client(addr)
        .journey_result(&ctx(), &ak())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Malformed {
            op: Operation::Result,
            detail: "undecodable Base64 image at fotos.documento[0].imagem".into()
        }
    );
}

#[tokio::test]
async fn an_oversize_body_with_content_length_is_rejected() {
    let big: &'static str = Box::leak("x".repeat(4096).into_boxed_str());
    let addr = serve(answering(RESULT, 200, big, Counter::default())).await;
    let c = client_with(addr, |c| c.max_response_bytes = 1024);
    let err = c.journey_result(&ctx(), &ak()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Oversize {
            op: Operation::Result,
            limit: 1024
        }
    );
    assert_eq!(grpc(err).1, "UPSTREAM_RESPONSE_TOO_LARGE");
}

#[tokio::test]
async fn an_oversize_streamed_body_is_cut_off_while_reading() {
    let addr = serve(Router::new().route(
        RESULT,
        post(|| async {
            // Chunked, no Content-Length: only the running count can stop it.
            let chunks =
                (0..64).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'{'; 512])));
            Body::from_stream(futures_util::stream::iter(chunks))
        }),
    ))
    .await;
    let c = client_with(addr, |c| c.max_response_bytes = 2048);
    let err = c.journey_result(&ctx(), &ak()).await.unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Oversize {
            op: Operation::Result,
            limit: 2048
        }
    );
}

#[tokio::test]
async fn upstream_statuses_map_to_grpc_codes_and_reasons() {
    let cases: [(&'static str, u16, Code, &str); 5] = [
        (CHALLENGE, 401, Code::Unauthenticated, "APPKEY_EXPIRED"),
        (RESULT, 404, Code::NotFound, "RESULT_NOT_AVAILABLE"),
        (
            RESULT,
            400,
            Code::InvalidArgument,
            "UPSTREAM_REJECTED_REQUEST",
        ),
        (DOCUMENT, 400, Code::InvalidArgument, "DOCUMENT_UNUSABLE"),
        (
            CREDENTIAL,
            401,
            Code::Unauthenticated,
            "OPERATOR_CREDENTIALS_REJECTED",
        ),
    ];
    for (path, status, code, reason) in cases {
        let count = Counter::default();
        let addr = serve(answering(
            path,
            status,
            "{\"erro\":\"MARIA\"}",
            count.clone(),
        ))
        .await;
        let c = client(addr);
        let err = match path {
            CHALLENGE => c.challenge(&ctx(), &ak()).await.unwrap_err(),
            RESULT => c.journey_result(&ctx(), &ak()).await.unwrap_err(),
            DOCUMENT => c
                .document_images(&ctx(), &ak(), &[jpeg(b"x")])
                .await
                .unwrap_err(),
            _ => c
                .credential(&ctx(), &profile().login, &profile().password)
                .await
                .unwrap_err(),
        };
        assert!(
            matches!(err, UpstreamError::Status { status: s, .. } if s == status),
            "{err:?}"
        );
        assert_clean(&err);
        assert_eq!(count.get(), 1, "{path} {status} is not retried");
        assert_eq!(
            grpc(err),
            (code, reason.to_owned(), false),
            "{path} {status}"
        );
    }
}

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

#[tokio::test]
async fn a_session_answer_without_a_token_is_malformed() {
    let addr = serve(answering(
        SESSION_3D,
        200,
        r#"{"vendor":"v","url":"u"}"#,
        Counter::default(),
    ))
    .await;
    let c = client(addr);
    let err = c
        .session_token_3d(&ctx(), &core_channel(addr), &ak(), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        UpstreamError::Malformed {
            op: Operation::SessionToken3D,
            detail: "missing field `token`".into()
        }
    );
}

#[tokio::test]
async fn a_digital_licence_401_is_reported_as_appkey_or_licence_rejected() {
    let addr = serve(answering(DOCUMENT, 401, "", Counter::default())).await;
    let err = client(addr)
        .digital_licence(&ctx(), &ak(), &jpeg(b"q"))
        .await
        .unwrap_err();
    assert_eq!(grpc(err).1, "APPKEY_EXPIRED_OR_LICENCE_REJECTED");
}
