//! How trace exports arrive at the collector (headers, compression, what
//! they carry), refusals on demand, and the OTLP/HTTP endpoint.

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message as _;

use super::{Service, Store};

/// How one trace export arrived: its headers (names in lower case),
/// whether its body was gzip-compressed, its spans and a digest of its
/// content (the same export sent again has the same digest).
#[derive(Debug, Clone)]
pub struct ExportSeen {
    /// Request headers, or gRPC metadata.
    pub headers: Vec<(String, String)>,
    /// `grpc-encoding: gzip` or `content-encoding: gzip`.
    pub gzip: bool,
    /// Spans in the request.
    pub spans: usize,
    /// A hash of the request's encoding.
    pub digest: u64,
}

impl ExportSeen {
    pub(super) fn of(headers: &http::HeaderMap, request: &ExportTraceServiceRequest) -> Self {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let gzip = headers
            .iter()
            .any(|(k, v)| (k == "grpc-encoding" || k == "content-encoding") && v == "gzip");
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        let digest = std::hash::BuildHasher::hash_one(
            &std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default(),
            request.encode_to_vec(),
        );
        Self {
            headers,
            gzip,
            spans,
            digest,
        }
    }

    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Store {
    /// Records how an export arrived; `Some(transient)` when it is to be
    /// refused.
    pub(super) fn arrived(&self, seen: ExportSeen) -> Option<bool> {
        self.exports.lock().expect("collector lock").push(seen);
        let mut refusals = self.refusals.lock().expect("collector lock");
        (refusals.0 > 0).then(|| {
            refusals.0 -= 1;
            refusals.1
        })
    }
}

/// `POST /v1/traces` of OTLP/HTTP with a protobuf body, gzip-compressed
/// or not.
pub(super) async fn export_http(
    axum::extract::State(service): axum::extract::State<Service>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> impl axum::response::IntoResponse {
    let gzip = headers
        .get("content-encoding")
        .is_some_and(|v| v.as_bytes() == b"gzip");
    let body = if gzip {
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain)
            .map(|_| axum::body::Bytes::from(plain))
            .unwrap_or_default()
    } else {
        body
    };
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            [("content-type", "text/plain")],
            b"not an ExportTraceServiceRequest".to_vec(),
        );
    };
    let refused = |status| {
        (
            status,
            [("content-type", "text/plain")],
            b"refused".to_vec(),
        )
    };
    match service.0.arrived(ExportSeen::of(&headers, &request)) {
        Some(true) => return refused(axum::http::StatusCode::SERVICE_UNAVAILABLE),
        Some(false) => return refused(axum::http::StatusCode::BAD_REQUEST),
        None => {}
    }
    service.0.keep_spans(request);
    (
        axum::http::StatusCode::OK,
        [("content-type", "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}
