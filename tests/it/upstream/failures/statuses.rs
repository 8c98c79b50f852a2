//! An upstream refusal by HTTP status becomes the gRPC code and reason a
//! caller can act on, is not retried, and its message carries nothing the
//! upstream's body said.

use idgate::upstream::UpstreamError;
use tonic::Code;

use super::{ak, answering, assert_clean, ctx};
use crate::support::upstream::*;

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
async fn a_digital_licence_401_is_reported_as_appkey_or_licence_rejected() {
    let addr = serve(answering(DOCUMENT, 401, "", Counter::default())).await;
    let err = client(addr)
        .digital_licence(&ctx(), &ak(), &jpeg(b"q"))
        .await
        .unwrap_err();
    assert_eq!(grpc(err).1, "APPKEY_EXPIRED_OR_LICENCE_REJECTED");
}
