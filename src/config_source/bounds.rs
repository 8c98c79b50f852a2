//! Bounds every configuration section applies the same way: durations at
//! most [`MAX_DURATION_SECS`], HTTP route paths that are plain paths.
//!
//! One helper per kind of value, so that every key says the same thing
//! when refused: the key and the bound, never the value (a value pasted
//! in the wrong key may be a secret). A duration without a bound is not
//! only a foot-gun: `Instant::now() + ttl` panics on overflow, so an
//! "infinite" TTL would crash the first call that stores an entry.

use super::ConfigError;

/// The longest duration any setting may hold: 30 days. Every TTL and
/// timeout of the gateway is minutes or hours; nothing needs more.
pub const MAX_DURATION_SECS: u64 = 30 * 24 * 3600;

/// The unit a duration key is written in (its `_secs` or `_ms` suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationUnit {
    /// `*_secs`.
    Secs,
    /// `*_ms`.
    Millis,
}

impl DurationUnit {
    /// [`MAX_DURATION_SECS`] in this unit.
    pub fn max(self) -> u64 {
        match self {
            Self::Secs => MAX_DURATION_SECS,
            Self::Millis => MAX_DURATION_SECS * 1000,
        }
    }
}

/// Refuses a duration `value` (in `unit`) past 30 days, naming `key` and
/// the bound only.
pub fn check_duration(key: &str, value: u64, unit: DurationUnit) -> Result<(), ConfigError> {
    if value <= unit.max() {
        return Ok(());
    }
    let max = unit.max();
    let unit = match unit {
        DurationUnit::Secs => "s",
        DurationUnit::Millis => "ms",
    };
    Err(ConfigError::Invalid(format!(
        "{key} must be at most 30 days ({max} {unit})"
    )))
}

/// The longest route path accepted.
const MAX_PATH_LEN: usize = 256;

/// Refuses a route path that is not a plain absolute path: it must start
/// with `/`, hold only letters, digits and `-._~/`, have no empty, `.` or
/// `..` segment and no trailing `/`. The router's own syntax (`/:id`,
/// `/{id}`, `/*rest`) would otherwise make a pattern of it, or panic the
/// router at start. The error names `key`, never the path.
pub fn check_route_path(key: &str, path: &str) -> Result<(), ConfigError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-._~/".contains(c);
    let segments_ok = path.strip_prefix('/').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .split('/')
                .all(|s| !s.is_empty() && s != "." && s != "..")
    });
    if path.len() <= MAX_PATH_LEN && path.chars().all(plain) && segments_ok {
        return Ok(());
    }
    Err(ConfigError::Invalid(format!(
        "{key} must be a plain absolute path such as /webhooks/journey: `/` then segments of letters, digits and -._~ (no `:`, `{{`, `*`, empty, . or .. segment, at most {MAX_PATH_LEN} bytes)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_past_thirty_days_are_refused_by_key_without_the_value() {
        assert!(check_duration("a.ttl_secs", MAX_DURATION_SECS, DurationUnit::Secs).is_ok());
        assert!(check_duration("a.ttl_secs", 0, DurationUnit::Secs).is_ok());
        let err = check_duration("a.ttl_secs", 98_765_432_109, DurationUnit::Secs)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.ttl_secs") && err.contains("30 days"),
            "{err}"
        );
        assert!(!err.contains("98765432109"), "{err}");
        assert!(check_duration("b_ms", MAX_DURATION_SECS * 1000, DurationUnit::Millis).is_ok());
        assert!(check_duration("b_ms", u64::MAX, DurationUnit::Millis).is_err());
    }

    #[test]
    fn route_paths_must_be_plain_absolute_paths() {
        for ok in ["/webhooks/journey", "/a", "/v1/notice-hook_2.x~y"] {
            assert!(check_route_path("webhook.path", ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "/", "webhooks", "/x/:id", "/x/{id}", "/x/*rest", "/x//y", "/x/", "/x/../y",
            "/./x", "/x?y=1", "/x y", "/ação",
        ] {
            let err = check_route_path("webhook.path", bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("webhook.path"), "{err}");
            assert!(!err.contains("canary"), "{err}");
        }
        assert!(check_route_path("webhook.path", &format!("/{}", "a".repeat(300))).is_err());
    }
}
