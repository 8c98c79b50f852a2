//! Span fields of text log lines, captured when a span opens and written
//! out only when a line is logged inside the span.
//!
//! The fmt layer formats every span's fields the moment the span opens or
//! records one, so that a line logged inside it can show them; a call
//! opens two spans or more and, at the default level, logs nothing in them. That
//! formatting was the largest cost of a span on the hop. [`LazySpanFields`]
//! runs just before the fmt layer, under the same filter: it copies each
//! span's values as they come (strings into one buffer, unexamined; any
//! other value formatted on the spot by [`TextFields`]) and leaves an empty
//! `FormattedFields` so the fmt layer does not format them itself. When an
//! event is about to be written, the spans in its scope get their fields
//! written out (strings quoted and escaped then; a span's values already
//! written for an earlier line are kept, and only those recorded since
//! are added), byte for byte what the fmt layer would have written (a test
//! compares the two), and the fmt layer prints them as before.
//!
//! Only for plain (non-ANSI) text: styled output keeps the fmt layer's own
//! eager formatting.

use std::{fmt, ops::Range};

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

use super::text_fields::{TextFields, format_field};

/// The layer (see the module). Stack it right before a fmt layer whose
/// fields formatter is [`LazyTextFields`], under one filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct LazySpanFields;

/// The fields formatter of a fmt layer behind [`LazySpanFields`]: events'
/// fields as [`TextFields`] writes them; span records are that layer's.
#[derive(Debug, Clone, Copy, Default)]
pub struct LazyTextFields;

impl<'w> FormatFields<'w> for LazyTextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        TextFields.format_fields(writer, fields)
    }

    fn add_fields(&self, _: &'w mut FormattedFields<Self>, _: &Record<'_>) -> fmt::Result {
        Ok(())
    }
}

/// One span's values, in the order the span opened with and recorded them.
#[derive(Debug, Default)]
struct Captured {
    /// Every value, in order. The fmt layer joins the fields of a span's
    /// first values and of each record by a space, so every field follows
    /// the one before it after a space.
    entries: Vec<Entry>,
    /// The text of the values: string values and pre-formatted fields.
    text: String,
    /// How many of `entries` `FormattedFields` already shows: a line
    /// written after a record adds only the values recorded since.
    shown: usize,
}

#[derive(Debug)]
enum Entry {
    /// A string value, a range of `text`, written (quoted, escaped if it
    /// must be) only when a line needs it.
    Str(Field, Range<usize>),
    /// A field formatted already (`name=value`, a message, a `Debug`
    /// value, ...), a range of `text`.
    Formatted(Range<usize>),
}

/// Span values a lazy layer captured, written out when a line needs them
/// ([`write_scope`]).
pub(super) trait Pending: Send + Sync + 'static {
    /// Brings `fields` (the span's `FormattedFields`) up to the values
    /// captured so far, as the fmt layer would show them.
    fn write_into(&mut self, fields: &mut String);
}

impl Pending for Captured {
    fn write_into(&mut self, fields: &mut String) {
        self.write_new(fields);
    }
}

/// Before the fmt layer writes `event`: each span in its scope gets the
/// values its [`Pending`] `C` holds written into its `FormattedFields<N>`.
pub(super) fn write_scope<S, C, N>(event: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    C: Pending,
    N: 'static,
{
    let Some(scope) = ctx.event_scope(event) else {
        return;
    };
    for span in scope {
        let mut extensions = span.extensions_mut();
        // Both live in the span's extensions: take the text out to write
        // it, and put it back.
        let Some(mut text) = extensions
            .get_mut::<FormattedFields<N>>()
            .map(|f| std::mem::take(&mut f.fields))
        else {
            continue;
        };
        if let Some(pending) = extensions.get_mut::<C>() {
            pending.write_into(&mut text);
        }
        if let Some(fields) = extensions.get_mut::<FormattedFields<N>>() {
            fields.fields = text;
        }
    }
}

impl Captured {
    fn capture(&mut self, fields: impl RecordFields) {
        fields.record(&mut Capture(self));
    }

    /// Appends the values `out` (the fields as the fmt layer would have
    /// formatted them up to [`Self::shown`]) does not show yet.
    fn write_new(&mut self, out: &mut String) {
        if self.shown == self.entries.len() {
            return;
        }
        out.reserve(self.text.len() + 16 * (self.entries.len() - self.shown));
        for entry in &self.entries[self.shown..] {
            if !out.is_empty() {
                out.push(' ');
            }
            match entry {
                Entry::Str(field, value) => {
                    let value = &self.text[value.clone()];
                    let start = out.len();
                    if format_field(out, |v| v.record_str(field, value)).is_err() {
                        out.truncate(start);
                    }
                }
                Entry::Formatted(field) => out.push_str(&self.text[field.clone()]),
            }
        }
        self.shown = self.entries.len();
    }
}

/// Records one batch of values into a [`Captured`].
struct Capture<'a>(&'a mut Captured);

impl Capture<'_> {
    /// Formats one field with [`TextFields`]' visitor into the text.
    fn one(&mut self, record: impl FnOnce(&mut dyn Visit)) {
        let start = self.0.text.len();
        if format_field(&mut self.0.text, record).is_err() {
            self.0.text.truncate(start);
            return;
        }
        let end = self.0.text.len();
        self.0.entries.push(Entry::Formatted(start..end));
    }
}

impl Visit for Capture<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let start = self.0.text.len();
        self.0.text.push_str(value);
        let end = self.0.text.len();
        self.0.entries.push(Entry::Str(field.clone(), start..end));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.one(|v| v.record_i64(field, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.one(|v| v.record_u64(field, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.one(|v| v.record_bool(field, value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.one(|v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.one(|v| v.record_debug(field, value));
    }
}

impl<S> Layer<S> for LazySpanFields
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        // Sized for the span's declared fields, a few records and short
        // values, so that capturing does not grow them field by field.
        let declared = attrs.metadata().fields().len();
        let mut captured = Captured {
            entries: Vec::with_capacity(declared),
            text: String::with_capacity(24 * declared),
            shown: 0,
        };
        captured.capture(attrs);
        extensions.insert(captured);
        // Present, so the fmt layer next in line formats nothing itself.
        extensions.insert(FormattedFields::<LazyTextFields>::new(String::new()));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(captured) = span.extensions_mut().get_mut::<Captured>() {
            captured.capture(values);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        write_scope::<S, Captured, LazyTextFields>(event, &ctx);
    }
}

/// What the lazy layers' tests log, to compare their lines with the
/// eager formatters'.
#[cfg(test)]
pub(super) mod fixture {
    use tracing_subscriber::fmt::format::{Format, Json, JsonFields};

    use crate::telemetry::CapturedLogs;

    /// `tracing-subscriber`'s JSON layer as `setup` configured it before
    /// the lazy fields and `json_lines` (without the time, which differs
    /// between two runs), writing into `logs`: what the lines are
    /// compared with.
    pub(in crate::telemetry) fn eager_json<S>(
        logs: &CapturedLogs,
    ) -> tracing_subscriber::fmt::Layer<S, JsonFields, Format<Json, ()>, CapturedLogs> {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .without_time()
            .with_writer(logs.clone())
    }

    /// Spans opening with values, recording more (the same name twice
    /// among them) before and after lines are written in them, nested,
    /// empty, with escapes, numbers, bytes, errors, raw names and `Debug`
    /// values.
    pub(in crate::telemetry) fn emit() {
        let server = tracing::info_span!(
            "grpc.server",
            otel.name = "idgate.v1.LivenessService/StartSession3D",
            otel.kind = "server",
            rpc.grpc.status_code = tracing::field::Empty,
            idgate.journey_ref = tracing::field::Empty,
            server.port = 8080i64,
            ratio = 0.25f64,
            ok = true,
            quoted = "a \"b\" \\ c\n",
            accented = "São Paulo",
            r#type = "raw",
            debug = ?Some(3),
            bytes = &b"ab"[..],
        );
        let _in_server = server.enter();
        tracing::info!("before any record");
        server.record("idgate.journey_ref", "j-0123456789abcdef");
        let empty = tracing::info_span!("handler", idgate.channel = tracing::field::Empty);
        let _in_handler = empty.enter();
        tracing::warn!(n = -4i64, "inside an empty span");
        empty.record("idgate.channel", "primary");
        let err = std::io::Error::other("refused");
        let client = tracing::info_span!(
            "http.client",
            url.path = "/facecaptcha/service/captcha/3d/session-token",
            error.type = tracing::field::Empty,
        );
        client.record("error.type", "connect");
        client.record("error.type", &err as &dyn std::error::Error);
        let _in_client = client.enter();
        tracing::error!(message = "plain \"message\"", count = 7u64);
        server.record("rpc.grpc.status_code", 14i64);
        server.record("idgate.journey_ref", "j-fedcba9876543210");
        tracing::info!("after more records");
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::{
        Registry,
        fmt::format::{DefaultFields, Format, Full},
        layer::SubscriberExt,
    };

    use super::*;
    use crate::telemetry::CapturedLogs;

    fn fmt_layer<S>(
        logs: &CapturedLogs,
    ) -> tracing_subscriber::fmt::Layer<S, DefaultFields, Format<Full, ()>, CapturedLogs> {
        tracing_subscriber::fmt::layer()
            .without_time()
            .with_ansi(false)
            .with_writer(logs.clone())
    }

    #[test]
    fn lines_show_the_same_span_fields_as_the_eager_fmt_layer() {
        let eager = CapturedLogs::new();
        let subscriber = Registry::default().with(fmt_layer(&eager).fmt_fields(TextFields));
        tracing::subscriber::with_default(subscriber, fixture::emit);

        let lazy = CapturedLogs::new();
        let subscriber = Registry::default()
            .with(LazySpanFields.and_then(fmt_layer(&lazy).fmt_fields(LazyTextFields)));
        tracing::subscriber::with_default(subscriber, fixture::emit);

        let (eager, lazy) = (eager.contents(), lazy.contents());
        assert_eq!(lazy, eager);
        assert_eq!(lazy.lines().count(), 4, "{lazy}");
        assert!(
            lazy.contains(r#"idgate.journey_ref="j-0123456789abcdef""#),
            "{lazy}"
        );
        assert!(lazy.contains("rpc.grpc.status_code=14"), "{lazy}");
    }
}
