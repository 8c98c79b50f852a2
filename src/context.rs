//! The caller's deadline, carried from the gRPC request to every upstream
//! call, channel attempt and watch stream it causes.
//!
//! One type, [`CallContext`], so that the API layer reads `grpc-timeout`
//! once and every layer below caps its own timeouts and retries by the
//! same instant. It uses Tokio's clock, so tests that pause time see
//! deadlines pass with it.

use std::time::Duration;

use tokio::time::Instant;

/// The metadata key of the caller's timeout (gRPC over HTTP/2).
pub const GRPC_TIMEOUT_HEADER: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

/// What the caller allows one operation: the instant by which it wants an
/// answer, if it set one. Retries and each attempt's timeout are capped by
/// it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallContext {
    deadline: Option<Instant>,
}

impl CallContext {
    /// No caller deadline: only the configured timeouts apply.
    pub fn unbounded() -> Self {
        CallContext { deadline: None }
    }

    /// The caller must have an answer by `deadline`.
    pub fn with_deadline(deadline: Instant) -> Self {
        CallContext {
            deadline: Some(deadline),
        }
    }

    /// The caller must have an answer within `timeout` from now.
    pub fn with_timeout(timeout: Duration) -> Self {
        CallContext {
            deadline: Instant::now().checked_add(timeout),
        }
    }

    /// An optional deadline.
    pub fn from_deadline(deadline: Option<Instant>) -> Self {
        CallContext { deadline }
    }

    /// The caller's deadline from the `grpc-timeout` of `metadata`; no
    /// deadline when the header is absent or malformed.
    pub fn from_metadata(metadata: &tonic::metadata::MetadataMap) -> Self {
        Self::from_headers(metadata.as_ref())
    }

    /// The caller's deadline of a gRPC request.
    pub fn of<T>(request: &tonic::Request<T>) -> Self {
        Self::from_metadata(request.metadata())
    }

    /// The caller's deadline from the `grpc-timeout` of raw HTTP/2
    /// headers (for layers below tonic).
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
        let timeout = headers
            .get(&GRPC_TIMEOUT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_grpc_timeout);
        Self::from_deadline(timeout.and_then(|t| Instant::now().checked_add(t)))
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline; `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// True once the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Parses the gRPC `TimeoutValue TimeoutUnit` form (`100m`, `5S`, ...):
/// 1 to 8 ASCII digits, then one unit letter; anything else is no timeout.
pub fn parse_grpc_timeout(raw: &str) -> Option<Duration> {
    if raw.len() < 2 || raw.len() > 9 || !raw.is_ascii() {
        return None;
    }
    let (digits, unit) = raw.split_at(raw.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: &str) -> tonic::metadata::MetadataMap {
        let mut m = tonic::metadata::MetadataMap::new();
        m.insert("grpc-timeout", v.parse().unwrap());
        m
    }

    #[test]
    fn parses_every_unit_and_rejects_junk() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_grpc_timeout("9n"), Some(Duration::from_nanos(9)));
        assert_eq!(parse_grpc_timeout("5x"), None);
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout("123456789S"), None);
        assert_eq!(parse_grpc_timeout("1234567890S"), None);
        assert_eq!(parse_grpc_timeout("+5S"), None);
        assert_eq!(parse_grpc_timeout("-5S"), None);
        assert_eq!(parse_grpc_timeout("5é"), None);
        assert_eq!(parse_grpc_timeout("éé"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_metadata_deadline_is_the_timeout_from_now() {
        let now = Instant::now();
        let ctx = CallContext::from_metadata(&meta("150m"));
        assert_eq!(ctx.deadline(), Some(now + Duration::from_millis(150)));
        assert_eq!(
            CallContext::from_metadata(&tonic::metadata::MetadataMap::new()),
            CallContext::unbounded()
        );
        assert_eq!(CallContext::from_metadata(&meta("+5S")).deadline(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_expires_when_its_instant_passes() {
        let near = Instant::now() + Duration::from_millis(10);
        assert!(!CallContext::with_deadline(near).is_expired());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(CallContext::with_deadline(near).is_expired());
    }
}
