//! `GetChannelFigures`: the router's per-channel figures to their proto
//! form and back (the CLI reads them back to merge replicas).

use std::collections::BTreeMap;

use crate::{
    Error,
    channels::figures::{ChannelFigures, ErrorCounts, LATENCY_BOUNDS_MS, LatencyHistogram},
    proto::v1 as pb,
};

/// Window of a request that names none: one hour.
pub const DEFAULT_WINDOW_SECS: u32 = 3_600;

/// Minutes a request's window covers (rounded up to whole minutes; unset
/// or zero: [`DEFAULT_WINDOW_SECS`]), checked against the router's
/// retention. Refusals name the field `window`.
pub fn window_minutes(
    window: Option<&prost_types::Duration>,
    retention_minutes: u32,
) -> Result<u32, Error> {
    let (secs, nanos) = window.map_or((0, 0), |w| (w.seconds, w.nanos));
    if secs < 0 || !(0..1_000_000_000).contains(&nanos) {
        return Err(Error::invalid("window", "must be a positive duration"));
    }
    // Non-negative, checked above.
    let secs = secs.unsigned_abs();
    let secs = match (secs, nanos) {
        (0, 0) => u64::from(DEFAULT_WINDOW_SECS),
        (s, n) => s.saturating_add(u64::from(n > 0)),
    };
    let minutes = secs.div_ceil(60);
    if minutes > u64::from(retention_minutes) {
        return Err(Error::invalid(
            "window",
            format!(
                "at most {} seconds: the gateway keeps {retention_minutes} minutes of figures",
                u64::from(retention_minutes) * 60
            ),
        ));
    }
    // At most `retention_minutes`, so it fits.
    Ok(u32::try_from(minutes).unwrap_or(retention_minutes))
}

/// A whole number of seconds as a proto duration.
pub fn seconds(secs: u32) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::from(secs),
        nanos: 0,
    }
}

fn errors_to_proto(e: &ErrorCounts) -> Vec<pb::ErrorCount> {
    e.classes()
        .map(|(class, count)| pb::ErrorCount {
            class: class.to_owned(),
            count,
        })
        .collect()
}

fn errors_from_proto(e: &[pb::ErrorCount]) -> ErrorCounts {
    let mut counts = ErrorCounts::default();
    for c in e {
        counts.add(&c.class, c.count);
    }
    counts
}

/// The proto form of one channel's figures.
pub fn figures_to_proto(name: &str, t: &ChannelFigures) -> pb::ChannelFigures {
    pb::ChannelFigures {
        name: name.to_owned(),
        sessions_started: t.sessions_started,
        contingency_answers: t.contingency_answers,
        session_errors: errors_to_proto(&t.session_errors),
        verifications_valid: t.valid,
        verifications_invalid: t.invalid,
        verifications_blocked: t.blocked,
        verifications_other: t.other,
        verification_errors: errors_to_proto(&t.verification_errors),
        session_latency: t.session_latency.counts().to_vec(),
        liveness_latency: t.liveness_latency.counts().to_vec(),
    }
}

/// Why a `GetChannelFigures` answer cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FiguresError {
    /// The gateway buckets latency differently (another release).
    #[error("the gateway's latency buckets differ from this client's; use the same release")]
    Buckets,
}

/// Reads a `GetChannelFigures` answer back into figures by channel name.
pub fn figures_from_proto(
    resp: &pb::GetChannelFiguresResponse,
) -> Result<BTreeMap<String, ChannelFigures>, FiguresError> {
    if resp.latency_bounds_ms != LATENCY_BOUNDS_MS {
        return Err(FiguresError::Buckets);
    }
    let histogram = |counts: &[u64]| {
        if counts.is_empty() {
            return Ok(LatencyHistogram::default());
        }
        LatencyHistogram::from_counts(counts).ok_or(FiguresError::Buckets)
    };
    let mut out = BTreeMap::new();
    for c in &resp.channels {
        let figures = ChannelFigures {
            sessions_started: c.sessions_started,
            contingency_answers: c.contingency_answers,
            session_errors: errors_from_proto(&c.session_errors),
            valid: c.verifications_valid,
            invalid: c.verifications_invalid,
            blocked: c.verifications_blocked,
            other: c.verifications_other,
            verification_errors: errors_from_proto(&c.verification_errors),
            session_latency: histogram(&c.session_latency)?,
            liveness_latency: histogram(&c.liveness_latency)?,
        };
        out.entry(c.name.clone())
            .or_insert_with(ChannelFigures::default)
            .merge(&figures);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn figures_survive_the_round_trip_through_proto() {
        let mut t = ChannelFigures {
            sessions_started: 3,
            contingency_answers: 1,
            valid: 2,
            invalid: 1,
            ..ChannelFigures::default()
        };
        t.verification_errors.add("timeout", 4);
        t.liveness_latency.observe(Duration::from_millis(30));
        let resp = pb::GetChannelFiguresResponse {
            window: Some(seconds(60)),
            latency_bounds_ms: LATENCY_BOUNDS_MS.to_vec(),
            channels: vec![figures_to_proto("alt", &t)],
            scope: pb::FiguresScope::Replica as i32,
        };
        assert_eq!(figures_from_proto(&resp).unwrap()["alt"], t);
        let other = pb::GetChannelFiguresResponse {
            latency_bounds_ms: vec![1, 2],
            ..resp
        };
        assert_eq!(figures_from_proto(&other), Err(FiguresError::Buckets));
    }

    #[test]
    fn windows_default_to_an_hour_and_stay_within_the_retention() {
        let w = |s: i64, n: i32| {
            window_minutes(
                Some(&prost_types::Duration {
                    seconds: s,
                    nanos: n,
                }),
                1_440,
            )
        };
        assert_eq!(window_minutes(None, 1_440).unwrap(), 60);
        assert_eq!(w(0, 0).unwrap(), 60);
        assert_eq!(w(61, 0).unwrap(), 2);
        assert_eq!(w(60, 1).unwrap(), 2);
        assert!(w(86_400, 0).is_ok());
        for (s, n) in [
            (86_401, 0),
            (-1, 0),
            (0, -1),
            (1, 1_000_000_000),
            (i64::MAX, 0),
        ] {
            assert!(w(s, n).is_err(), "{s} {n}");
        }
    }
}
