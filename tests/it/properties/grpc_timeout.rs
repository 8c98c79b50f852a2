//! The `grpc-timeout` header: any text is the gRPC spec's value or no
//! timeout at all, never a panic, and a call's deadline follows it.

use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use idgate::context::{CallContext, parse_grpc_timeout};
use proptest::prelude::*;

use super::{any_text, cases};

/// What the gRPC spec defines: 1 to 8 digits and a unit.
fn spec_timeout(raw: &str) -> Option<Duration> {
    let (last, _) = raw.char_indices().last()?;
    let (digits, unit) = raw.split_at(last);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

proptest! {
    #![proptest_config(cases(5000))]

    /// Any header text: the spec's value or no timeout, never a panic; a
    /// deadline from any header value that parses.
    #[test]
    fn grpc_timeout_is_the_spec_value_or_none(
        raw in prop_oneof![
            any_text(12),
            "[+-]?[0-9]{0,10}[HMSmunx]?",
            "[0-9]{1,8}[HMSmun]",
        ],
    ) {
        prop_assert_eq!(parse_grpc_timeout(&raw), spec_timeout(&raw));
        if let Ok(v) = HeaderValue::from_str(&raw) {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v);
            let ctx = CallContext::from_headers(&h);
            prop_assert_eq!(ctx.deadline().is_some(), spec_timeout(&raw).is_some());
        }
    }
}
