//! The date and time formats the service writes, in its UTC offset.

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{Date, OffsetDateTime, UtcOffset};

const DATETIME: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
const BR_DATETIME: &[BorrowedFormatItem<'_>] =
    format_description!("[day]/[month]/[year] [hour]:[minute]:[second]");
const BR_DATE: &[BorrowedFormatItem<'_>] = format_description!("[day]/[month]/[year]");
const ISO_DATE: &[BorrowedFormatItem<'_>] = format_description!("[year]-[month]-[day]");

/// Renders instants in the service's offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WireTime {
    offset: UtcOffset,
}

impl WireTime {
    /// `minutes` from UTC; out-of-range values fall back to UTC.
    pub(crate) fn new(minutes: i16) -> Self {
        let offset =
            UtcOffset::from_whole_seconds(i32::from(minutes) * 60).unwrap_or(UtcOffset::UTC);
        Self { offset }
    }

    /// `yyyy-mm-dd hh:mm:ss`.
    pub(crate) fn datetime(self, at: OffsetDateTime) -> String {
        at.to_offset(self.offset)
            .format(DATETIME)
            .unwrap_or_default()
    }

    /// `dd/MM/yyyy HH:mm:ss` (the credential's `expires`).
    pub(crate) fn br_datetime(self, at: OffsetDateTime) -> String {
        at.to_offset(self.offset)
            .format(BR_DATETIME)
            .unwrap_or_default()
    }
}

/// `dd/mm/yyyy`.
pub(crate) fn br_date(date: Date) -> String {
    date.format(BR_DATE).unwrap_or_default()
}

/// `yyyy-mm-dd`.
pub(crate) fn iso_date(date: Date) -> String {
    date.format(ISO_DATE).unwrap_or_default()
}

/// Parses `dd/mm/yyyy` (the `/appkey` `nascimento`).
pub(crate) fn parse_br_date(text: &str) -> Option<Date> {
    Date::parse(text.trim(), BR_DATE).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::{date, datetime};

    #[test]
    fn formats_in_the_configured_offset() {
        let t = WireTime::new(-180);
        let at = datetime!(2025-01-06 02:30:05 UTC);
        assert_eq!(t.datetime(at), "2025-01-05 23:30:05");
        assert_eq!(t.br_datetime(at), "05/01/2025 23:30:05");
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(parse_br_date("14/03/1985"), Some(date!(1985 - 03 - 14)));
        assert_eq!(parse_br_date("31/02/1985"), None);
        assert_eq!(br_date(date!(1985 - 03 - 14)), "14/03/1985");
        assert_eq!(iso_date(date!(1985 - 03 - 14)), "1985-03-14");
    }
}
