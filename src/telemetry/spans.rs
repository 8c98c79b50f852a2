//! The gateway's spans as OpenTelemetry spans: a `tracing` layer that
//! keeps each span's ids, attributes, events and links in the span itself
//! and writes it as OTLP into the export queue when it closes.
//!
//! Why not `tracing-opentelemetry` and the SDK's tracer: that pair builds
//! each span twice (a `SpanBuilder` in the layer, then the SDK's span with
//! its own lock, the tracer's handle and a `SpanData` record), allocates
//! a `String` per attribute value, reads the clock on every exit of a
//! span (a call exits its spans on every poll), and hands the record to
//! the span processor to be encoded. The two spans of a call cost about
//! 37,000 instructions that way (docs/performance.md). Here a span's
//! attributes are written as OTLP bytes as they are recorded, and the
//! span is encoded once, from those bytes, when it closes.
//!
//! What the gateway relied on is kept:
//! - the field conventions (`otel.name`, `otel.kind`, `otel.status_code`,
//!   span events from log lines inside a span; `fields`);
//! - ids as the SDK gives them: the parent's trace, the sampler of
//!   `OTEL_TRACES_SAMPLER` (`sampler`), the SDK's random id generator,
//!   its span limits (128 attributes, events and links);
//! - a parent set from the caller's context after the span opened, a
//!   span's context (with the parent's baggage) for injection, links and
//!   attributes added from outside (`ext::SpanExt`);
//! - a span's ids for the JSON log lines ([`ext::span_context`]).
//!
//! One difference: a span ends when it closes (its last handle dropped),
//! not at its last exit.

mod ext;
mod fields;
mod record;
mod sampler;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use opentelemetry::{Context, InstrumentationScope, trace::TraceContextExt as _};
use opentelemetry_sdk::trace::RandomIdGenerator;
use tracing::{Event, Subscriber, span};
use tracing_subscriber::{Layer, layer::Context as LayerContext, registry::LookupSpan};

pub use ext::{SpanExt, span_context};
pub use sampler::sampler_from_env;

use super::{otlp::wire, span_queue::SpanQueue};
use fields::{EventFields, SpanFields};
use record::{Ids, SpanRecord, SpanState};

/// The layer. See the module's doc.
#[derive(Debug)]
pub struct SpanLayer {
    /// Where ids come from; each span keeps a handle, so that its ids can
    /// be given from outside the layer ([`SpanExt`]).
    ids: Arc<Ids>,
    queue: SpanQueue,
    scope: InstrumentationScope,
}

impl SpanLayer {
    /// Spans of `scope` sampled by `sampler`, queued on `queue` as they
    /// close.
    pub fn new(
        queue: SpanQueue,
        scope: InstrumentationScope,
        sampler: opentelemetry_sdk::trace::Sampler,
    ) -> Self {
        Self {
            ids: Arc::new(Ids {
                sampler,
                generator: RandomIdGenerator::default(),
            }),
            queue,
            scope,
        }
    }

    /// The context a new span continues: its parent's when the parent is
    /// a span of this layer (the parent gets its ids now), else none.
    fn parent_of<S>(&self, attrs: &span::Attributes<'_>, ctx: &LayerContext<'_, S>) -> Context
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let parent = match attrs.parent() {
            Some(id) => ctx.span(id),
            None if attrs.is_contextual() => ctx.lookup_current(),
            None => None,
        };
        parent
            .and_then(|parent| {
                let extensions = parent.extensions();
                extensions
                    .get::<SpanRecord>()
                    .map(|record| record.lock().context())
            })
            .unwrap_or_default()
    }
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = self.parent_of(attrs, &ctx);
        let suppressed = !parent.has_active_span() && Context::is_current_telemetry_suppressed();
        let mut state = SpanState::new(
            self.ids.clone(),
            attrs.metadata().name(),
            parent,
            suppressed,
        );
        attrs.record(&mut SpanFields(&mut state));
        if state.parent.has_active_span() {
            // A span under a span of its own process keeps that parent:
            // its ids can be given now.
            state.give_ids();
        }
        span.extensions_mut().insert(SpanRecord::new(state));
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        if let Some(record) = extensions.get::<SpanRecord>() {
            let mut state = record.lock();
            if state.recording() {
                values.record(&mut SpanFields(&mut state));
            }
        }
    }

    fn on_follows_from(&self, id: &span::Id, follows: &span::Id, ctx: LayerContext<'_, S>) {
        let (Some(span), Some(follows)) = (ctx.span(id), ctx.span(follows)) else {
            return;
        };
        let to = follows
            .extensions()
            .get::<SpanRecord>()
            .map(|record| record.lock().give_ids().context.clone());
        if let (Some(to), Some(record)) = (to, span.extensions().get::<SpanRecord>()) {
            record.lock().add_link(to);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let extensions = span.extensions();
        let Some(record) = extensions.get::<SpanRecord>() else {
            return;
        };
        if !record.lock().recording() {
            return;
        }
        let meta = event.metadata();
        let mut fields = EventFields::default();
        wire::put_str_event_attribute(&mut fields.attributes, "level", meta.level().as_str());
        wire::put_str_event_attribute(&mut fields.attributes, "target", meta.target());
        event.record(&mut fields);
        let error = *meta.level() == tracing::Level::ERROR;
        fields.apply(&mut record.lock(), error, meta.name());
    }

    fn on_close(&self, id: span::Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        let end = opentelemetry::time::now();
        let mut state = record.into_inner();
        if state.exported() {
            self.queue.push(&self.scope, |out| state.encode(out, end));
        }
    }
}
