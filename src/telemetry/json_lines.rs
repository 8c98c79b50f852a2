//! The event formatter of `--log-format json`: the lines of
//! `tracing-subscriber`'s JSON formatter (`flatten_event`,
//! `with_current_span`, `with_span_list`), byte for byte (a test compares
//! them), written more cheaply.
//!
//! That formatter keeps a span's fields as JSON text and, for every line,
//! parses that text into a `serde_json::Value` and serializes it again,
//! once for `span` and once more in `spans` (its own source calls this a
//! stopgap). A call's audit record and access line each paid that for the
//! call's server span. Here a span's fields, already a JSON object (the
//! text [`super::lazy_json`] writes), are copied into the line as they
//! are, with the span's `name` appended. The event's own fields go
//! through `tracing-serde`'s visitor, as there.
//!
//! Inside a span a line starts with its `trace_id` and `span_id`
//! ([`TraceIds`]), then the `timestamp` ([`super::timestamp`]): all of it
//! written into one buffer, which the fmt layer copies once.

use std::fmt;

use serde::ser::{SerializeMap as _, Serializer as _};
use tracing::{Event, Subscriber};
use tracing_serde::{AsSerde as _, SerdeMapVisitor};
use tracing_subscriber::{
    fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, format::Writer},
    registry::{LookupSpan, SpanRef},
};

use super::logs::TraceIds;

/// The formatter (see the module); its span fields must be JSON objects
/// (the fmt layer's fields formatter [`super::lazy_json::LazyJsonFields`]).
#[derive(Debug, Clone, Default)]
pub struct JsonLines {
    /// Lines without `timestamp` (tests compare lines of two runs).
    without_time: bool,
    /// Lines inside a span start with its trace and span ids.
    trace_ids: Option<TraceIds>,
}

impl JsonLines {
    /// Lines that start with their trace and span ids inside a span.
    pub fn with_trace_ids(trace_ids: TraceIds) -> Self {
        Self {
            without_time: false,
            trace_ids: Some(trace_ids),
        }
    }

    /// Lines without their `timestamp`.
    #[cfg(test)]
    pub fn without_time() -> Self {
        Self {
            without_time: true,
            trace_ids: None,
        }
    }
}

/// Appends `span` as the formatter writes it: its fields and its `name`.
fn push_span<S, N>(line: &mut Vec<u8>, span: &SpanRef<'_, S>)
where
    S: for<'a> LookupSpan<'a>,
    N: 'static,
{
    let ext = span.extensions();
    let fields = ext
        .get::<FormattedFields<N>>()
        .map(|f| f.fields.trim())
        .and_then(|f| f.strip_suffix('}'))
        .filter(|f| f.starts_with('{'))
        .unwrap_or("{");
    line.extend_from_slice(fields.as_bytes());
    if fields.len() > 1 {
        line.push(b',');
    }
    line.extend_from_slice(b"\"name\":");
    // A span name is a string: serializing it cannot fail.
    let _ = serde_json::to_writer(&mut *line, span.metadata().name());
    line.push(b'}');
}

/// Appends an id's bytes (16 at most) in lower-case hex, as its `Display`
/// writes them.
fn push_hex(line: &mut Vec<u8>, bytes: &[u8]) {
    let mut hex = [0; 32];
    if let Ok(text) = base16ct::lower::encode(bytes, &mut hex) {
        line.extend_from_slice(text);
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let leaf = ctx.lookup_current();
        // Read before formatting: the spans' extensions are borrowed
        // below, and reading the context borrows them again.
        let ids = match (&self.trace_ids, &leaf) {
            (Some(trace_ids), Some(span)) => trace_ids.of(span),
            _ => None,
        };
        // The members written here open the object; the event's own map
        // follows, its `{` then overwritten with the `,` after them.
        let mut line = Vec::with_capacity(768);
        if let Some(sc) = ids {
            line.extend_from_slice(b"{\"trace_id\":\"");
            push_hex(&mut line, &sc.trace_id().to_bytes());
            line.extend_from_slice(b"\",\"span_id\":\"");
            push_hex(&mut line, &sc.span_id().to_bytes());
            line.push(b'"');
        }
        if !self.without_time {
            line.extend_from_slice(if line.is_empty() { b"{" } else { b"," });
            line.extend_from_slice(b"\"timestamp\":\"");
            super::timestamp::push(&mut line, std::time::SystemTime::now());
            line.push(b'"');
        }
        let members = line.len();
        {
            let mut serializer = serde_json::Serializer::new(&mut line);
            let mut map = serializer.serialize_map(None).map_err(|_| fmt::Error)?;
            map.serialize_entry("level", &meta.level().as_serde())
                .map_err(|_| fmt::Error)?;
            let mut visitor = SerdeMapVisitor::new(map);
            event.record(&mut visitor);
            let mut map = visitor.take_serializer().map_err(|_| fmt::Error)?;
            map.serialize_entry("target", meta.target())
                .map_err(|_| fmt::Error)?;
            serde::ser::SerializeMap::end(map).map_err(|_| fmt::Error)?;
        }
        // The map's own `{`, after members that opened the object.
        if members > 0 {
            line[members] = b',';
        }
        let parent = event.parent().and_then(|id| ctx.span(id));
        if let Some(span) = parent.as_ref().or(leaf.as_ref()) {
            // Reopen the object the serializer closed.
            line.pop();
            line.extend_from_slice(b",\"span\":");
            push_span::<S, N>(&mut line, span);
            line.extend_from_slice(b",\"spans\":[");
            if let Some(leaf) = &leaf {
                for (i, span) in leaf.scope().from_root().enumerate() {
                    if i > 0 {
                        line.push(b',');
                    }
                    push_span::<S, N>(&mut line, &span);
                }
            }
            line.extend_from_slice(b"]}");
        }
        line.push(b'\n');
        writer.write_str(std::str::from_utf8(&line).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::{Layer as _, Registry, layer::SubscriberExt};

    use super::*;
    use crate::telemetry::{
        CapturedLogs,
        lazy_fields::fixture::{eager_json, emit},
        lazy_json::{LazyJsonFields, LazyJsonSpanFields},
    };

    #[test]
    fn lines_are_the_json_formatters_byte_for_byte() {
        let theirs = CapturedLogs::new();
        let subscriber = Registry::default().with(eager_json(&theirs));
        tracing::subscriber::with_default(subscriber, emit);

        let ours = CapturedLogs::new();
        let subscriber = Registry::default().with(
            LazyJsonSpanFields.and_then(
                tracing_subscriber::fmt::layer()
                    .fmt_fields(LazyJsonFields)
                    .event_format(JsonLines::without_time())
                    .with_writer(ours.clone()),
            ),
        );
        tracing::subscriber::with_default(subscriber, emit);

        let (theirs, ours) = (theirs.contents(), ours.contents());
        assert_eq!(ours, theirs);
        assert_eq!(ours.lines().count(), 4, "{ours}");
        for line in ours.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("a JSON line");
        }
    }

    #[test]
    fn a_line_outside_any_span_has_neither_span_nor_spans() {
        let theirs = CapturedLogs::new();
        let subscriber = Registry::default().with(eager_json(&theirs));
        let log = || tracing::info!(answer = 42u64, "alone");
        tracing::subscriber::with_default(subscriber, log);
        let ours = CapturedLogs::new();
        let subscriber = Registry::default().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(LazyJsonFields)
                .event_format(JsonLines::without_time())
                .with_writer(ours.clone()),
        );
        tracing::subscriber::with_default(subscriber, log);
        assert_eq!(ours.contents(), theirs.contents());
    }
}
