//! A span's message (`Span`, field 2 of `ScopeSpans`) and the entries it
//! is made of: attributes, events, links.

use std::time::SystemTime;

use opentelemetry::{
    Value,
    trace::{SpanContext, SpanId, SpanKind, Status},
};
use opentelemetry_sdk::trace::SpanData;

use super::{
    Scalar, attributes_len, delimited_len, fixed32_len, fixed64_len, kind_number, nanos,
    opt_bytes_len, put_attributes, put_bytes, put_delimited_header, put_fixed32, put_fixed64,
    put_key_value, put_opt_bytes, put_varint, span_flags, status_len, status_parts, varint_len,
};

/// A span whose attributes, events and links are already written as the
/// `Span` message's fields 9, 11 and 13 ([`put_attribute`],
/// [`put_str_attribute`], [`put_event`], [`put_link`]): what the gateway's
/// span layer keeps while a span is open (`telemetry::spans`), and what
/// [`put_span`] makes of an SDK span record.
#[derive(Debug)]
pub struct SpanParts<'a> {
    /// The span's own context: trace and span id, flags, trace state.
    pub context: &'a SpanContext,
    /// The parent's span id, or [`SpanId::INVALID`] for a root.
    pub parent_span_id: SpanId,
    /// Whether the parent came from another process.
    pub parent_is_remote: bool,
    /// The span's name.
    pub name: &'a str,
    /// The span's kind.
    pub kind: &'a SpanKind,
    /// When it started and ended.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Field 9 entries.
    pub attributes: &'a [u8],
    /// Attributes past the limit.
    pub dropped_attributes: u32,
    /// Field 11 entries.
    pub events: &'a [u8],
    /// Events past the limit.
    pub dropped_events: u32,
    /// Field 13 entries.
    pub links: &'a [u8],
    /// Links past the limit.
    pub dropped_links: u32,
    /// The span's status.
    pub status: &'a Status,
}

/// The body of a `Span`; `state` is its trace state header.
fn span_parts_len(span: &SpanParts<'_>, state: &str) -> usize {
    let has_parent = span.parent_span_id != SpanId::INVALID;
    delimited_len(1, 16)
        + delimited_len(2, 8)
        + opt_bytes_len(3, state.len())
        + if has_parent { delimited_len(4, 8) } else { 0 }
        + opt_bytes_len(5, span.name.len())
        + varint_len(6, kind_number(span.kind))
        + fixed64_len(7, nanos(span.start))
        + fixed64_len(8, nanos(span.end))
        + span.attributes.len()
        + varint_len(10, u64::from(span.dropped_attributes))
        + span.events.len()
        + varint_len(12, u64::from(span.dropped_events))
        + span.links.len()
        + varint_len(14, u64::from(span.dropped_links))
        + delimited_len(15, status_len(span.status))
        + fixed32_len(
            16,
            span_flags(span.context.trace_flags().to_u8(), span.parent_is_remote),
        )
}

/// Appends `span` to `out` as one entry of `ScopeSpans.spans` (field 2):
/// key, length and the `Span` message.
pub fn put_span_parts(out: &mut Vec<u8>, span: &SpanParts<'_>) {
    let state = span.context.trace_state().header();
    let len = span_parts_len(span, &state);
    out.reserve(len + 6);
    put_delimited_header(out, 2, len);
    put_bytes(out, 1, &span.context.trace_id().to_bytes());
    put_bytes(out, 2, &span.context.span_id().to_bytes());
    put_opt_bytes(out, 3, state.as_bytes());
    if span.parent_span_id != SpanId::INVALID {
        put_bytes(out, 4, &span.parent_span_id.to_bytes());
    }
    put_opt_bytes(out, 5, span.name.as_bytes());
    put_varint(out, 6, kind_number(span.kind));
    put_fixed64(out, 7, nanos(span.start));
    put_fixed64(out, 8, nanos(span.end));
    out.extend_from_slice(span.attributes);
    put_varint(out, 10, u64::from(span.dropped_attributes));
    out.extend_from_slice(span.events);
    put_varint(out, 12, u64::from(span.dropped_events));
    out.extend_from_slice(span.links);
    put_varint(out, 14, u64::from(span.dropped_links));
    let (message, code) = status_parts(span.status);
    put_delimited_header(out, 15, status_len(span.status));
    put_opt_bytes(out, 2, message.as_bytes());
    put_varint(out, 3, code);
    put_fixed32(
        out,
        16,
        span_flags(span.context.trace_flags().to_u8(), span.parent_is_remote),
    );
}

/// Appends one attribute of a span (`Span` field 9).
pub fn put_attribute(out: &mut Vec<u8>, key: &str, value: &Value) {
    put_key_value(out, 9, key, value);
}

/// Appends one string attribute of a span (`Span` field 9), without
/// making a [`Value`] of it.
pub fn put_str_attribute(out: &mut Vec<u8>, key: &str, value: &str) {
    put_scalar_key_value(out, 9, key, &Scalar::Str(value));
}

/// Appends one attribute of an event (`Span.Event` field 3).
pub fn put_event_attribute(out: &mut Vec<u8>, key: &str, value: &Value) {
    put_key_value(out, 3, key, value);
}

/// Appends one string attribute of an event (`Span.Event` field 3),
/// without making a [`Value`] of it.
pub fn put_str_event_attribute(out: &mut Vec<u8>, key: &str, value: &str) {
    put_scalar_key_value(out, 3, key, &Scalar::Str(value));
}

fn put_scalar_key_value(out: &mut Vec<u8>, tag: u32, key: &str, value: &Scalar<'_>) {
    let len = opt_bytes_len(1, key.len()) + delimited_len(2, value.len());
    put_delimited_header(out, tag, len);
    put_opt_bytes(out, 1, key.as_bytes());
    put_delimited_header(out, 2, value.len());
    value.put(out);
}

/// Appends one event of a span (`Span` field 11): its time, name and
/// attributes (field 3 entries, [`put_event_attribute`]).
pub fn put_event(out: &mut Vec<u8>, time: SystemTime, name: &str, attributes: &[u8], dropped: u32) {
    let len = fixed64_len(1, nanos(time))
        + opt_bytes_len(2, name.len())
        + attributes.len()
        + varint_len(4, u64::from(dropped));
    put_delimited_header(out, 11, len);
    put_fixed64(out, 1, nanos(time));
    put_opt_bytes(out, 2, name.as_bytes());
    out.extend_from_slice(attributes);
    put_varint(out, 4, u64::from(dropped));
}

/// The body of a `Span.Link`; `state` is its context's trace state header.
fn link_len(link: &opentelemetry::trace::Link, state: &str) -> usize {
    delimited_len(1, 16)
        + delimited_len(2, 8)
        + opt_bytes_len(3, state.len())
        + attributes_len(4, &link.attributes)
        + varint_len(5, u64::from(link.dropped_attributes_count))
        + fixed32_len(
            6,
            span_flags(
                link.span_context.trace_flags().to_u8(),
                link.span_context.is_remote(),
            ),
        )
}

/// Appends one link of a span (`Span` field 13).
pub fn put_link(out: &mut Vec<u8>, link: &opentelemetry::trace::Link) {
    let state = link.span_context.trace_state().header();
    put_delimited_header(out, 13, link_len(link, &state));
    put_bytes(out, 1, &link.span_context.trace_id().to_bytes());
    put_bytes(out, 2, &link.span_context.span_id().to_bytes());
    put_opt_bytes(out, 3, state.as_bytes());
    put_attributes(out, 4, &link.attributes);
    put_varint(out, 5, u64::from(link.dropped_attributes_count));
    put_fixed32(
        out,
        6,
        span_flags(
            link.span_context.trace_flags().to_u8(),
            link.span_context.is_remote(),
        ),
    );
}

thread_local! {
    /// Where [`put_span`] writes an SDK span's attributes, events and
    /// links before the span itself.
    static PARTS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Appends `span` (an SDK span record) to `out` as one entry of
/// `ScopeSpans.spans` (field 2): key, length and the `Span` message.
pub fn put_span(out: &mut Vec<u8>, span: &SpanData) {
    PARTS.with_borrow_mut(|parts| {
        parts.clear();
        put_attributes(parts, 9, &span.attributes);
        let attributes = parts.len();
        for event in &span.events.events {
            let start = parts.len();
            put_attributes(parts, 3, &event.attributes);
            let attrs = parts.split_off(start);
            put_event(
                parts,
                event.timestamp,
                &event.name,
                &attrs,
                event.dropped_attributes_count,
            );
        }
        let events = parts.len();
        for link in &span.links.links {
            put_link(parts, link);
        }
        put_span_parts(
            out,
            &SpanParts {
                context: &span.span_context,
                parent_span_id: span.parent_span_id,
                parent_is_remote: span.parent_span_is_remote,
                name: &span.name,
                kind: &span.span_kind,
                start: span.start_time,
                end: span.end_time,
                attributes: &parts[..attributes],
                dropped_attributes: span.dropped_attributes_count,
                events: &parts[attributes..events],
                dropped_events: span.events.dropped_count,
                links: &parts[events..],
                dropped_links: span.links.dropped_count,
                status: &span.status,
            },
        );
    });
}
