//! Log lines that join their trace, and the opt-in access log.
//!
//! A JSON line written inside a span starts with `"trace_id"` and
//! `"span_id"` (lower-case hex, as the collector shows them) so a log
//! search and a trace search meet; [`TraceIds`] finds them. The ids
//! are those of the gateway's own span when it records one, else those of
//! the caller's context the server span keeps (the same context the
//! upstream receives: [`super::propagation::caller_of`]).
//!
//! [`access`] writes the access log line of one RPC (`[telemetry]
//! access_log = true`): method, code, duration, peer, inside the server
//! span, whose `idgate.journey_ref` and trace ids the JSON line carries.
//! Nothing of the request's content is ever on it.

use std::sync::{Arc, OnceLock};

use opentelemetry::trace::SpanContext;
use tracing::{Span, dispatcher::WeakDispatch};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::propagation::caller_in;

/// The `tracing` target of access log lines.
pub const ACCESS_TARGET: &str = "idgate::access";

/// Where a JSON line finds the trace and span ids it starts with
/// (the JSON event formatter, `telemetry::json_lines`, writes them).
///
/// The OpenTelemetry context of a span is reached through the subscriber
/// itself, which a formatter cannot ask for while it formats (`tracing`
/// refuses re-entry): [`TraceIdsHandle::bind`] hands it the subscriber
/// once it is built.
#[derive(Debug, Clone)]
pub struct TraceIds {
    dispatch: Arc<OnceLock<WeakDispatch>>,
}

impl TraceIds {
    /// Ids are found once [`TraceIdsHandle::bind`] is called with the
    /// returned handle.
    pub fn new() -> (Self, TraceIdsHandle) {
        let dispatch = Arc::new(OnceLock::new());
        (
            Self {
                dispatch: dispatch.clone(),
            },
            TraceIdsHandle(dispatch),
        )
    }

    /// The span context a log line inside `span` belongs to: the span's own
    /// when it records one, else the caller's kept on a server span.
    pub(super) fn of<S>(&self, span: &SpanRef<'_, S>) -> Option<SpanContext>
    where
        S: for<'a> LookupSpan<'a>,
    {
        let own = self
            .dispatch
            .get()
            .and_then(WeakDispatch::upgrade)
            .and_then(|d| super::spans::span_context(&d, &span.id()))
            .filter(SpanContext::is_valid);
        own.or_else(|| caller_in(span))
    }
}

/// Tells a [`TraceIds`] which subscriber it runs in.
#[derive(Debug, Clone)]
pub struct TraceIdsHandle(Arc<OnceLock<WeakDispatch>>);

impl TraceIdsHandle {
    /// Binds the formatter to `dispatch` (held weakly).
    pub fn bind(&self, dispatch: &tracing::Dispatch) {
        let _ = self.0.set(dispatch.downgrade());
    }
}

/// Writes the access log line of one finished RPC, inside its server span.
/// `method` is a served method or `_OTHER`; `peer` the client's socket
/// address as text (written once per connection), when known.
pub fn access(
    span: &Span,
    method: &str,
    code: tonic::Code,
    duration: std::time::Duration,
    peer: Option<&str>,
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
