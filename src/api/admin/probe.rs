//! The proto form of a probe report (`ProbeChannel`).

use crate::{
    channels::probe::{ProbeReport, contract::ProbeCheck},
    proto::v1 as pb,
};

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
