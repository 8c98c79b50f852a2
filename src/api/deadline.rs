//! The caller's deadline, from the `grpc-timeout` header, so upstream calls
//! and retries never outlive the caller's patience.

use std::time::Duration;

use tokio::time::Instant;

use crate::upstream::CallContext;

/// The instant by which the caller wants an answer, if it set one.
pub fn of<T>(req: &tonic::Request<T>) -> Option<Instant> {
    let raw = req.metadata().get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(raw).map(|d| Instant::now() + d)
}

/// The caller's deadline as the REST client's call context.
pub fn context<T>(req: &tonic::Request<T>) -> CallContext {
    CallContext::from_deadline(of(req).map(Instant::into_std))
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
        assert_eq!(parse_grpc_timeout("1234567890S"), None);
        assert_eq!(parse_grpc_timeout("+5S"), None);
        assert_eq!(parse_grpc_timeout("-5S"), None);
        assert_eq!(parse_grpc_timeout("5é"), None);
        assert_eq!(parse_grpc_timeout("éé"), None);
    }
}
