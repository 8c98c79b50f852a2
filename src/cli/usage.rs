//! `idgate usage`: the charge-back report of a running gateway
//! (`GetUsage` on its admin listener), by caller and UTC day, as a table
//! or JSON.

use std::fmt::Write as _;

use super::channels::{AdminTarget, CliError, connect, explain};
use crate::{
    domain::AdminToken,
    proto::v1 as pb,
    usage::{DayUsage, UsageReport, parse_date},
};

/// What `idgate usage` asks for.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    /// The first UTC day, `YYYY-MM-DD`.
    pub from: String,
    /// The last UTC day, `YYYY-MM-DD`.
    pub to: String,
    /// One caller alone.
    pub caller: Option<String>,
}

/// `idgate usage --from DATE --to DATE [--caller NAME] [--json]`.
pub async fn usage(
    admin: impl Into<AdminTarget>,
    token: &AdminToken,
    query: &UsageQuery,
    json: bool,
) -> Result<String, CliError> {
    for (flag, text) in [("--from", &query.from), ("--to", &query.to)] {
        parse_date(text, flag).map_err(|_| CliError::Argument {
            flag,
            why: "must be a date, YYYY-MM-DD".to_owned(),
        })?;
    }
    let mut client = connect(admin, token).await?;
    let resp = client
        .get_usage(pb::GetUsageRequest {
            first_day: query.from.clone(),
            last_day: query.to.clone(),
            caller: query.caller.clone().unwrap_or_default(),
        })
        .await
        .map_err(explain)?
        .into_inner();
    let report = report_of(resp);
    match json {
        true => Ok(format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        )),
        false => Ok(format_report(&report)),
    }
}

/// The proto's report, its maps ordered.
pub fn report_of(resp: pb::GetUsageResponse) -> UsageReport {
    UsageReport {
        fleet: resp.fleet,
        retention_days: resp.retention_days,
        days: resp
            .days
            .into_iter()
            .map(|d| DayUsage {
                day: d.day,
                caller: d.caller,
                journeys_created: d.journeys_created,
                billed_calls: d.billed_calls.into_iter().collect(),
                refusals: d.refusals.into_iter().collect(),
            })
            .collect(),
    }
}

fn pairs(map: &std::collections::BTreeMap<String, u64>) -> String {
    match map.is_empty() {
        true => "-".to_owned(),
        false => map
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// The text of `idgate usage`: a row per caller and day.
pub fn format_report(report: &UsageReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "usage by caller and UTC day ({}; kept {} days)",
        match report.fleet {
            true => "the whole fleet's",
            false => "this replica's alone",
        },
        report.retention_days
    );
    let _ = writeln!(
        out,
        "{:<10}  {:<24}  {:>8}  {:<48}  REFUSALS",
        "DAY", "CALLER", "JOURNEYS", "BILLED"
    );
    for d in &report.days {
        let _ = writeln!(
            out,
            "{:<10}  {:<24}  {:>8}  {:<48}  {}",
            d.day,
            d.caller,
            d.journeys_created,
            pairs(&d.billed_calls),
            pairs(&d.refusals)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_caller_and_day_with_its_counts() {
        let report = report_of(pb::GetUsageResponse {
            days: vec![pb::CallerDayUsage {
                day: "2024-05-01".into(),
                caller: "onboarding".into(),
                journeys_created: 3,
                billed_calls: [("create_journey".to_owned(), 3)].into_iter().collect(),
                refusals: Default::default(),
            }],
            fleet: true,
            retention_days: 93,
        });
        let text = format_report(&report);
        assert!(text.contains("the whole fleet's; kept 93 days"), "{text}");
        let row = text.lines().find(|l| l.starts_with("2024-05-01")).unwrap();
        for want in ["onboarding", " 3 ", "create_journey=3", "  -"] {
            assert!(row.contains(want), "{want} in {row}");
        }
    }
}
