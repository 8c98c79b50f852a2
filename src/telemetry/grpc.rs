//! Server spans and RPC metrics of the tonic servers.
//!
//! [`GrpcServerLayer`] goes on `tonic::transport::Server::builder().layer(..)`.
//! Per request it continues the caller's trace (`traceparent`,
//! `tracestate`, `baggage`), opens a `grpc.server` span after the
//! OpenTelemetry RPC conventions, and counts the call in the RPC metrics.
//!
//! The gRPC status of a call is known only at its end: in the response
//! headers for a trailers-only response (how tonic answers an error from a
//! unary handler), else in the trailers after the last message. The layer
//! therefore wraps the response body and finishes the span and the metrics
//! when the trailers pass, when the body ends without any (`UNKNOWN`), or
//! when the body is dropped first (the client went away: `CANCELLED`). A
//! stream's latency is its whole life.
//!
//! Method names come from the served API's descriptors (plus health and
//! reflection); any other path is `_OTHER` in spans and labels, so a caller
//! cannot mint label values.

use std::{
    collections::HashMap,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::LazyLock,
    task::{Context, Poll, ready},
    time::Instant,
};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use prost::Message;
use tonic::{
    Code,
    transport::server::{TcpConnectInfo, TlsConnectInfo},
};
use tower::{Layer, Service};
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::net::ConnInfo;

use super::{
    journey::{journey_from_context, record_journey},
    logs::access,
    metrics::{InFlight, Metrics},
    propagation::{extract_from_http, remember_caller},
};

/// Label and attribute value of a method outside the served API.
pub const OTHER: &str = "_OTHER";

/// Services served beside `idgate.v1` whose methods are labelled by name,
/// and whether each streams its response.
const EXTRA_METHODS: [(&str, bool); 4] = [
    ("grpc.health.v1.Health/Check", false),
    ("grpc.health.v1.Health/Watch", true),
    (
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        true,
    ),
    (
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        true,
    ),
];

/// `package.Service/Method` of every RPC the gateway serves, and whether it
/// streams its response. (Looked up on every call, never written after
/// start: a fast hasher.)
static KNOWN_METHODS: LazyLock<HashMap<String, bool, foldhash::fast::RandomState>> =
    LazyLock::new(|| {
        let mut known: HashMap<String, bool, foldhash::fast::RandomState> = EXTRA_METHODS
            .iter()
            .map(|(m, streams)| ((*m).to_owned(), *streams))
            .collect();
        // The descriptor set is compiled in by build.rs; should it ever fail to
        // decode, methods are reported as _OTHER rather than the server failing.
        if let Ok(fds) = prost_types::FileDescriptorSet::decode(crate::proto::FILE_DESCRIPTOR_SET) {
            for file in &fds.file {
                let package = file.package();
                for service in &file.service {
                    for method in &service.method {
                        known.insert(
                            format!("{package}.{}/{}", service.name(), method.name()),
                            method.server_streaming(),
                        );
                    }
                }
            }
        }
        known
    });

/// The `(full method, service, method)` of a request path, or `_OTHER`s,
/// and whether the method streams its response (true when unknown).
fn method_of(path: &str) -> ((&'static str, &'static str, &'static str), bool) {
    path.strip_prefix('/')
        .and_then(|p| KNOWN_METHODS.get_key_value(p))
        .and_then(|(full, streams)| {
            let full = full.as_str();
            let (service, method) = full.split_once('/')?;
            Some(((full, service, method), *streams))
        })
        .unwrap_or(((OTHER, OTHER, OTHER), true))
}

/// The span of the request being served, as a request extension: tonic
/// handlers read it with `request.extensions().get::<ServerSpan>()` to
/// record the journey on it (see [`super::record_journey`]).
#[derive(Debug, Clone)]
pub struct ServerSpan(pub Span);

/// Tower layer of the tonic servers: server spans, RPC metrics and, when
/// asked, the access log.
#[derive(Debug, Clone)]
pub struct GrpcServerLayer {
    metrics: Metrics,
    access_log: bool,
}

impl GrpcServerLayer {
    /// A layer that records into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics,
            access_log: false,
        }
    }

    /// Writes one access log line per RPC ([`super::logs::access`]).
    pub fn with_access_log(mut self, on: bool) -> Self {
        self.access_log = on;
        self
    }
}

impl<S> Layer<S> for GrpcServerLayer {
    type Service = GrpcServerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcServerService {
            inner,
            metrics: self.metrics.clone(),
            access_log: self.access_log,
        }
    }
}

/// The service [`GrpcServerLayer`] wraps around a tonic router.
#[derive(Debug, Clone)]
pub struct GrpcServerService<S> {
    inner: S,
    metrics: Metrics,
    access_log: bool,
}

/// Opens the server span of a call to `full` (`package.Service/Method`).
pub(crate) fn server_span(full: &str, service: &str, method: &str) -> Span {
    tracing::info_span!(
        "grpc.server",
        otel.name = full,
        otel.kind = "server",
        otel.status_code = Empty,
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = Empty,
        idgate.journey_ref = Empty,
        idgate.customer_reference = Empty,
    )
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for GrpcServerService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<GrpcBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let ((full, service, method), streams) = method_of(req.uri().path());
        let parent = extract_from_http(req.headers());
        let span = server_span(full, service, method);
        if let Some(journey) = journey_from_context(&parent) {
            record_journey(&span, &journey);
        }
        // Fails only without an OpenTelemetry layer, when there is no trace
        // to continue anyway.
        remember_caller(&span, &parent);
        let _ = span.set_parent(parent);
        req.extensions_mut().insert(ServerSpan(span.clone()));

        let access = self.access_log.then(|| {
            let ext = req.extensions();
            ext.get::<ConnInfo>()
                .or_else(|| {
                    ext.get::<TlsConnectInfo<ConnInfo>>()
                        .map(TlsConnectInfo::get_ref)
                })
                .map(|c| c.remote)
                .or_else(|| {
                    ext.get::<TcpConnectInfo>()
                        .and_then(TcpConnectInfo::remote_addr)
                })
        });
        let finisher = Finisher {
            in_flight: Some(self.metrics.rpc_in_flight(full)),
            metrics: self.metrics.clone(),
            method: full,
            started: Instant::now(),
            span: span.clone(),
            streams,
            access,
        };
        // The ready service is the one that must serve the call; keep a
        // fresh clone for the next one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let future = span.in_scope(|| inner.call(req));
        ResponseFuture {
            inner: future,
            finisher: Some(finisher),
        }
    }
}

/// Finishes one call's span and metrics, exactly once: with the status
/// when it is seen, else as `CANCELLED` when dropped (the client went away
/// before the handler answered or before the body ended).
struct Finisher {
    metrics: Metrics,
    method: &'static str,
    started: Instant,
    span: Span,
    /// The method streams its response: the handler's work happens while
    /// the body is polled, so the body is polled in the span. (A unary
    /// body only carries the answer out: entering the span for each of
    /// its frames would cost a call a few hundred instructions for nothing.)
    streams: bool,
    in_flight: Option<InFlight>,
    /// With the access log on: the peer's address, if known.
    access: Option<Option<SocketAddr>>,
}

impl Finisher {
    fn finish(mut self, code: Code) {
        self.record(code);
    }

    fn record(&mut self, code: Code) {
        if let Some(in_flight) = self.in_flight.take() {
            record_status(&self.span, code);
            let elapsed = self.started.elapsed();
            self.metrics.record_rpc(self.method, code, elapsed);
            if let Some(peer) = self.access {
                access(&self.span, self.method, code, elapsed, peer);
            }
            drop(in_flight);
        }
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

/// Records the gRPC code on a server span; the codes that mean the server
/// failed (OpenTelemetry RPC conventions: UNKNOWN, DEADLINE_EXCEEDED,
/// UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS) make it an error span.
/// A caller's mistake (INVALID_ARGUMENT, NOT_FOUND, ...) is not a server
/// error.
fn record_status(span: &Span, code: Code) {
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
fn status_in(headers: &HeaderMap) -> Option<Code> {
    const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
    headers
        .get(&GRPC_STATUS)
        .map(|v| Code::from_bytes(v.as_bytes()))
}

/// The code a gRPC client infers from a non-200 HTTP status without
/// `grpc-status` (grpc's http-grpc-status-mapping).
fn code_of_http_status(status: http::StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

pin_project! {
    /// Future of [`GrpcServerService`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        finisher: Option<Finisher>,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<GrpcBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = match this.finisher {
            Some(f) => {
                let _entered = f.span.enter();
                ready!(this.inner.poll(cx))
            }
            None => ready!(this.inner.poll(cx)),
        };
        let finisher = this.finisher.take();
        Poll::Ready(match result {
            Ok(response) => {
                let code = status_in(response.headers()).or_else(|| {
                    (response.status() != http::StatusCode::OK)
                        .then(|| code_of_http_status(response.status()))
                });
                let finisher = match (code, finisher) {
                    (Some(code), Some(f)) => {
                        f.finish(code);
                        None
                    }
                    (_, f) => f,
                };
                Ok(response.map(|inner| GrpcBody { inner, finisher }))
            }
            Err(e) => {
                if let Some(f) = finisher {
                    f.finish(Code::Unknown);
                }
                Err(e)
            }
        })
    }
}

pin_project! {
    /// Response body of [`GrpcServerService`]: finishes the call when its
    /// status passes by.
    pub struct GrpcBody<B> {
        #[pin]
        inner: B,
        finisher: Option<Finisher>,
    }
}

impl<B> Body for GrpcBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = match this.finisher {
            // A streaming handler's work happens here: keep it in the span.
            Some(f) if f.streams => {
                let _entered = f.span.enter();
                ready!(this.inner.poll_frame(cx))
            }
            _ => ready!(this.inner.poll_frame(cx)),
        };
        let code = match &polled {
            Some(Ok(frame)) => frame.trailers_ref().and_then(status_in),
            Some(Err(_)) => Some(Code::Unknown),
            // The body ended without trailers: no status was sent.
            None => Some(Code::Unknown),
        };
        if let Some(code) = code {
            if let Some(f) = this.finisher.take() {
                f.finish(code);
            }
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_methods_are_known_and_other_paths_are_other() {
        assert_eq!(
            method_of("/idgate.v1.JourneyService/CreateJourney"),
            (
                (
                    "idgate.v1.JourneyService/CreateJourney",
                    "idgate.v1.JourneyService",
                    "CreateJourney"
                ),
                false
            )
        );
        assert_eq!(
            method_of("/grpc.health.v1.Health/Check").0.2,
            "Check",
            "health is labelled by name"
        );
        assert_eq!(
            method_of("/idgate.v1.JourneyService/j-secret-123"),
            ((OTHER, OTHER, OTHER), true)
        );
        assert_eq!(method_of("no-slash"), ((OTHER, OTHER, OTHER), true));
        assert!(method_of("/idgate.v1.JourneyService/WatchJourney").1);
        assert!(method_of("/grpc.health.v1.Health/Watch").1);
    }

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

    #[test]
    fn a_dropped_body_counts_as_cancelled() {
        let metrics = Metrics::default();
        let finisher = Finisher {
            in_flight: Some(metrics.rpc_in_flight("grpc.health.v1.Health/Watch")),
            metrics: metrics.clone(),
            method: "grpc.health.v1.Health/Watch",
            started: Instant::now(),
            span: Span::none(),
            streams: true,
            access: None,
        };
        let body = GrpcBody {
            inner: http_body_util::Empty::<Bytes>::new(),
            finisher: Some(finisher),
        };
        drop(body);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains(
                r#"idgate_rpc_requests_total{method="grpc.health.v1.Health/Watch",code="CANCELLED"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"idgate_rpc_in_flight{method="grpc.health.v1.Health/Watch"} 0"#),
            "{text}"
        );
    }
}
