//! The gRPC status of a call, as the layer reads it from headers and
//! trailers, and what it means for the server span.

use http::HeaderMap;
use tonic::Code;
use tracing::Span;

/// Records the gRPC code on a server span; the codes that mean the server
/// failed (OpenTelemetry RPC conventions: UNKNOWN, DEADLINE_EXCEEDED,
/// UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS) make it an error span.
/// A caller's mistake (INVALID_ARGUMENT, NOT_FOUND, ...) is not a server
/// error.
pub(super) fn record_status(span: &Span, code: Code) {
    span.record("rpc.grpc.status_code", code as i64);
    if is_server_error(code) {
        span.record("otel.status_code", "ERROR");
    }
}

/// True for the gRPC codes that mark a server span as failed.
pub fn is_server_error(code: Code) -> bool {
    matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    )
}

/// The `grpc-status` in `headers`, if any.
pub(super) fn status_in(headers: &HeaderMap) -> Option<Code> {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    headers
        .get(&GRPC_STATUS)
        .map(|v| Code::from_bytes(v.as_bytes()))
}

/// The code a gRPC client infers from a non-200 HTTP status without
/// `grpc-status` (grpc's http-grpc-status-mapping).
pub(super) fn code_of_http_status(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_side_failures_are_error_spans() {
        assert!(is_server_error(Code::Internal));
        assert!(is_server_error(Code::Unavailable));
        assert!(!is_server_error(Code::InvalidArgument));
        assert!(!is_server_error(Code::NotFound));
        assert!(!is_server_error(Code::Ok));
    }

    #[test]
    fn a_garbled_grpc_status_is_unknown_not_a_panic() {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", http::HeaderValue::from_static("banana"));
        assert_eq!(status_in(&h), Some(Code::Unknown));
        h.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(status_in(&h), Some(Code::NotFound));
    }
}
