//! An answer the upstream sent with a success status is still not
//! trusted: a body that does not decode, lacks a required field or
//! exceeds the size bound is malformed or oversize, named by its position
//! only and never by a value it holds.

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use idgate::{domain::Operation, upstream::UpstreamError};
use tonic::Code;

use super::{ak, answering, assert_clean, core_channel, ctx};
use crate::support::upstream::*;

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
