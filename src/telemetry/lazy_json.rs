//! Span fields of JSON log lines, captured when a span opens or records
//! (each value serialized as it comes) and assembled into the span's
//! object only when a line is logged inside the span: the JSON
//! counterpart of [`super::lazy_fields`].
//!
//! The JSON formatter of `tracing-subscriber` keeps each span's fields as
//! a JSON text, and on every `record` parses that text, adds the new
//! values and serializes it again. A call's server span records five
//! values or more, and a line (the audit record, the access log) is
//! written in it once or twice: on the hop that re-serializing cost more
//! than writing the lines (docs/performance.md). [`LazyJsonSpanFields`]
//! runs just before the JSON fmt layer, under the same filter: it keeps
//! each span's values as JSON texts, in order, and leaves an empty
//! `FormattedFields` so the fmt layer does not format them itself. When
//! an event is about to be written, the spans in its scope get their
//! objects written, as the JSON formatter's own visitor does (a
//! map ordered by name, the last value of a name winning, `Debug` values
//! as strings, `r#` dropped from raw names): the same bytes (a test
//! compares the two).

use super::lazy_fields::{Pending, write_scope};
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
    span::{Attributes, Id, Record},
};
use tracing_subscriber::{
    field::RecordFields,
    fmt::{FormatFields, FormattedFields, format::Writer},
    layer::{Context, Layer},
    registry::LookupSpan,
};

/// The layer (see the module). Stack it right before a JSON fmt layer
/// whose fields formatter is [`LazyJsonFields`], under one filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct LazyJsonSpanFields;

/// The fields formatter of a JSON fmt layer behind [`LazyJsonSpanFields`]:
/// span fields are that layer's to write. (The JSON formatter serializes
/// an event's own fields itself.)
#[derive(Debug, Clone, Copy, Default)]
pub struct LazyJsonFields;

impl<'w> FormatFields<'w> for LazyJsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut captured = CapturedJson::default();
        fields.record(&mut captured);
        writer.write_str(&captured.serialize())
    }

    fn add_fields(&self, _: &'w mut FormattedFields<Self>, _: &Record<'_>) -> std::fmt::Result {
        Ok(())
    }
}

/// One span's values, in the order the span opened with and recorded
/// them: each serialized as JSON when it comes, back to back in one
/// buffer, rather than kept as a `serde_json::Value` each (an allocation
/// per string: the span of a Redis command has six).
#[derive(Debug, Default)]
struct CapturedJson {
    /// The values' JSON texts, back to back.
    text: Vec<u8>,
    /// Each value's name and where its text ends in `text` (it starts
    /// where the one before ends).
    entries: Vec<(&'static str, usize)>,
    /// `FormattedFields` holds the current values.
    written: bool,
}

impl CapturedJson {
    /// The values as the JSON formatter's visitor serializes them: an
    /// object ordered by name, the last value of a name winning.
    fn serialize(&self) -> String {
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        // Stable: the values of one name stay in the order they came.
        order.sort_by_key(|&i| self.entries[i].0);
        let mut out = Vec::with_capacity(self.text.len() + 24 * self.entries.len() + 2);
        out.push(b'{');
        for (n, &i) in order.iter().enumerate() {
            let name = self.entries[i].0;
            if order
                .get(n + 1)
                .is_some_and(|&next| self.entries[next].0 == name)
            {
                continue;
            }
            if out.len() > 1 {
                out.push(b',');
            }
            // A name is a string: serializing it cannot fail.
            let _ = serde_json::to_writer(&mut out, name);
            out.push(b':');
            let start = i.checked_sub(1).map_or(0, |before| self.entries[before].1);
            out.extend_from_slice(&self.text[start..self.entries[i].1]);
        }
        out.push(b'}');
        String::from_utf8(out).unwrap_or_else(|_| "{}".to_owned())
    }

    fn push(&mut self, name: &'static str, value: &impl serde::Serialize) {
        let before = self.text.len();
        if serde_json::to_writer(&mut self.text, value).is_err() {
            self.text.truncate(before);
            return;
        }
        self.entries.push((name, self.text.len()));
        self.written = false;
    }
}

impl Pending for CapturedJson {
    /// The object is written whole (the last value of a name wins, so a
    /// new value may change what was written).
    fn write_into(&mut self, fields: &mut String) {
        if !self.written {
            self.written = true;
            *fields = self.serialize();
        }
    }
}

impl Visit for CapturedJson {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // As a `Value`: a NaN or an infinity is `null`, as there.
        self.push(field.name(), &serde_json::Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field.name(), &value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field.name(), &value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field.name(), &value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field.name(), &value);
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.push(field.name(), &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let name = field.name();
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.push(name, &format!("{value:?}"));
    }
}

impl<S> Layer<S> for LazyJsonSpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let mut captured = CapturedJson {
            text: Vec::with_capacity(24 * attrs.metadata().fields().len()),
            entries: Vec::with_capacity(attrs.metadata().fields().len() + 2),
            written: false,
        };
        attrs.record(&mut captured);
        extensions.insert(captured);
        // Present, so the fmt layer next in line formats nothing itself.
        extensions.insert(FormattedFields::<LazyJsonFields>::new(String::new()));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(captured) = span.extensions_mut().get_mut::<CapturedJson>() {
            values.record(captured);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        write_scope::<S, CapturedJson, LazyJsonFields>(event, &ctx);
    }
}

#[cfg(test)]
mod tests;
