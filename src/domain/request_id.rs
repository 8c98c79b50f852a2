//! The caller's idempotency key of `CreateJourney` (AIP-155).

use std::fmt;

/// A `request_id`: a UUID the caller chose, in its canonical lower-case
/// hyphenated form, so `{A…}` and `a…` name the same request. Not a
/// secret and not personal; the shared store still keeps only a hash of it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    /// Parses the field: empty (or blank) is `None` (no idempotency); any
    /// other text must be a UUID.
    pub fn parse(input: &str) -> Result<Option<Self>, &'static str> {
        let text = input.trim();
        if text.is_empty() {
            return Ok(None);
        }
        // Bounded before parsing: the longest UUID form is the URN one.
        if text.len() > 45 {
            return Err("must be a UUID (e.g. 7c9e6679-7425-40de-944b-e07fc1f90ae7)");
        }
        uuid::Uuid::try_parse(text)
            .map(|u| Some(RequestId(u.hyphenated().to_string())))
            .map_err(|_| "must be a UUID (e.g. 7c9e6679-7425-40de-944b-e07fc1f90ae7)")
    }

    /// The canonical form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_none_and_forms_of_one_uuid_are_one_id() {
        assert_eq!(RequestId::parse("  "), Ok(None));
        let a = RequestId::parse("7C9E6679-7425-40DE-944B-E07FC1F90AE7").unwrap();
        let b = RequestId::parse("{7c9e6679-7425-40de-944b-e07fc1f90ae7}").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.unwrap().as_str(), "7c9e6679-7425-40de-944b-e07fc1f90ae7");
    }

    #[test]
    fn anything_else_is_refused_without_echoing_it() {
        for bad in [
            "abc",
            "7c9e6679-7425-40de-944b",
            &"9".repeat(5000),
            "\u{0}\u{ffff}",
        ] {
            let err = RequestId::parse(bad).unwrap_err();
            assert!(err.contains("UUID"));
        }
    }
}
