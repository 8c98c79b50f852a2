//! The client span and the metrics of one upstream REST call.
//!
//! The REST client opens an [`UpstreamCall`] per HTTP attempt, sends the
//! headers from [`UpstreamCall::inject`] with the request, runs the request
//! inside [`UpstreamCall::span`], and ends the call with
//! [`UpstreamCall::finish`] (a response arrived) or [`UpstreamCall::fail`]
//! (none did). A call dropped unfinished (the caller's deadline, a
//! cancelled RPC) is recorded as `cancelled`. Either way the call ends
//! with one [`UpstreamOutcome`], which the metrics derive every upstream
//! series from.
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

use super::spans::SpanExt as _;
use http::{HeaderMap, Method, StatusCode, Uri};
use tracing::{Span, field::Empty};

use super::{
    journey::{journey_from_context, record_journey},
    metrics::{ChannelLabel, Metrics, UpstreamEnd, UpstreamOutcome},
    propagation::{caller_of, inject_call},
};
use crate::domain::{JourneyRef, Operation};

/// Where an upstream call goes, as its client span shows it: the span
/// name (`POST /path`), host, port and path, worked out once per
/// configured URL (the REST client keeps one per operation and channel)
/// rather than parsed and formatted on every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTarget {
    name: String,
    host: Option<String>,
    port: Option<u16>,
    path: Option<String>,
}

impl CallTarget {
    /// The target of `method` to `url`. The URL's path must be the
    /// configured operation path (a template: values travel in bodies); its
    /// query and user information, if any, are never recorded. A URL that
    /// does not parse gives a target with the method alone.
    pub fn new(method: &Method, url: &str) -> Self {
        let method = method.as_str();
        match target_of(url) {
            Some((host, port, path)) => Self {
                name: format!("{method} {path}"),
                host: Some(host),
                port: Some(port),
                path: Some(path),
            },
            None => Self {
                name: method.to_owned(),
                host: None,
                port: None,
                path: None,
            },
        }
    }
}

/// What is about to be called.
#[derive(Debug, Clone)]
pub struct UpstreamRequest<'a> {
    operation: Operation,
    method: &'a Method,
    target: Cow<'a, CallTarget>,
    channel: Option<&'a str>,
    journey: Option<&'a JourneyRef>,
}

impl<'a> UpstreamRequest<'a> {
    /// A call of `operation` with `method` to `url`, parsed now (see
    /// [`CallTarget::new`]; a client that calls the same URL again keeps
    /// its target and uses [`UpstreamRequest::to`]).
    pub fn new(operation: Operation, method: &'a Method, url: &str) -> Self {
        Self {
            operation,
            method,
            target: Cow::Owned(CallTarget::new(method, url)),
            channel: None,
            journey: None,
        }
    }

    /// A call of `operation` with `method` to a target worked out before.
    pub fn to(operation: Operation, method: &'a Method, target: &'a CallTarget) -> Self {
        Self {
            operation,
            method,
            target: Cow::Borrowed(target),
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
    /// The registry's own label: recording the call allocates none.
    channel: Option<ChannelLabel>,
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
        let target = &*request.target;
        let path = target.path.as_deref();
        // A journey known from the caller's baggage counts too. Known
        // before the span opens, it is one of the span's first values
        // rather than a record later (each record is a trip through
        // every layer).
        let journey = request
            .journey
            .cloned()
            .or_else(|| journey_from_context(&Span::current().context()));
        let span = tracing::info_span!(
            "http.client",
            otel.name = target.name.as_str(),
            otel.kind = "client",
            otel.status_code = Empty,
            http.request.method = request.method.as_str(),
            http.response.status_code = Empty,
            url.path = path,
            url.template = path,
            server.address = target.host.as_deref(),
            server.port = target.port.map(i64::from),
            error.type = Empty,
            idgate.operation = request.operation.as_str(),
            idgate.channel = request.channel,
            idgate.journey_ref = journey.as_ref().map(JourneyRef::as_str),
        );
        Self {
            span,
            metrics: metrics.clone(),
            operation: request.operation,
            channel: request.channel.map(|name| metrics.channel_label(name)),
            journey,
            started: Instant::now(),
            finished: false,
        }
    }

    /// The client span. The exchange runs without entering it (nothing in
    /// it logs; `upstream::send`), and tests read its fields.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Writes `traceparent` (this span as the parent of the upstream's
    /// span; when the gateway records no span, the caller's context
    /// unchanged) and the journey baggage into the outgoing headers.
    pub fn inject(&self, headers: &mut HeaderMap) {
        let mut span_context = self.span.span_context();
        if !span_context.is_valid() {
            if let Some(caller) = caller_of(&self.span) {
                span_context = caller;
            }
        }
        inject_call(&span_context, self.journey.as_ref(), headers);
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
        self.record(|elapsed| UpstreamEnd::Answered {
            status: status.as_u16(),
            elapsed,
        });
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
        self.record(|elapsed| UpstreamEnd::Failed { class, elapsed });
    }

    /// The call's one outcome record, made as it ends.
    fn record(&mut self, ended: impl FnOnce(std::time::Duration) -> UpstreamEnd) {
        self.finished = true;
        self.metrics.record_upstream(&UpstreamOutcome {
            operation: self.operation,
            channel: self.channel.clone(),
            ended: ended(self.started.elapsed()),
        });
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
        crate::telemetry::metrics::exposition::assert_sample(
            &text,
            r#"idgate_upstream_requests_total{operation="liveness_3d",channel="primary",status="cancelled"} 1"#,
        );
    }
}
