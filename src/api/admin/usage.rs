//! `GetUsage`: the charge-back report ([`crate::usage`]) between the
//! proto and the book.

use super::call::{At, Refusal};
use crate::{
    proto::v1 as pb,
    usage::{UsageBook, UsageReport, parse_date},
};

/// Answers `req` from `book`.
pub(super) async fn get_usage(
    book: &UsageBook,
    req: &pb::GetUsageRequest,
) -> Result<pb::GetUsageResponse, Refusal> {
    let first = parse_date(&req.first_day, "first_day").at("first_day")?;
    let last = parse_date(&req.last_day, "last_day").at("last_day")?;
    let caller = (!req.caller.is_empty()).then_some(req.caller.as_str());
    let report = book.report(first, last, caller).await?;
    Ok(report_to_proto(report))
}

/// The report as the proto carries it.
pub fn report_to_proto(report: UsageReport) -> pb::GetUsageResponse {
    pb::GetUsageResponse {
        days: report
            .days
            .into_iter()
            .map(|d| pb::CallerDayUsage {
                day: d.day,
                caller: d.caller,
                journeys_created: d.journeys_created,
                billed_calls: d.billed_calls.into_iter().collect(),
                refusals: d.refusals.into_iter().collect(),
            })
            .collect(),
        fleet: report.fleet,
        retention_days: report.retention_days,
    }
}
