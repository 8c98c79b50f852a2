//! The proto form of a probe report (`ProbeChannel`), and which channels
//! a routing mode gives weight to (refused to a channel that failed its
//! last probe).

use crate::{
    channels::{
        ChannelRouter, RoutingMode,
        probe::{ProbeReport, contract::ProbeCheck},
    },
    proto::v1 as pb,
};

/// The channels a mode gives new sessions to, by name: those of a
/// weighted split with weight, the named or forced one. `auto` gives none
/// by name (it routes by priority and health).
pub(super) fn weighted_channels(mode: &RoutingMode, router: &ChannelRouter) -> Vec<String> {
    let by_priority = || router.snapshot().channels.into_iter().map(|c| c.name);
    match mode {
        RoutingMode::Auto => Vec::new(),
        RoutingMode::ForcePrimary => by_priority().take(1).collect(),
        RoutingMode::ForceAlternative => by_priority().skip(1).take(1).collect(),
        RoutingMode::Channel(name) => vec![name.clone()],
        RoutingMode::Weighted(split) => split
            .entries()
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|(n, _)| n.clone())
            .collect(),
    }
}

fn check_to_proto(c: &ProbeCheck) -> pb::ProbeCheck {
    pb::ProbeCheck {
        name: c.name.to_owned(),
        passed: c.passed(),
        http_status: c.http_status.map_or(0, u32::from),
        elapsed: Some(prost_types::Duration {
            seconds: i64::try_from(c.elapsed.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(c.elapsed.subsec_nanos()).unwrap_or(0),
        }),
        fields: c
            .fields
            .iter()
            .map(|f| pb::FieldCheck {
                field: f.field.to_owned(),
                expected: f.expected.to_owned(),
                found: f.found.to_owned(),
                passed: f.passed,
            })
            .collect(),
        problem: c.problem.clone().unwrap_or_default(),
    }
}

/// The proto form of the probe of `name`.
pub fn probe_to_proto(name: &str, report: &ProbeReport) -> pb::ProbeChannelResponse {
    pb::ProbeChannelResponse {
        name: name.to_owned(),
        conforming: report.conforming(),
        checks: report.checks.iter().map(check_to_proto).collect(),
    }
}
