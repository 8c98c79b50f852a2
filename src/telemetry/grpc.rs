//! Server spans and RPC metrics of the tonic servers.
//!
//! [`GrpcServerLayer`] goes on `tonic::transport::Server::builder().layer(..)`.
//! Per request it continues the caller's trace (`traceparent`,
//! `tracestate`, `baggage`), opens a `grpc.server` span after the
//! OpenTelemetry RPC conventions, and counts the call in the RPC metrics.
//! The journey reference of the caller's baggage is recorded on the span
//! only once the listener's authentication knows the caller
//! ([`super::trust_baggage`]).
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
//!
//! - This file: the layer and its service, which open the span.
//! - `methods`: the known method names.
//! - `status`: reading a call's gRPC status.
//! - `body`: the response future and body that finish the call.

mod body;
mod methods;
mod status;

use std::{
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use http::{Request, Response};
// tonic's accepted-connection types, under a name of their own:
// telemetry spells no `server` module path.
use super::spans::SpanExt as _;
use tonic::transport::server as tonic_conn;
use tower::{Layer, Service};
use tracing::{Span, field::Empty};

pub use body::{GrpcBody, ResponseFuture};
pub use methods::OTHER;
pub use status::is_server_error;

use self::{body::Finisher, methods::method_of};
use super::{
    journey::{BaggageJourney, journey_from_context},
    metrics::Metrics,
    propagation::{extract_from_http, remember_caller},
};
use crate::net::ConnInfo;

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
/// Public for `benches/log_lines.rs`, which measures lines inside it.
pub fn server_span(full: &str, service: &str, method: &str) -> Span {
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
        idgate.channel = Empty,
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
        // The journey the caller's baggage names waits for the caller to
        // be known (`trust_baggage`): the trace context alone is taken
        // from a caller not yet authenticated.
        if let Some(journey) = journey_from_context(&parent) {
            req.extensions_mut().insert(BaggageJourney(journey));
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
                    ext.get::<tonic_conn::TlsConnectInfo<ConnInfo>>()
                        .map(tonic_conn::TlsConnectInfo::get_ref)
                })
                .map(|c| Arc::clone(&c.remote_text))
                .or_else(|| {
                    ext.get::<tonic_conn::TcpConnectInfo>()
                        .and_then(tonic_conn::TcpConnectInfo::remote_addr)
                        .map(|addr| addr.to_string().into())
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
