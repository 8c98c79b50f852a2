//! What the layer keeps of one open span, and how it becomes OTLP when the
//! span closes.

use std::{
    borrow::Cow,
    sync::{Arc, Mutex, MutexGuard},
    time::SystemTime,
};

use opentelemetry::{
    Context, Value,
    trace::{Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags},
};
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, Sampler, SamplingDecision, ShouldSample as _,
};

use crate::telemetry::otlp::wire::{self, SpanParts};

/// The most attributes, events and links a span keeps (the SDK's default
/// span limits); past them each is counted as dropped.
pub(super) const MAX_PER_SPAN: u32 = 128;

/// Room made for a span's attributes as it opens: the gateway's server
/// and client spans write 250 to 400 bytes of them, so one allocation
/// holds them instead of five growing ones.
const ATTRIBUTE_BYTES: usize = 512;

/// What a span's ids come from: the sampler, the id generator.
#[derive(Debug)]
pub(super) struct Ids {
    pub(super) sampler: Sampler,
    pub(super) generator: RandomIdGenerator,
}

/// The layer's record of one open span, in the span's extensions. Its
/// state is behind a lock of its own so that the record is read and
/// changed through the extensions' shared lock: a log line being written
/// inside the span may hold that lock while it asks for the span's ids.
#[derive(Debug)]
pub(super) struct SpanRecord(Mutex<SpanState>);

impl SpanRecord {
    pub(super) fn new(state: SpanState) -> Self {
        Self(Mutex::new(state))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SpanState> {
        // Every change is a field's assignment or a push: a panic while
        // the lock is held leaves a usable record.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn into_inner(self) -> SpanState {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// The ids a span was given, once something needed them.
#[derive(Debug, Clone)]
pub(super) struct Given {
    pub(super) context: SpanContext,
    pub(super) parent_span_id: SpanId,
    pub(super) parent_is_remote: bool,
    /// Kept and exported (the sampler's `RecordAndSample`).
    pub(super) sampled: bool,
}

/// One open span.
#[derive(Debug)]
pub(super) struct SpanState {
    /// Where its ids come from (the layer's).
    ids: Arc<Ids>,
    pub(super) name: Cow<'static, str>,
    pub(super) kind: SpanKind,
    pub(super) status: Status,
    /// The context the span continues: its parent's (with the parent's
    /// baggage), one set from outside, or none.
    pub(super) parent: Context,
    /// Telemetry is suppressed where the span opened (the exporter's own
    /// work): it gets no ids and is never exported.
    pub(super) suppressed: bool,
    /// Its ids, given the first time they are needed (a child opens, its
    /// context is asked for, it closes), so that a parent set after the
    /// span opened still decides its trace.
    pub(super) given: Option<Given>,
    /// Its context with the parent's entries, built once when asked for.
    pub(super) context: Option<Context>,
    pub(super) start: SystemTime,
    /// `Span` field 9 entries.
    pub(super) attributes: Vec<u8>,
    pub(super) attribute_count: u32,
    pub(super) dropped_attributes: u32,
    /// `Span` field 11 entries.
    pub(super) events: Vec<u8>,
    pub(super) event_count: u32,
    pub(super) dropped_events: u32,
    /// `Span` field 13 entries.
    pub(super) links: Vec<u8>,
    pub(super) link_count: u32,
    pub(super) dropped_links: u32,
}

impl SpanState {
    /// A span named `name` opened now, continuing `parent`.
    pub(super) fn new(
        ids: Arc<Ids>,
        name: &'static str,
        parent: Context,
        suppressed: bool,
    ) -> Self {
        Self {
            ids,
            name: Cow::Borrowed(name),
            kind: SpanKind::Internal,
            status: Status::Unset,
            parent,
            suppressed,
            given: None,
            context: None,
            start: opentelemetry::time::now(),
            attributes: Vec::with_capacity(ATTRIBUTE_BYTES),
            attribute_count: 0,
            dropped_attributes: 0,
            events: Vec::new(),
            event_count: 0,
            dropped_events: 0,
            links: Vec::new(),
            link_count: 0,
            dropped_links: 0,
        }
    }

    /// False once the span is known not to be exported: what is recorded
    /// on it after that is not kept.
    pub(super) fn recording(&self) -> bool {
        !self.suppressed && self.given.as_ref().is_none_or(|g| g.sampled)
    }

    /// Room for one more attribute; counts it dropped when there is none.
    fn room_for_attribute(&mut self) -> bool {
        if self.attribute_count < MAX_PER_SPAN {
            self.attribute_count += 1;
            true
        } else {
            self.dropped_attributes += 1;
            false
        }
    }

    /// Adds a string attribute.
    pub(super) fn add_str(&mut self, key: &str, value: &str) {
        if self.recording() && self.room_for_attribute() {
            wire::put_str_attribute(&mut self.attributes, key, value);
        }
    }

    /// Adds an attribute.
    pub(super) fn add(&mut self, key: &str, value: &Value) {
        if self.recording() && self.room_for_attribute() {
            wire::put_attribute(&mut self.attributes, key, value);
        }
    }

    /// Adds an event: its name and its attributes (`Span.Event` field 3
    /// entries), at `time`.
    pub(super) fn add_event(&mut self, time: SystemTime, name: &str, attributes: &[u8]) {
        if !self.recording() {
            return;
        }
        if self.event_count < MAX_PER_SPAN {
            self.event_count += 1;
            wire::put_event(&mut self.events, time, name, attributes, 0);
        } else {
            self.dropped_events += 1;
        }
    }

    /// Links the span to `to` (a valid context only).
    pub(super) fn add_link(&mut self, to: SpanContext) {
        if !self.recording() || !to.is_valid() {
            return;
        }
        if self.link_count < MAX_PER_SPAN {
            self.link_count += 1;
            wire::put_link(&mut self.links, &Link::with_context(to));
        } else {
            self.dropped_links += 1;
        }
    }

    /// Continues `parent` instead of what the span opened in, unless its
    /// ids were already given (then its trace is decided).
    pub(super) fn set_parent(&mut self, parent: Context) -> bool {
        if self.given.is_some() {
            return false;
        }
        self.parent = parent;
        true
    }

    /// The span's ids, given now if they were not: the parent's trace (or
    /// a new one), a new span id, and the sampler's decision, as the SDK's
    /// tracer gives them.
    pub(super) fn give_ids(&mut self) -> &Given {
        let given = match self.given.take() {
            Some(given) => given,
            None => self.first_ids(),
        };
        self.given.insert(given)
    }

    fn first_ids(&mut self) -> Given {
        let given = if self.suppressed {
            Given {
                context: SpanContext::empty_context(),
                parent_span_id: SpanId::INVALID,
                parent_is_remote: false,
                sampled: false,
            }
        } else {
            self.decide()
        };
        if !given.sampled {
            // Nothing recorded so far will leave.
            self.attributes = Vec::new();
            self.events = Vec::new();
            self.links = Vec::new();
        }
        given
    }

    fn decide(&self) -> Given {
        let ids = &self.ids;
        let parent = self.parent.span();
        let parent = parent.span_context();
        let (trace_id, parent_span_id, parent_is_remote, flags) = if parent.is_valid() {
            (
                parent.trace_id(),
                parent.span_id(),
                parent.is_remote(),
                parent.trace_flags(),
            )
        } else {
            (
                ids.generator.new_trace_id(),
                SpanId::INVALID,
                false,
                TraceFlags::default(),
            )
        };
        let span_id = ids.generator.new_span_id();
        let result = ids.sampler.should_sample(
            Some(&self.parent),
            trace_id,
            &self.name,
            &self.kind,
            &[],
            &[],
        );
        let (flags, sampled) = match result.decision {
            SamplingDecision::RecordAndSample => (flags.with_sampled(true), true),
            SamplingDecision::RecordOnly => (flags.with_sampled(false), false),
            SamplingDecision::Drop => (TraceFlags::default(), false),
        };
        Given {
            context: SpanContext::new(trace_id, span_id, flags, false, result.trace_state),
            parent_span_id,
            parent_is_remote,
            sampled,
        }
    }

    /// The span's context with its parent's entries (baggage), built once.
    pub(super) fn context(&mut self) -> Context {
        let context = match self.context.take() {
            Some(context) => context,
            None => {
                let own = self.give_ids().context.clone();
                if own.is_valid() {
                    self.parent.with_remote_span_context(own)
                } else {
                    self.parent.clone()
                }
            }
        };
        self.context.insert(context).clone()
    }

    /// True when the span is to be exported (sampled), its ids given.
    pub(super) fn exported(&mut self) -> bool {
        self.give_ids().sampled && !self.suppressed
    }

    /// The span as OTLP, ended at `end`.
    pub(super) fn encode(&self, out: &mut Vec<u8>, end: SystemTime) {
        let Some(given) = &self.given else { return };
        wire::put_span_parts(
            out,
            &SpanParts {
                context: &given.context,
                parent_span_id: given.parent_span_id,
                parent_is_remote: given.parent_is_remote,
                name: &self.name,
                kind: &self.kind,
                start: self.start,
                end,
                attributes: &self.attributes,
                dropped_attributes: self.dropped_attributes,
                events: &self.events,
                dropped_events: self.dropped_events,
                links: &self.links,
                dropped_links: self.dropped_links,
                status: &self.status,
            },
        );
    }
}
