//! The end user of a journey: name, birth date, customer reference.

use std::fmt;

use time::{Date, Month, OffsetDateTime, macros::format_description};

use super::Cpf;

/// Longest name accepted, in characters. Generous for Brazilian full names
/// (which can run to six or more parts) while bounding the request.
pub const MAX_NAME_CHARS: usize = 200;

/// Longest customer reference, per the spec.
pub const MAX_CUSTOMER_REFERENCE_CHARS: usize = 255;

/// The end user's name and surname. Personal data: `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub struct PersonName(String);

impl PersonName {
    /// Parses a name: non-empty, at most [`MAX_NAME_CHARS`], no control
    /// characters; inner runs of white space are folded to one space.
    pub fn parse(input: &str) -> Result<Self, &'static str> {
        if input.chars().any(char::is_control) {
            return Err("must not contain control characters");
        }
        let folded = input.split_whitespace().collect::<Vec<_>>().join(" ");
        if folded.is_empty() {
            return Err("is required");
        }
        if folded.chars().count() > MAX_NAME_CHARS {
            return Err("is longer than 200 characters");
        }
        if !folded.chars().any(char::is_alphabetic) {
            return Err("must contain letters");
        }
        Ok(PersonName(folded))
    }

    /// The name as sent upstream.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PersonName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PersonName(<redacted>)")
    }
}

/// A birth date in the past. Personal data: `Debug` redacts it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BirthDate(Date);

impl BirthDate {
    /// Parses `YYYY-MM-DD` or `DD/MM/YYYY`; the date must exist, be before
    /// `today`, and after 1900-01-01.
    pub fn parse(input: &str, today: Date) -> Result<Self, &'static str> {
        let input = input.trim();
        if input.is_empty() {
            return Err("is required");
        }
        let date = parse_iso(input)
            .or_else(|| parse_br(input))
            .ok_or("must be a real date as YYYY-MM-DD or DD/MM/YYYY")?;
        if date >= today {
            return Err("must be in the past");
        }
        if date < Date::from_calendar_date(1900, Month::January, 1).expect("valid constant") {
            return Err("must be after 1900-01-01");
        }
        Ok(BirthDate(date))
    }

    /// Parses against the current UTC date.
    pub fn parse_now(input: &str) -> Result<Self, &'static str> {
        Self::parse(input, OffsetDateTime::now_utc().date())
    }

    /// The date.
    pub fn date(&self) -> Date {
        self.0
    }

    /// The wire form, `dd/mm/yyyy`.
    pub fn to_wire(&self) -> String {
        let d = self.0;
        format!("{:02}/{:02}/{:04}", d.day(), u8::from(d.month()), d.year())
    }
}

fn parse_iso(s: &str) -> Option<Date> {
    Date::parse(s, format_description!("[year]-[month]-[day]")).ok()
}

fn parse_br(s: &str) -> Option<Date> {
    Date::parse(s, format_description!("[day]/[month]/[year]")).ok()
}

impl fmt::Debug for BirthDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BirthDate(<redacted>)")
    }
}

/// The customer's reference of the proposal, contract or transaction
/// (`idExternoCliente`): alphanumeric, at most 255 characters. It may
/// identify a person's contract, so `Debug` redacts it and spans carry it
/// only when configured to.
#[derive(Clone, PartialEq, Eq)]
pub struct CustomerReference(String);

impl fmt::Debug for CustomerReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CustomerReference(<redacted>)")
    }
}

impl CustomerReference {
    /// Parses a reference: 1 to 255 ASCII letters and digits.
    pub fn parse(input: &str) -> Result<Self, &'static str> {
        if input.is_empty() {
            return Err("is required");
        }
        if input.chars().count() > MAX_CUSTOMER_REFERENCE_CHARS {
            return Err("is longer than 255 characters");
        }
        if !input.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err("must be alphanumeric (letters and digits only)");
        }
        Ok(CustomerReference(input.to_owned()))
    }

    /// The reference as sent upstream.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The end user of a journey, validated.
#[derive(Clone, Debug)]
pub struct EndUser {
    /// Tax id.
    pub cpf: Cpf,
    /// Name and surname.
    pub name: PersonName,
    /// Birth date.
    pub birth_date: BirthDate,
    /// Customer reference.
    pub customer_reference: CustomerReference,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn name_is_folded_and_bounded() {
        assert_eq!(
            PersonName::parse("  Maria   da Silva ").unwrap().as_str(),
            "Maria da Silva"
        );
        assert!(PersonName::parse("   ").is_err());
        assert!(PersonName::parse("Maria\u{0}").is_err());
        assert!(PersonName::parse("Maria\nSilva").is_err());
        assert!(PersonName::parse(&"a".repeat(201)).is_err());
        assert!(PersonName::parse("1234").is_err());
    }

    #[test]
    fn birth_date_accepts_both_forms_and_rejects_future_and_unreal_dates() {
        let today = date!(2026 - 11 - 21);
        let d = BirthDate::parse("1990-02-28", today).unwrap();
        assert_eq!(d.to_wire(), "28/02/1990");
        assert_eq!(BirthDate::parse("28/02/1990", today).unwrap(), d);
        assert!(BirthDate::parse("1990-02-30", today).is_err());
        assert!(BirthDate::parse("2026-11-21", today).is_err());
        assert!(BirthDate::parse("2030-01-01", today).is_err());
        assert!(BirthDate::parse("1899-12-31", today).is_err());
        assert!(BirthDate::parse("yesterday", today).is_err());
    }

    #[test]
    fn customer_reference_is_alphanumeric_and_at_most_255() {
        assert!(CustomerReference::parse("PROP2026x1").is_ok());
        assert!(CustomerReference::parse(&"a".repeat(255)).is_ok());
        assert!(CustomerReference::parse(&"a".repeat(256)).is_err());
        assert!(CustomerReference::parse("PROP-1").is_err());
        assert!(CustomerReference::parse("").is_err());
    }
}
