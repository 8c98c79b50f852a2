//! What a matched rule answers instead of the service: a forced status, a
//! dropped connection, a malformed, wrongly shaped or oversize body, or a
//! chosen liveness verdict.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::FaultAction;
use crate::sandbox::error::message_response;

/// The response a fault gives; `None` for [`FaultAction::Delay`] and for
/// [`FaultAction::RepeatAppkey`] (the store's to answer: `ops::appkey`).
pub(crate) fn response(action: FaultAction) -> Option<Response> {
    match action {
        FaultAction::Delay | FaultAction::RepeatAppkey => None,
        FaultAction::Status { status } => Some(message_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "injected fault",
        )),
        FaultAction::Drop => Some(dropped_connection()),
        FaultAction::Malformed => Some(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "{\"valid\": tru, \"codID\": <<garbage>>",
            )
                .into_response(),
        ),
        FaultAction::Oversize { bytes } => Some(oversize(bytes)),
        FaultAction::Verdict { outcome } => {
            let outcome = outcome.liveness();
            Some(
                (
                    StatusCode::OK,
                    axum::Json(serde_json::json!({
                        "valid": outcome.is_valid(),
                        "codID": outcome.cod_id(),
                        "cause": outcome.cause(),
                        "protocol": "0",
                    })),
                )
                    .into_response(),
            )
        }
        FaultAction::WrongShape => Some(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "{\"isContingency\":\"no\",\"token\":42,\"vendor\":null}",
            )
                .into_response(),
        ),
    }
}

/// A response whose body fails before its first byte: hyper then aborts
/// the connection before the buffered head is flushed, so the client sees
/// the connection close without any HTTP response.
fn dropped_connection() -> Response {
    let stream = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "sandbox fault: dropped connection",
        ))
    });
    Response::new(Body::from_stream(stream))
}

/// `{"padding":"xxx...."}` of exactly `bytes` bytes (at least the braces).
fn oversize(bytes: usize) -> Response {
    const HEAD: &[u8] = b"{\"padding\":\"";
    const TAIL: &[u8] = b"\"}";
    let fill = bytes.saturating_sub(HEAD.len() + TAIL.len());
    let mut body = Vec::with_capacity(HEAD.len() + fill + TAIL.len());
    body.extend_from_slice(HEAD);
    body.resize(HEAD.len() + fill, b'x');
    body.extend_from_slice(TAIL);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
