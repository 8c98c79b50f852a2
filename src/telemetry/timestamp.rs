//! The `timestamp` of JSON log lines, as `tracing-subscriber`'s
//! `SystemTime` writes it (`2026-11-27T03:01:44.123456Z`: UTC, six digits
//! of microseconds), written without the formatting machinery.
//!
//! Every audited call writes a line, and with the access log two: the
//! subscriber's own formatter built each timestamp from the calendar up
//! through `core::fmt`, about a tenth of a line's cost
//! (`cargo bench --bench log_lines`). Lines of one second share their
//! date and time of day, so each thread keeps the last second's text and
//! writes only the microseconds when the second has not changed.

use std::{
    cell::Cell,
    time::{SystemTime, UNIX_EPOCH},
};

/// `YYYY-MM-DDTHH:MM:SS`.
const SECOND_LEN: usize = 19;

thread_local! {
    /// The last second this thread wrote, and its text.
    static LAST_SECOND: Cell<Option<(u64, [u8; SECOND_LEN])>> = const { Cell::new(None) };
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(super) const STAMP_LEN: usize = SECOND_LEN + 8;

/// `now` as the formatter's timestamp, on the stack (a line written
/// through a `fmt::Write` takes it without a buffer of its own); `None`
/// outside years 1970 to 9999, which the formatter's own code writes.
pub(super) fn stamp(now: SystemTime) -> Option<[u8; STAMP_LEN]> {
    let since_epoch = now.duration_since(UNIX_EPOCH).ok()?;
    let secs = since_epoch.as_secs();
    let second = match LAST_SECOND.get() {
        Some((cached, text)) if cached == secs => text,
        _ => {
            let text = second_text(secs)?;
            LAST_SECOND.set(Some((secs, text)));
            text
        }
    };
    let mut out = [0; STAMP_LEN];
    out[..SECOND_LEN].copy_from_slice(&second);
    out[SECOND_LEN] = b'.';
    let mut micros = since_epoch.subsec_micros();
    for digit in out[SECOND_LEN + 1..STAMP_LEN - 1].iter_mut().rev() {
        // A digit: `micros % 10` is below 10.
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    out[STAMP_LEN - 1] = b'Z';
    Some(out)
}

/// Appends `now` as the JSON formatter's timestamp (without quotes).
/// Instants outside years 1970 to 9999 are written by the formatter's own
/// code, as before.
pub(super) fn push(line: &mut Vec<u8>, now: SystemTime) {
    match stamp(now) {
        Some(text) => line.extend_from_slice(&text),
        None => push_slow(line),
    }
}

/// `YYYY-MM-DDTHH:MM:SS` of the second `secs` after the epoch, for years
/// up to 9999.
fn second_text(secs: u64) -> Option<[u8; SECOND_LEN]> {
    let at = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    let year = u32::try_from(at.year()).ok().filter(|y| *y <= 9999)?;
    let mut text = Vec::with_capacity(SECOND_LEN);
    push_digits(&mut text, year, 4);
    text.push(b'-');
    push_digits(&mut text, u32::from(u8::from(at.month())), 2);
    text.push(b'-');
    push_digits(&mut text, u32::from(at.day()), 2);
    text.push(b'T');
    push_digits(&mut text, u32::from(at.hour()), 2);
    text.push(b':');
    push_digits(&mut text, u32::from(at.minute()), 2);
    text.push(b':');
    push_digits(&mut text, u32::from(at.second()), 2);
    text.try_into().ok()
}

/// `value` in decimal, zero-padded to `width` digits (`value` has at most
/// `width` digits).
fn push_digits(line: &mut Vec<u8>, value: u32, width: u32) {
    let mut divisor = 10_u32.pow(width - 1);
    while divisor > 0 {
        // A digit: `value / divisor % 10` is below 10.
        line.push(b'0' + (value / divisor % 10) as u8);
        divisor /= 10;
    }
}

/// The formatter's own timestamp (never before 1970 or after 9999 on a
/// running gateway).
fn push_slow(line: &mut Vec<u8>) {
    use tracing_subscriber::fmt::{
        format::Writer,
        time::{FormatTime as _, SystemTime as Formatter},
    };
    let mut text = String::new();
    if Formatter.format_time(&mut Writer::new(&mut text)).is_ok() {
        line.extend_from_slice(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tracing_subscriber::fmt::{
        format::Writer,
        time::{FormatTime as _, SystemTime as Formatter},
    };

    use super::*;

    fn text(secs: u64, micros: u64) -> String {
        let mut line = Vec::new();
        push(
            &mut line,
            UNIX_EPOCH + Duration::from_micros(secs * 1_000_000 + micros),
        );
        String::from_utf8(line).expect("ASCII")
    }

    #[test]
    fn instants_are_written_in_utc_with_six_digits_of_microseconds() {
        // Expected texts from Python's datetime (UTC).
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 7, "2000-02-29T00:00:00.000007Z"),
            (951_868_799, 999_999, "2000-02-29T23:59:59.999999Z"),
            (1_709_251_199, 123_456, "2024-02-29T23:59:59.123456Z"),
            (1_764_201_600, 10, "2025-11-27T00:00:00.000010Z"),
            (4_107_542_400, 500_000, "2100-03-01T00:00:00.500000Z"),
            (253_402_300_799, 1, "9999-12-31T23:59:59.000001Z"),
        ];
        for (secs, micros, expected) in cases {
            assert_eq!(text(secs, micros), expected, "{secs} s {micros} µs");
            // Again, from this thread's cached second.
            assert_eq!(text(secs, micros), expected, "{secs} s {micros} µs, cached");
        }
    }

    #[test]
    fn a_second_cached_by_the_thread_is_not_reused_for_another() {
        assert_eq!(text(1_764_201_600, 0), "2025-11-27T00:00:00.000000Z");
        assert_eq!(text(1_764_201_601, 0), "2025-11-27T00:00:01.000000Z");
        assert_eq!(text(1_764_201_600, 5), "2025-11-27T00:00:00.000005Z");
    }

    #[test]
    fn the_text_is_the_subscriber_formatters_for_the_same_second() {
        // The formatter reads the clock itself: compare its text with ours
        // for an instant read right after, in the same second (a second
        // that ended in between is tried again).
        for _ in 0..10 {
            let mut theirs = String::new();
            Formatter
                .format_time(&mut Writer::new(&mut theirs))
                .expect("formatted");
            let mut ours = Vec::new();
            push(&mut ours, SystemTime::now());
            let ours = String::from_utf8(ours).expect("ASCII");
            assert_eq!(ours.len(), theirs.len(), "{ours} / {theirs}");
            if ours[..SECOND_LEN] == theirs[..SECOND_LEN] {
                assert!(ours.ends_with('Z') && ours.as_bytes()[SECOND_LEN] == b'.');
                return;
            }
        }
        panic!("no two reads of the clock fell in the same second");
    }
}
