//! The charge-back report: by caller and UTC day, journeys created,
//! vendor calls billed per operation and calls refused per reason.
//!
//! ```text
//! telemetry::usage (the counting point: metrics + a ledger)
//!   --drain every FLUSH_INTERVAL, and before each report--> cluster::UsageStore
//!        memory: one process (counts live as long as it does)
//!        Redis:  the fleet's (every replica adds its counts)
//!   <--read-- UsageBook::report <-- GetUsage (admin) <-- `idgate usage`
//! ```
//!
//! The report is read from the same counts the metrics are incremented
//! with, at the same point, so for the same calls `idgate_caller_journeys`,
//! `idgate_caller_billed` and `idgate_caller_calls{outcome!="ok"}` summed
//! over the replicas equal the report's columns. On a single replica the
//! report lives in memory today; the embedded crash-safe store, once it
//! exists, is a third [`UsageStore`] tier and nothing here changes.
//! `[usage] retention_days` (default 93: the month invoiced, the one
//! before it, and time to settle disputes) bounds what is kept.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use serde::Deserialize;
use time::{Date, Month};
use tokio::sync::watch;

use crate::{
    Error,
    cluster::{ClusterError, UsageStore},
    config_source::ConfigError,
    telemetry::usage::{BILLED, REFUSED, Usage, UsageCount, today},
};

/// How often a replica hands its counts to the store.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// `[usage]`: how long the report's counts are kept.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct UsageConfig {
    /// Days of counts kept (today included), at least 1, at most 3660.
    pub retention_days: u32,
}

impl Default for UsageConfig {
    fn default() -> Self {
        Self { retention_days: 93 }
    }
}

impl UsageConfig {
    /// The retention, as the stores take it.
    pub fn retention(&self) -> Duration {
        Duration::from_secs(u64::from(self.retention_days) * 86_400)
    }

    /// `retention_days` within its bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.retention_days {
            1..=3660 => Ok(()),
            _ => Err(ConfigError::Invalid(
                "usage.retention_days must be between 1 and 3660".to_owned(),
            )),
        }
    }
}

/// One caller's usage on one day.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DayUsage {
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// The caller's configured name (`anonymous`: a gateway without
    /// `[auth]`).
    pub caller: String,
    /// Journeys created.
    pub journeys_created: u64,
    /// Vendor calls let through by spend, by billed
    /// operation.
    pub billed_calls: BTreeMap<String, u64>,
    /// Calls that did not end `ok`, by reason (an `ErrorInfo` reason, a
    /// gRPC code name, or `cancelled`).
    pub refusals: BTreeMap<String, u64>,
}

/// The report of a range of days.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageReport {
    /// True when the counts are the fleet's (Redis), false for this
    /// replica's alone.
    pub fleet: bool,
    /// `[usage] retention_days`: days before it are no longer kept.
    pub retention_days: u32,
    /// By day, then caller.
    pub days: Vec<DayUsage>,
}

/// The report's counts: the ledger of [`Usage`] drained into a store.
pub struct UsageBook {
    usage: Usage,
    store: Arc<dyn UsageStore>,
    retention_days: u32,
}

impl std::fmt::Debug for UsageBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageBook")
            .field("fleet", &self.store.fleet())
            .field("retention_days", &self.retention_days)
            .finish_non_exhaustive()
    }
}

/// Days since the Unix epoch of `date`.
pub fn day_number(date: Date) -> i64 {
    let epoch = Date::from_calendar_date(1970, Month::January, 1).unwrap_or(Date::MIN);
    (date - epoch).whole_days()
}

/// The date of `day` (days since the Unix epoch), `YYYY-MM-DD`.
pub fn day_text(day: i64) -> String {
    let epoch = Date::from_calendar_date(1970, Month::January, 1).unwrap_or(Date::MIN);
    let date = i32::try_from(day)
        .ok()
        .and_then(|d| epoch.checked_add(time::Duration::days(i64::from(d))))
        .unwrap_or(epoch);
    let (y, m, d) = (date.year(), u8::from(date.month()), date.day());
    format!("{y:04}-{m:02}-{d:02}")
}

/// A `YYYY-MM-DD` date; `field` names it in the error.
pub fn parse_date(text: &str, field: &str) -> Result<Date, Error> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(text, format).map_err(|_| Error::invalid(field, "must be a date, YYYY-MM-DD"))
}

impl UsageBook {
    /// The counts of `usage` kept in `store` for `config.retention_days`.
    pub fn new(usage: Usage, store: Arc<dyn UsageStore>, config: &UsageConfig) -> Self {
        Self {
            usage,
            store,
            retention_days: config.retention_days,
        }
    }

    /// Hands the counts not yet stored to the store; on a failure they
    /// are kept for the next time.
    pub async fn flush(&self) -> Result<(), ClusterError> {
        let counts = self.usage.drain();
        if counts.is_empty() {
            return Ok(());
        }
        match self.store.add(counts.clone()).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.usage.restore(counts);
                Err(e)
            }
        }
    }

    /// Flushes every [`FLUSH_INTERVAL`] until `stopped`, then once more.
    pub async fn run(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopped.wait_for(|s| *s) => break,
            }
            // Kept on failure: Redis down is counted by the cluster's
            // own metrics, and the counts go once it answers.
            let _ = self.flush().await;
        }
        let _ = self.flush().await;
    }

    /// The report of days `first..=last` (UTC), of `caller` alone when
    /// named: this replica's counts flushed first, so that a report on
    /// one replica includes its last call.
    pub async fn report(
        &self,
        first: Date,
        last: Date,
        caller: Option<&str>,
    ) -> Result<UsageReport, Error> {
        if last < first {
            return Err(Error::invalid("last_day", "must not be before first_day"));
        }
        let oldest = today() - i64::from(self.retention_days) + 1;
        let (first, last) = (day_number(first).max(oldest), day_number(last).min(today()));
        let fleet = self.store.fleet();
        let unavailable = |_| Error::ClusterUnavailable;
        self.flush().await.map_err(unavailable)?;
        let counts = match first <= last {
            true => self.store.read(first, last).await.map_err(unavailable)?,
            false => Vec::new(),
        };
        Ok(UsageReport {
            fleet,
            retention_days: self.retention_days,
            days: rows(counts, caller),
        })
    }
}

/// The counts as rows by day, then caller.
fn rows(counts: Vec<UsageCount>, caller: Option<&str>) -> Vec<DayUsage> {
    let mut rows: BTreeMap<(i64, String), DayUsage> = BTreeMap::new();
    for c in counts {
        if caller.is_some_and(|name| name != c.caller) {
            continue;
        }
        let row = rows
            .entry((c.day, c.caller.clone()))
            .or_insert_with(|| DayUsage {
                day: day_text(c.day),
                caller: c.caller.clone(),
                ..DayUsage::default()
            });
        if c.item == "journeys" {
            row.journeys_created += c.count;
        } else if let Some(op) = c.item.strip_prefix(BILLED) {
            *row.billed_calls.entry(op.to_owned()).or_default() += c.count;
        } else if let Some(reason) = c.item.strip_prefix(REFUSED) {
            *row.refusals.entry(reason.to_owned()).or_default() += c.count;
        }
    }
    rows.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cluster::MemoryUsage, telemetry::Metrics};

    #[test]
    fn days_and_dates_round_trip() {
        let date = parse_date("2024-02-29", "first_day").unwrap();
        assert_eq!(day_text(day_number(date)), "2024-02-29");
        assert_eq!(day_text(0), "1970-01-01");
        assert!(parse_date("2024-13-01", "first_day").is_err());
        assert!(parse_date("yesterday", "first_day").is_err());
    }

    #[tokio::test]
    async fn a_report_gives_the_counts_of_the_ledger_by_day_and_caller() {
        let usage = Usage::new(Metrics::default());
        let book = UsageBook::new(
            usage.clone(),
            Arc::new(MemoryUsage::new(Duration::from_secs(86_400 * 93))),
            &UsageConfig::default(),
        );
        let a = usage.caller("onboarding");
        let b = usage.caller("backoffice");
        for _ in 0..3 {
            a.journey_created();
            a.billed("default", "create_journey");
        }
        b.billed("default", "start_session_3d");
        b.call("session_3d", "BUDGET_EXCEEDED");
        b.call("session_3d", "ok");
        let day = today();
        let date = parse_date(&day_text(day), "d").unwrap();
        let report = book.report(date, date, None).await.unwrap();
        assert!(!report.fleet);
        let names: Vec<&str> = report.days.iter().map(|d| d.caller.as_str()).collect();
        assert_eq!(names, ["backoffice", "onboarding"]);
        let onboarding = &report.days[1];
        assert_eq!(onboarding.journeys_created, 3);
        assert_eq!(onboarding.billed_calls["create_journey"], 3);
        let backoffice = &report.days[0];
        assert_eq!(backoffice.billed_calls["start_session_3d"], 1);
        assert_eq!(backoffice.refusals["BUDGET_EXCEEDED"], 1);
        assert_eq!(
            backoffice.refusals.len(),
            1,
            "calls that ended ok are not refusals"
        );
        let only = book.report(date, date, Some("onboarding")).await.unwrap();
        assert_eq!(only.days, vec![onboarding.clone()]);
        let err = book
            .report(date, date.previous_day().unwrap(), None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
}
