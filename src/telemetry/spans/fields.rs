//! From `tracing` fields to a span's attributes, name, kind and status,
//! and from a `tracing` event to a span event: the conventions of
//! `tracing-opentelemetry`, which the gateway's spans were written for.
//!
//! - `otel.name`, `otel.kind`, `otel.status_code` and
//!   `otel.status_description` set the span's name, kind and status;
//!   every other field is an attribute under its own name.
//! - Integers, floats and booleans keep their type; everything else is
//!   the string its `Debug` (or, for `%` fields, `Display`) writes.
//! - An error recorded with `record_error` adds `exception.message` and
//!   `exception.stacktrace` (the chain of its sources) beside the field
//!   and `<field>.chain`.
//! - An event's `message` names it; an `error` field in an unnamed event
//!   makes it an `exception` event and the span's status an error, as
//!   does an event at level ERROR.

use std::fmt::{self, Write as _};

use opentelemetry::{
    Array, StringValue, Value,
    trace::{SpanKind, Status},
};
use tracing::field::{Field, Visit};

use super::record::SpanState;
use crate::telemetry::otlp::wire;

const NAME: &str = "otel.name";
const KIND: &str = "otel.kind";
const STATUS_CODE: &str = "otel.status_code";
const STATUS_DESCRIPTION: &str = "otel.status_description";
const EXCEPTION_MESSAGE: &str = "exception.message";
const EXCEPTION_STACKTRACE: &str = "exception.stacktrace";

fn kind_of(value: &str) -> Option<SpanKind> {
    [
        ("server", SpanKind::Server),
        ("client", SpanKind::Client),
        ("producer", SpanKind::Producer),
        ("consumer", SpanKind::Consumer),
        ("internal", SpanKind::Internal),
    ]
    .into_iter()
    .find(|(name, _)| value.eq_ignore_ascii_case(name))
    .map(|(_, kind)| kind)
}

fn status_of(value: &str) -> Status {
    if value.eq_ignore_ascii_case("ok") {
        Status::Ok
    } else if value.eq_ignore_ascii_case("error") {
        Status::error("")
    } else {
        Status::Unset
    }
}

/// `value`'s `Debug` text.
fn debug_text(value: &dyn fmt::Debug) -> String {
    let mut text = String::new();
    let _ = write!(text, "{value:?}");
    text
}

/// The messages of `error`'s sources, outermost first.
fn source_chain(error: &(dyn std::error::Error + 'static)) -> Value {
    let mut chain: Vec<StringValue> = Vec::new();
    let mut next = error.source();
    while let Some(source) = next {
        chain.push(source.to_string().into());
        next = source.source();
    }
    Value::Array(Array::String(chain))
}

/// Records a span's fields (as it opens, and each `record` after).
pub(super) struct SpanFields<'a>(pub(super) &'a mut SpanState);

impl SpanFields<'_> {
    fn special(&mut self, field: &Field, text: &str) -> bool {
        // Most fields are attributes: one prefix test tells.
        if !field.name().starts_with("otel.") {
            return false;
        }
        match field.name() {
            NAME => self.0.name = text.to_owned().into(),
            KIND => {
                if let Some(kind) = kind_of(text) {
                    self.0.kind = kind;
                }
            }
            STATUS_CODE => self.0.status = status_of(text),
            STATUS_DESCRIPTION => self.0.status = Status::error(text.to_owned()),
            _ => return false,
        }
        true
    }
}

impl Visit for SpanFields<'_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.add(field.name(), &Value::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.add(field.name(), &Value::F64(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.add(field.name(), &Value::I64(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.special(field, value) {
            self.0.add_str(field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = debug_text(value);
        if !self.special(field, &text) {
            self.0.add_str(field.name(), &text);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let message = value.to_string();
        let chain = source_chain(value);
        self.0.add_str(EXCEPTION_MESSAGE, &message);
        self.0.add(EXCEPTION_STACKTRACE, &chain);
        self.0.add_str(field.name(), &message);
        self.0.add(&format!("{}.chain", field.name()), &chain);
    }
}

/// An event inside a span, read from its fields: its name, its attributes
/// (`Span.Event` field 3 entries), and what it says of the span.
#[derive(Default)]
pub(super) struct EventFields {
    pub(super) name: String,
    pub(super) attributes: Vec<u8>,
    /// The span's status, when the event sets it.
    pub(super) status: Option<Status>,
    /// An error the event recorded (`record_error`): its message and the
    /// chain of its sources, which the span takes as its
    /// `exception.message` and `exception.stacktrace`.
    pub(super) span_exception: Option<(String, Value)>,
}

impl EventFields {
    fn error(&mut self, text: String) {
        self.status = Some(Status::error(text.clone()));
        self.name = "exception".to_owned();
        wire::put_str_event_attribute(&mut self.attributes, EXCEPTION_MESSAGE, &text);
    }
}

impl Visit for EventFields {
    fn record_bool(&mut self, field: &Field, value: bool) {
        match field.name() {
            "message" => self.name = value.to_string(),
            name => wire::put_event_attribute(&mut self.attributes, name, &Value::Bool(value)),
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        match field.name() {
            "message" => self.name = value.to_string(),
            name => wire::put_event_attribute(&mut self.attributes, name, &Value::F64(value)),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        match field.name() {
            "message" => self.name = value.to_string(),
            name => wire::put_event_attribute(&mut self.attributes, name, &Value::I64(value)),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.name = value.to_owned(),
            "error" if self.name.is_empty() => self.error(format!("{value:?}")),
            name => wire::put_str_event_attribute(&mut self.attributes, name, value),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.name = debug_text(value),
            "error" if self.name.is_empty() => self.error(debug_text(value)),
            name => wire::put_str_event_attribute(&mut self.attributes, name, &debug_text(value)),
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let message = value.to_string();
        let chain = source_chain(value);
        wire::put_str_event_attribute(&mut self.attributes, EXCEPTION_MESSAGE, &message);
        wire::put_event_attribute(&mut self.attributes, EXCEPTION_STACKTRACE, &chain);
        wire::put_str_event_attribute(&mut self.attributes, field.name(), &message);
        wire::put_event_attribute(
            &mut self.attributes,
            &format!("{}.chain", field.name()),
            &chain,
        );
        self.span_exception = Some((message, chain));
    }
}

impl EventFields {
    /// Applies what the event says of `span` and adds it there.
    pub(super) fn apply(self, span: &mut SpanState, error_level: bool, name: &'static str) {
        if let Some(status) = self.status {
            span.status = status;
        } else if error_level && span.status == Status::Unset {
            span.status = Status::error("");
        }
        if let Some((message, chain)) = &self.span_exception {
            span.add_str(EXCEPTION_MESSAGE, message);
            span.add(EXCEPTION_STACKTRACE, chain);
        }
        let name = if self.name.is_empty() {
            name
        } else {
            &self.name
        };
        span.add_event(opentelemetry::time::now(), name, &self.attributes);
    }
}
