//! [`TextFields`]: the text log format's field formatter, cheap on the
//! call path.
//!
//! The fmt layer formats a span's fields when the span opens and when a
//! field is recorded, so that a log line written inside it can show them;
//! every RPC opens spans whether or not a line is ever written in them.
//! `tracing-subscriber`'s `DefaultFields` writes every value through
//! `core::fmt`'s `Debug` machinery and ANSI styling wrappers; profiles of
//! the hop showed that as a tenth of a call's instructions. The values on
//! those spans are short plain strings and integers: this formatter writes
//! them straight into the buffer, byte for byte as `DefaultFields` would,
//! and hands anything else (messages, errors, `Debug` values, strings that
//! need escaping, styled output) to `DefaultFields`' own visitor.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::{
    field::{RecordFields, VisitOutput},
    fmt::{
        FormatFields,
        format::{DefaultVisitor, Writer},
    },
};

/// The field formatter of text log lines (see the module).
#[derive(Debug, Clone, Copy, Default)]
pub struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = TextVisitor {
            plain: !writer.has_ansi_escapes(),
            writer,
            is_empty: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes the one field `record` hands its visitor into `out`, as
/// [`TextFields`] writes a field without styling, with no leading space.
pub(super) fn format_field(out: &mut String, record: impl FnOnce(&mut dyn Visit)) -> fmt::Result {
    let mut visitor = TextVisitor {
        plain: true,
        writer: Writer::new(out),
        is_empty: true,
        result: Ok(()),
    };
    record(&mut visitor);
    visitor.result
}

struct TextVisitor<'w> {
    writer: Writer<'w>,
    /// No ANSI styling: the fast paths apply.
    plain: bool,
    is_empty: bool,
    result: fmt::Result,
}

/// True when `str`'s `Debug` form is the value between two quotes:
/// printable ASCII but `"` and `\\`. Eight bytes at a time: span values
/// are tens of bytes (paths, references), checked on every span.
fn needs_no_escape(value: &str) -> bool {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// Bytes of `word` equal to `b` have their high bit set (and no other
    /// byte does, given no byte of `word` has its own high bit set).
    fn eq(word: u64, b: u8) -> u64 {
        let x = word ^ (LOW * u64::from(b));
        x.wrapping_sub(LOW) & !x & HIGH
    }
    let bytes = value.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Non-ASCII (high bit), control bytes (below 0x20: adding 0x60
        // leaves the high bit clear), DEL, `"` and `\\`.
        let bad = (word & HIGH)
            | (!word.wrapping_add(LOW * 0x60) & HIGH)
            | eq(word, 0x7f)
            | eq(word, b'"')
            | eq(word, b'\\');
        if bad != 0 {
            return false;
        }
    }
    chunks
        .remainder()
        .iter()
        .all(|b| (0x20..0x7f).contains(b) && *b != b'"' && *b != b'\\')
}

impl TextVisitor<'_> {
    /// Whether `field` takes a fast path: a plain `name=` prefix.
    fn fast(&self, field: &Field) -> bool {
        let name = field.name();
        self.plain && self.result.is_ok() && name != "message" && !name.starts_with("r#")
    }

    /// Writes ` name=` (no space first) then `parts`, in one write to the
    /// line when they fit a small buffer: each write is a dynamic call
    /// into the line's `String`.
    fn write_field(&mut self, field: &Field, parts: &[&str]) -> fmt::Result {
        let mut buffer = [0u8; 160];
        let mut len = 0;
        let mut push = |s: &str| -> bool {
            let end = len + s.len();
            match buffer.get_mut(len..end) {
                Some(slot) => {
                    slot.copy_from_slice(s.as_bytes());
                    len = end;
                    true
                }
                None => false,
            }
        };
        let separator = if self.is_empty { "" } else { " " };
        self.is_empty = false;
        let fits = [separator, field.name(), "="]
            .iter()
            .chain(parts)
            .all(|part| push(part));
        match std::str::from_utf8(&buffer[..len]) {
            Ok(joined) if fits => self.writer.write_str(joined),
            _ => {
                self.writer.write_str(separator)?;
                self.writer.write_str(field.name())?;
                self.writer.write_char('=')?;
                parts
                    .iter()
                    .try_for_each(|part| self.writer.write_str(part))
            }
        }
    }

    /// Writes an integer field, or has `slow` write it through
    /// `DefaultFields`' visitor off the fast path.
    fn record_integer(
        &mut self,
        field: &Field,
        value: impl itoa::Integer,
        slow: impl FnOnce(&mut DefaultVisitor<'_>),
    ) {
        if self.fast(field) {
            let mut digits = itoa::Buffer::new();
            self.result = self.write_field(field, &[digits.format(value)]);
        } else {
            self.delegate(slow);
        }
    }

    /// Hands one field to `DefaultFields`' visitor.
    fn delegate(&mut self, visit: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut default = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        visit(&mut default);
        self.result = default.finish();
        self.is_empty = false;
    }
}

impl Visit for TextVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.fast(field) && needs_no_escape(value) {
            self.result = self.write_field(field, &["\"", value, "\""]);
        } else {
            self.delegate(|v| v.record_str(field, value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_integer(field, value, |v| v.record_i64(field, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.record_integer(field, value, |v| v.record_u64(field, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.fast(field) {
            self.result = self.write_field(field, &[if value { "true" } else { "false" }]);
        } else {
            self.delegate(|v| v.record_bool(field, value));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.delegate(|v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.delegate(|v| v.record_debug(field, value));
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::fmt::format::DefaultFields;

    use super::*;

    /// Formats the fields of one event with `fields` into a string.
    fn format_with<N>(fields: N, emit: impl FnOnce()) -> String
    where
        N: for<'w> FormatFields<'w> + Send + Sync + 'static,
    {
        let logs = crate::telemetry::CapturedLogs::new();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_level(false)
            .fmt_fields(fields)
            .with_writer(logs.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        logs.contents()
    }

    fn emit() {
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = "idgate.v1.LivenessService/StartSession3D",
            otel.kind = "server",
            rpc.grpc.status_code = tracing::field::Empty,
            server.port = 8080i64,
            count = 7u64,
            ok = true,
            quoted = "a \"b\" \\ c\n",
            accented = "São Paulo",
            long_plain = "/facecaptcha/service/captcha/3d/session-token",
            long_quoted = "/facecaptcha/service/\"captcha\"/3d",
            tab = "a\tb",
            del = "a\u{7f}b",
            big = -9_223_372_036_854_775_808i64,
            huge = u64::MAX,
            r#type = "raw",
            debug = ?Some(3),
        );
        span.record("rpc.grpc.status_code", 0i64);
        let _entered = span.enter();
        let err = std::io::Error::other("refused");
        tracing::warn!(
            error = &err as &dyn std::error::Error,
            n = -4i64,
            "upstream {} failed",
            "x"
        );
        tracing::warn!(message = "plain \"message\"", empty = "");
    }

    #[test]
    fn the_escape_check_agrees_with_the_debug_form_for_every_byte() {
        for b in 0..=0x7fu8 {
            for at in 0..12 {
                let mut value = vec![b'x'; 12];
                value[at] = b;
                let value = String::from_utf8(value).unwrap();
                let plain = format!("{value:?}") == format!("\"{value}\"");
                assert_eq!(needs_no_escape(&value), plain, "byte {b:#x} at {at}");
            }
        }
        assert!(!needs_no_escape("0123456789é"));
        assert!(!needs_no_escape("é0123456789"));
    }

    proptest::proptest! {
        #[test]
        fn the_escape_check_agrees_with_the_debug_form_for_any_string(
            value in proptest::prop_oneof![".{0,80}", "[ -~]{0,64}", "[ -~\t\x7f\x01é]{0,64}"]
        ) {
            // Writing the value between quotes is right whenever the check
            // says so; for ASCII it says so exactly when it is right (other
            // text always goes the slow, exact way).
            let plain = format!("{value:?}") == format!("\"{value}\"");
            if needs_no_escape(&value) {
                proptest::prop_assert!(plain);
            }
            if value.is_ascii() {
                proptest::prop_assert_eq!(needs_no_escape(&value), plain);
            }
        }
    }

    #[test]
    fn lines_are_the_same_as_default_fields_writes() {
        let fast = format_with(TextFields, emit);
        let default = format_with(DefaultFields::new(), emit);
        assert_eq!(fast, default);
        assert!(fast.contains(r#"otel.kind="server""#), "{fast}");
        assert!(fast.contains("server.port=8080"), "{fast}");
    }
}
