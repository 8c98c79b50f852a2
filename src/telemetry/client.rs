//! The client span and the metrics of one upstream REST call.
//!
//! The REST client opens an [`UpstreamCall`] per HTTP attempt, sends the
//! headers from [`UpstreamCall::inject`] with the request, runs the request
//! inside [`UpstreamCall::span`], and ends the call with
//! [`UpstreamCall::finish`] (a response arrived) or [`UpstreamCall::fail`]
//! (none did). A call dropped unfinished (the caller's deadline, a
//! cancelled RPC) is recorded as `cancelled`.
//!
//! The propagated parent is the client span when the gateway records spans;
//! otherwise the caller's own context passes through unchanged
//! ([`super::propagation::caller_of`]).
//!
//! The span records the URL's path, never its query, and the host without
//! any user information. Only trace context and the journey reference go
//! out in the headers: baggage that arrived from the gateway's caller is not
//! forwarded to the vendor.

use std::{borrow::Cow, time::Instant};

use http::{HeaderMap, Method, StatusCode, Uri};
use opentelemetry::{Context, trace::TraceContextExt};
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{
    journey::{journey_from_context, record_journey, with_journey_baggage},
    metrics::Metrics,
    propagation::{caller_of, inject_into_http},
};
use crate::domain::{JourneyRef, Operation};

/// What is about to be called.
#[derive(Debug, Clone)]
pub struct UpstreamRequest<'a> {
    operation: Operation,
    method: &'a Method,
    url: &'a str,
    channel: Option<&'a str>,
    journey: Option<&'a JourneyRef>,
}

impl<'a> UpstreamRequest<'a> {
    /// A call of `operation` with `method` to `url`. The URL's path must be
    /// the configured operation path (a template: values travel in bodies);
    /// its query, if any, is never recorded.
    pub fn new(operation: Operation, method: &'a Method, url: &'a str) -> Self {
        Self {
            operation,
            method,
            url,
            channel: None,
            journey: None,
        }
    }

    /// The 3D channel (configured name) the call goes to.
    pub fn channel(mut self, name: &'a str) -> Self {
        self.channel = Some(name);
        self
    }

    /// The journey the call belongs to, when known before the call.
    pub fn journey(mut self, journey: &'a JourneyRef) -> Self {
        self.journey = Some(journey);
        self
    }
}

/// One upstream call in flight: its client span and its metrics.
#[derive(Debug)]
pub struct UpstreamCall {
    span: Span,
    metrics: Metrics,
    operation: Operation,
    channel: Option<String>,
    journey: Option<JourneyRef>,
    started: Instant,
    finished: bool,
}

/// `server.address`, `server.port` and the path of `url`; `None` when it
/// does not parse (nothing of it is then recorded).
fn target_of(url: &str) -> Option<(String, u16, String)> {
    let uri: Uri = url.parse().ok()?;
    let host = uri.host()?.to_owned();
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Some((host, port, uri.path().to_owned()))
}

impl UpstreamCall {
    /// Opens the client span, a child of the current span.
    pub fn start(metrics: &Metrics, request: UpstreamRequest<'_>) -> Self {
        let method = request.method.as_str();
        let target = target_of(request.url);
        let path = target.as_ref().map(|(_, _, p)| p.as_str());
        let name = match path {
            Some(path) => format!("{method} {path}"),
            None => method.to_owned(),
        };
        let span = tracing::info_span!(
            "http.client",
            otel.name = name,
            otel.kind = "client",
            otel.status_code = Empty,
            http.request.method = method,
            http.response.status_code = Empty,
            url.path = path,
            url.template = path,
            server.address = target.as_ref().map(|(h, _, _)| h.as_str()),
            server.port = target.as_ref().map(|(_, p, _)| i64::from(*p)),
            error.type = Empty,
            idgate.operation = request.operation.as_str(),
            idgate.channel = request.channel,
            idgate.journey_ref = Empty,
        );
        // A journey known from the caller's baggage counts too.
        let journey = request
            .journey
            .cloned()
            .or_else(|| journey_from_context(&Span::current().context()));
        if let Some(journey) = &journey {
            record_journey(&span, journey);
        }
        Self {
            span,
            metrics: metrics.clone(),
            operation: request.operation,
            channel: request.channel.map(str::to_owned),
            journey,
            started: Instant::now(),
            finished: false,
        }
    }

    /// The client span: run the request in it (`.instrument(call.span().clone())`).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Writes `traceparent` (this span as the parent of the upstream's
    /// span; when the gateway records no span, the caller's context
    /// unchanged) and the journey baggage into the outgoing headers.
    pub fn inject(&self, headers: &mut HeaderMap) {
        let mut span_context = self.span.context().span().span_context().clone();
        if !span_context.is_valid() {
            if let Some(caller) = caller_of(&self.span) {
                span_context = caller;
            }
        }
        let mut cx = Context::new().with_remote_span_context(span_context);
        if let Some(journey) = &self.journey {
            cx = with_journey_baggage(&cx, journey);
        }
        inject_into_http(&cx, headers);
    }

    /// The propagation headers alone, for `RequestBuilder::headers`.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        self.inject(&mut headers);
        headers
    }

    /// Records the journey learnt from the response (`/appkey`).
    pub fn record_journey(&mut self, journey: &JourneyRef) {
        record_journey(&self.span, journey);
        self.journey = Some(journey.clone());
    }

    /// Ends the call with the upstream's HTTP status. 4xx and 5xx make the
    /// client span an error span (the conventions for client spans).
    pub fn finish(mut self, status: StatusCode) {
        self.span
            .record("http.response.status_code", i64::from(status.as_u16()));
        if status.is_client_error() || status.is_server_error() {
            self.span.record("error.type", status.as_str());
            self.span.record("otel.status_code", "ERROR");
        }
        self.record(super::metrics::http_status_label(status.as_u16()));
    }

    /// Ends a call that got no response, labelled with the class the
    /// client gave the failure (`connect`, `timeout`, `transport`, from a
    /// fixed set), so metrics, spans, errors and breakers agree on what
    /// happened.
    pub fn fail(mut self, class: &'static str) {
        self.fail_inner(class);
    }

    fn fail_inner(&mut self, class: &'static str) {
        self.span.record("error.type", class);
        self.span.record("otel.status_code", "ERROR");
        self.record(Cow::Borrowed(class));
    }

    fn record(&mut self, status: Cow<'static, str>) {
        self.finished = true;
        self.metrics.record_upstream(
            self.operation,
            self.channel.as_deref(),
            status,
            self.started.elapsed(),
        );
    }
}

impl Drop for UpstreamCall {
    fn drop(&mut self) {
        if !self.finished {
            self.fail_inner("cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_keeps_host_port_and_path_but_no_query_or_user() {
        assert_eq!(
            target_of("https://op:secret@svc.example/facecaptcha/service/captcha/appkey?appkey=k"),
            Some((
                "svc.example".to_owned(),
                443,
                "/facecaptcha/service/captcha/appkey".to_owned()
            ))
        );
        assert_eq!(
            target_of("http://127.0.0.1:8081/x"),
            Some(("127.0.0.1".to_owned(), 8081, "/x".to_owned()))
        );
        assert_eq!(target_of("not a url"), None);
    }

    #[test]
    fn an_abandoned_call_is_counted_as_cancelled() {
        let metrics = Metrics::default();
        let call = UpstreamCall::start(
            &metrics,
            UpstreamRequest::new(
                Operation::Liveness3D,
                &Method::POST,
                "http://127.0.0.1:1/service/captcha/3d/liveness",
            )
            .channel("primary"),
        );
        drop(call);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains(
                r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="cancelled"} 1"#
            ),
            "{text}"
        );
    }
}
