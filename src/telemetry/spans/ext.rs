//! What the gateway asks of a span from outside the layer: continue a
//! caller's trace, give its context for the next hop, link it, add an
//! attribute it did not declare.

use opentelemetry::{Context, Value, trace::SpanContext};
use tracing::{Dispatch, Span, span::Id};
use tracing_subscriber::{Registry, registry::LookupSpan as _};

use super::record::{SpanRecord, SpanState};

/// Runs `f` on the layer's record of span `id`, when the dispatcher has
/// the layer (on a `Registry`) and the span is one of its.
fn with_state<R>(dispatch: &Dispatch, id: &Id, f: impl FnOnce(&mut SpanState) -> R) -> Option<R> {
    let registry = dispatch.downcast_ref::<Registry>()?;
    let span = registry.span(id)?;
    let extensions = span.extensions();
    let record = extensions.get::<SpanRecord>()?;
    let mut state = record.lock();
    Some(f(&mut state))
}

fn with_span<R>(span: &Span, f: impl FnOnce(&mut SpanState) -> R) -> Option<R> {
    span.with_subscriber(|(id, dispatch)| with_state(dispatch, id, f))
        .flatten()
}

/// The context of span `id` in `dispatch` (its ids given now if they were
/// not), for a log line written inside it.
pub fn span_context(dispatch: &Dispatch, id: &Id) -> Option<SpanContext> {
    with_state(dispatch, id, |state| state.give_ids().context.clone())
}

/// The OpenTelemetry side of a `tracing` span. On a span no layer records
/// (spans off, or no export), each is a no-op or answers an empty context.
pub trait SpanExt {
    /// Continues `parent` (the caller's context, its baggage kept), unless
    /// the span's ids were already given; false when it cannot.
    fn set_parent(&self, parent: Context) -> bool;

    /// The span's context with its parent's entries (the caller's
    /// baggage), for the next hop.
    fn context(&self) -> Context;

    /// The span's own ids and flags.
    fn span_context(&self) -> SpanContext;

    /// Links the span to `to`.
    fn add_link(&self, to: SpanContext);

    /// Sets an attribute the span did not declare as a field.
    fn set_attribute(&self, key: &str, value: impl Into<Value>);
}

impl SpanExt for Span {
    fn set_parent(&self, parent: Context) -> bool {
        with_span(self, |state| state.set_parent(parent)).unwrap_or(false)
    }

    fn context(&self) -> Context {
        with_span(self, SpanState::context).unwrap_or_default()
    }

    fn span_context(&self) -> SpanContext {
        with_span(self, |state| state.give_ids().context.clone())
            .unwrap_or_else(SpanContext::empty_context)
    }

    fn add_link(&self, to: SpanContext) {
        with_span(self, |state| state.add_link(to));
    }

    fn set_attribute(&self, key: &str, value: impl Into<Value>) {
        let value = value.into();
        with_span(self, |state| state.add(key, &value));
    }
}
