//! Log lines that join their trace, and the opt-in access log.
//!
//! [`WithTraceIds`] wraps the JSON event formatter: a line written inside a
//! span starts with `"trace_id"` and `"span_id"` (lower-case hex, as the
//! collector shows them) so a log search and a trace search meet. The ids
//! are those of the gateway's own span when it records one, else those of
//! the caller's context the server span keeps (the same context the
//! upstream receives: [`super::propagation::caller_of`]).
//!
//! [`access`] writes the access log line of one RPC (`[telemetry]
//! access_log = true`): method, code, duration, peer, inside the server
//! span, whose `idgate.journey_ref` and trace ids the JSON line carries.
//! Nothing of the request's content is ever on it.

use std::{
    fmt,
    sync::{Arc, OnceLock},
};

use opentelemetry::trace::{SpanContext, TraceContextExt};
use tracing::{Event, Span, Subscriber, dispatcher::WeakDispatch};
use tracing_subscriber::{
    fmt::{FmtContext, FormatEvent, FormatFields, format::Writer},
    registry::{LookupSpan, SpanRef},
};

use super::propagation::caller_in;

/// The `tracing` target of access log lines.
pub const ACCESS_TARGET: &str = "idgate::access";

/// An event formatter writing one JSON object per line, with the current
/// span's trace and span ids first.
///
/// The OpenTelemetry context of a span is reached through the subscriber
/// itself, which a formatter cannot ask for while it formats (`tracing`
/// refuses re-entry): [`WithTraceIds::bind`] hands it the subscriber once
/// it is built.
#[derive(Debug)]
pub struct WithTraceIds<F> {
    inner: F,
    dispatch: Arc<OnceLock<WeakDispatch>>,
}

impl<F> WithTraceIds<F> {
    /// Wraps `inner`; ids are written once [`WithTraceIds::bind`] is called
    /// with the returned handle.
    pub fn new(inner: F) -> (Self, TraceIdsHandle) {
        let dispatch = Arc::new(OnceLock::new());
        (
            Self {
                inner,
                dispatch: dispatch.clone(),
            },
            TraceIdsHandle(dispatch),
        )
    }
}

/// Tells a [`WithTraceIds`] formatter which subscriber it runs in.
#[derive(Debug, Clone)]
pub struct TraceIdsHandle(Arc<OnceLock<WeakDispatch>>);

impl TraceIdsHandle {
    /// Binds the formatter to `dispatch` (held weakly).
    pub fn bind(&self, dispatch: &tracing::Dispatch) {
        let _ = self.0.set(dispatch.downgrade());
    }
}

impl<F> WithTraceIds<F> {
    /// The span context a log line inside `span` belongs to: the span's own
    /// when it records one, else the caller's kept on a server span.
    fn span_context_of<S>(&self, span: &SpanRef<'_, S>) -> Option<SpanContext>
    where
        S: for<'a> LookupSpan<'a>,
    {
        let own = self
            .dispatch
            .get()
            .and_then(WeakDispatch::upgrade)
            .and_then(|d| tracing_opentelemetry::get_otel_context(&span.id(), &d))
            .map(|cx| cx.span().span_context().clone())
            .filter(SpanContext::is_valid);
        own.or_else(|| caller_in(span))
    }
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Read before formatting: the formatter holds span extensions
        // while it writes, and reading the context locks them again.
        let ids = ctx
            .lookup_current()
            .and_then(|span| self.span_context_of(&span));
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        match (ids, line.strip_prefix('{')) {
            (Some(sc), Some(rest)) => {
                let sep = if rest.starts_with('}') { "" } else { "," };
                write!(
                    writer,
                    "{{\"trace_id\":\"{}\",\"span_id\":\"{}\"{sep}{rest}",
                    sc.trace_id(),
                    sc.span_id()
                )
            }
            _ => writer.write_str(&line),
        }
    }
}

/// Writes the access log line of one finished RPC, inside its server span.
/// `method` is a served method or `_OTHER`; `peer` the client's socket
/// address, when known.
pub fn access(
    span: &Span,
    method: &str,
    code: tonic::Code,
    duration: std::time::Duration,
    peer: Option<std::net::SocketAddr>,
) {
    span.in_scope(|| {
        tracing::info!(
            target: ACCESS_TARGET,
            method,
            code = code as i64,
            status = ?code,
            duration_ms = duration.as_secs_f64() * 1e3,
            peer = peer.map(tracing::field::display),
            "rpc"
        );
    });
}
