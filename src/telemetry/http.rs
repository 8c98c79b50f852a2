//! Server spans of the axum servers: the gateway's HTTP listener (webhooks,
//! `/metrics`) and the sandbox, whose spans then sit under the gateway's
//! client spans in one trace.
//!
//! Put [`HttpServerLayer`] on the `Router` with `.layer(..)` after the
//! routes: axum then runs it per route, with the matched route template
//! (`MatchedPath`) available for `http.route`. The raw path is never
//! recorded (it could carry values); a request that matched no route has no
//! `http.route`. The span ends with the response head.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use super::spans::SpanExt as _;
use axum::extract::MatchedPath;
use http::{Method, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};
use tracing::{Span, field::Empty};

use super::{
    grpc::{OTHER, ServerSpan},
    journey::{journey_from_context, record_journey},
    metrics::{InFlight, Metrics},
    propagation::{extract_from_http, remember_caller},
};

/// Tower layer of the axum servers: HTTP server spans, and the in-flight
/// gauge when given [`Metrics`].
#[derive(Debug, Clone)]
pub struct HttpServerLayer {
    metrics: Option<Metrics>,
    /// Whether the span takes `idgate.journey_ref` from the caller's
    /// `baggage`: the sandbox's (a vendor stand-in learning whose journey
    /// a call is), never the gateway's, whose senders are authenticated
    /// by the handler after this layer ran (a webhook names its journey
    /// in the body it signs).
    baggage_journey: bool,
}

impl HttpServerLayer {
    /// Spans only, the journey taken from the baggage (the sandbox).
    pub fn new() -> Self {
        Self {
            metrics: None,
            baggage_journey: true,
        }
    }

    /// Spans, and `idgate_http_in_flight` (the gateway's HTTP listener);
    /// nothing but the trace context taken from a sender not yet
    /// authenticated.
    pub fn with_metrics(metrics: Metrics) -> Self {
        Self {
            metrics: Some(metrics),
            baggage_journey: false,
        }
    }
}

impl Default for HttpServerLayer {
    /// The sandbox's ([`HttpServerLayer::new`]).
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for HttpServerLayer {
    type Service = HttpServerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HttpServerService {
            inner,
            metrics: self.metrics.clone(),
            baggage_journey: self.baggage_journey,
        }
    }
}

/// The service [`HttpServerLayer`] wraps around a route.
#[derive(Debug, Clone)]
pub struct HttpServerService<S> {
    inner: S,
    metrics: Option<Metrics>,
    baggage_journey: bool,
}

/// The method as the conventions want it: known methods by name, any other
/// as `_OTHER` (a method token is caller-chosen text).
fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => OTHER,
    }
}

/// Opens the server span of a request; `route` is the matched template.
pub(crate) fn server_span(method: &'static str, route: Option<&str>) -> Span {
    let name = match route {
        Some(route) => format!("{method} {route}"),
        None => method.to_owned(),
    };
    tracing::info_span!(
        "http.server",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = Empty,
        idgate.journey_ref = Empty,
        idgate.customer_reference = Empty,
    )
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for HttpServerService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        let span = server_span(method_name(req.method()), route);
        let parent = extract_from_http(req.headers());
        if self.baggage_journey
            && let Some(journey) = journey_from_context(&parent)
        {
            record_journey(&span, &journey);
        }
        remember_caller(&span, &parent);
        let _ = span.set_parent(parent);
        req.extensions_mut().insert(ServerSpan(span.clone()));
        let in_flight = self.metrics.as_ref().map(Metrics::http_in_flight);

        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let future = span.in_scope(|| inner.call(req));
        ResponseFuture {
            inner: future,
            span,
            _in_flight: in_flight,
        }
    }
}

pin_project! {
    /// Future of [`HttpServerService`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        _in_flight: Option<InFlight>,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = {
            let _entered = this.span.enter();
            ready!(this.inner.poll(cx))
        };
        match &result {
            Ok(response) => {
                let status = response.status();
                this.span
                    .record("http.response.status_code", i64::from(status.as_u16()));
                // Server spans: only 5xx are the server's failure.
                if status.is_server_error() {
                    this.span.record("otel.status_code", "ERROR");
                }
            }
            Err(_) => {
                this.span.record("otel.status_code", "ERROR");
            }
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_are_other() {
        assert_eq!(method_name(&Method::POST), "POST");
        assert_eq!(
            method_name(&Method::from_bytes(b"SECRETVERB").unwrap()),
            OTHER
        );
    }
}
