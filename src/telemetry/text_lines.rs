//! The event formatter of plain text logs (the default `--log-format
//! text`, when stdout is not a terminal): the lines of
//! `tracing-subscriber`'s `Full` formatter without ANSI styling, byte for
//! byte (a test compares them), written without `core::fmt`.
//!
//! That formatter writes each piece of a line (the timestamp, built from
//! the calendar up; the level; every span's name, braces and colon; the
//! target) through `write!`, so a line costs a dozen trips through the
//! formatting machinery before its fields. Every audited call writes a
//! line, and with the access log two: under `../shared/perf/run.py
//! --deployed` (text logs) those trips were about 15,000 instructions a
//! call (docs/performance.md). Here the pieces are appended as the text
//! they already are, and the timestamp comes from [`super::timestamp`]
//! (this thread's last second kept, only the microseconds written). The
//! fields (the event's and, already formatted, each span's) are written
//! as before.
//!
//! Styled (ANSI) output, on a terminal, keeps the subscriber's formatter.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::{
    fmt::{
        FmtContext, FormatEvent, FormatFields, FormattedFields,
        format::Writer,
        time::{FormatTime as _, SystemTime},
    },
    registry::LookupSpan,
};

/// The formatter (see the module).
#[derive(Debug, Clone, Copy, Default)]
pub struct TextLines {
    /// Lines without their timestamp (tests compare lines of two runs).
    without_time: bool,
}

impl TextLines {
    /// Lines without their timestamp.
    #[cfg(test)]
    pub fn without_time() -> Self {
        Self { without_time: true }
    }
}

/// The level as the `Full` formatter pads it (five columns, right-aligned).
fn level_text(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    }
}

impl<S, N> FormatEvent<S, N> for TextLines
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
        if !self.without_time {
            match super::timestamp::stamp(std::time::SystemTime::now()) {
                // ASCII digits and separators only.
                Some(stamp) => {
                    writer.write_str(std::str::from_utf8(&stamp).map_err(|_| fmt::Error)?)?;
                }
                // Outside years 1970 to 9999: the formatter's own code, as
                // `Full` writes it.
                None => {
                    if SystemTime.format_time(&mut writer).is_err() {
                        writer.write_str("<unknown time>")?;
                    }
                }
            }
            writer.write_char(' ')?;
        }
        writer.write_str(level_text(meta.level()))?;
        writer.write_char(' ')?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                seen = true;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        writer.write_char('{')?;
                        writer.write_str(fields)?;
                        writer.write_char('}')?;
                    }
                }
                writer.write_char(':')?;
            }
            if seen {
                writer.write_char(' ')?;
            }
        }
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::{
        Layer as _, Registry,
        fmt::format::{Format, Full},
        layer::SubscriberExt,
    };

    use super::*;
    use crate::telemetry::{
        CapturedLogs,
        lazy_fields::{LazySpanFields, LazyTextFields, fixture},
    };

    fn full<S>(
        logs: &CapturedLogs,
    ) -> tracing_subscriber::fmt::Layer<S, LazyTextFields, Format<Full, ()>, CapturedLogs> {
        tracing_subscriber::fmt::layer()
            .without_time()
            .with_ansi(false)
            .fmt_fields(LazyTextFields)
            .with_writer(logs.clone())
    }

    fn emit_at_every_level() {
        fixture::emit();
        let span = tracing::error_span!("outer", a = 1u64);
        let _outer = span.enter();
        let inner = tracing::info_span!("inner");
        let _inner = inner.enter();
        tracing::trace!(target: "some::target", "trace");
        tracing::debug!("debug");
        tracing::info!(x = "y", "info");
        tracing::warn!("warn");
        tracing::error!("error");
    }

    #[test]
    fn lines_are_the_full_formatters_byte_for_byte() {
        let expected = CapturedLogs::new();
        let subscriber = Registry::default().with(LazySpanFields.and_then(full(&expected)));
        tracing::subscriber::with_default(subscriber, emit_at_every_level);

        let ours = CapturedLogs::new();
        let subscriber = Registry::default()
            .with(LazySpanFields.and_then(full(&ours).event_format(TextLines::without_time())));
        tracing::subscriber::with_default(subscriber, emit_at_every_level);

        let (expected, ours) = (expected.contents(), ours.contents());
        assert_eq!(ours, expected);
        assert_eq!(ours.lines().count(), 9, "{ours}");
        assert!(ours.contains("ERROR outer{a=1}:inner: "), "{ours}");
        assert!(
            ours.contains("TRACE outer{a=1}:inner: some::target: trace"),
            "{ours}"
        );
    }

    #[test]
    fn a_line_starts_with_the_time_as_the_subscriber_writes_it() {
        let logs = CapturedLogs::new();
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(TextLines::default())
            .with_writer(logs.clone());
        tracing::subscriber::with_default(Registry::default().with(layer), || {
            tracing::info!("timed");
        });
        let line = logs.contents();
        // `2026-11-27T03:01:44.123456Z  INFO idgate::...: timed`
        let (time, rest) = line.split_at(27);
        assert!(
            time.len() == 27 && time.as_bytes()[10] == b'T' && time.ends_with('Z'),
            "{line}"
        );
        assert!(time[..4].bytes().all(|b| b.is_ascii_digit()), "{line}");
        assert!(rest.starts_with("  INFO "), "{line}");
        assert!(rest.ends_with(": timed\n"), "{line}");
    }
}
