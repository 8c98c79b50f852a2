//! Usage by caller: the one point where a caller's calls, billed vendor
//! calls and created journeys are counted, for the metrics and for the
//! charge-back report alike, so the two never disagree.
//!
//! ```text
//! AuditRecord (every public call, written once) --call(operation, outcome)--.
//! Spend::bill (a vendor call let through) --------billed(profile, operation)-+--> CallerUsage
//! Journeys::create (a journey recorded) ---------journey_created()----------'     |-> CallerMeter (metrics/callers)
//!                                                                                 `-> Ledger (day, caller, item) += 1
//! Ledger --drain, every second (crate::usage)--> UsageStore (memory | Redis)
//! ```
//!
//! The ledger holds what the report needs and nothing more: journeys,
//! billed calls per operation, and calls that did not end `ok`, per
//! reason, by UTC day and caller name. Calls that ended `ok` are only a
//! metric (the report does not bill them), so an ordinary call touches
//! the ledger not at all. No journey reference, appkey, CPF, subject or
//! token reaches either: the keys are configured names and fixed words.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use super::metrics::{CallerMeter, ChannelLabel, Metrics};

/// What one count of the report is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UsageItem {
    /// A journey created.
    Journeys,
    /// A vendor call of this billed operation let through.
    Billed(&'static str),
    /// A call that ended with this outcome (a reason, a gRPC code name,
    /// `cancelled`), anything but `ok`.
    Refused(&'static str),
}

impl UsageItem {
    /// The item as stored: `journeys`, `billed.<operation>`,
    /// `refused.<reason>`.
    pub fn key(&self) -> String {
        match self {
            UsageItem::Journeys => "journeys".to_owned(),
            UsageItem::Billed(op) => format!("{BILLED}{op}"),
            UsageItem::Refused(reason) => format!("{REFUSED}{reason}"),
        }
    }
}

/// The prefix of a billed operation's item key.
pub const BILLED: &str = "billed.";
/// The prefix of a refusal reason's item key.
pub const REFUSED: &str = "refused.";

/// One count of the report: `count` of `item` by `caller` on `day`
/// (days since the Unix epoch, UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageCount {
    /// Days since 1970-01-01, UTC.
    pub day: i64,
    /// The caller's configured name.
    pub caller: String,
    /// [`UsageItem::key`].
    pub item: String,
    /// How many.
    pub count: u64,
}

/// Today, in days since the Unix epoch (UTC).
pub fn today() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(secs / 86_400).unwrap_or(i64::MAX)
}

type LedgerKey = (i64, ChannelLabel, UsageItem);

/// Counts not yet handed to the report's store.
#[derive(Debug, Default)]
struct Ledger {
    pending: Mutex<HashMap<LedgerKey, u64, foldhash::fast::RandomState>>,
    /// Counts a store did not take, by (day, caller, item key).
    returned: Mutex<HashMap<(i64, String, String), u64>>,
}

impl Ledger {
    fn add(&self, caller: &ChannelLabel, item: UsageItem) {
        let key = (today(), caller.clone(), item);
        *crate::sync::lock(&self.pending).entry(key).or_default() += 1;
    }
}

/// The counting point of usage by caller. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Usage {
    metrics: Metrics,
    /// `None`: metrics only (nothing drains a ledger: unit tests, parts
    /// built without the report).
    ledger: Option<Arc<Ledger>>,
}

impl Default for Usage {
    fn default() -> Self {
        Self::metrics_only(Metrics::default())
    }
}

impl Usage {
    /// Counts in `metrics` and in a ledger for the report, which
    /// [`Usage::drain`] empties.
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics,
            ledger: Some(Arc::default()),
        }
    }

    /// Counts in `metrics` only.
    pub fn metrics_only(metrics: Metrics) -> Self {
        Self {
            metrics,
            ledger: None,
        }
    }

    /// The metrics it counts in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The counting point of the caller named `name` (resolved once per
    /// name, see `metrics::callers`).
    pub fn caller(&self, name: &str) -> CallerUsage {
        CallerUsage {
            meter: self.metrics.caller(name),
            ledger: self.ledger.clone(),
        }
    }

    /// Takes every count not yet drained.
    pub fn drain(&self) -> Vec<UsageCount> {
        let Some(ledger) = &self.ledger else {
            return Vec::new();
        };
        let pending = std::mem::take(&mut *crate::sync::lock(&ledger.pending));
        let mut counts = std::mem::take(&mut *crate::sync::lock(&ledger.returned));
        for ((day, caller, item), count) in pending {
            *counts
                .entry((day, caller.as_str().to_owned(), item.key()))
                .or_default() += count;
        }
        counts
            .into_iter()
            .map(|((day, caller, item), count)| UsageCount {
                day,
                caller,
                item,
                count,
            })
            .collect()
    }

    /// Puts back counts a store did not take, to be drained again.
    pub fn restore(&self, counts: Vec<UsageCount>) {
        let Some(ledger) = &self.ledger else {
            return;
        };
        let mut returned = crate::sync::lock(&ledger.returned);
        for c in counts {
            *returned.entry((c.day, c.caller, c.item)).or_default() += c.count;
        }
    }
}

/// One caller's counting point (see the module doc). Cheap to clone.
#[derive(Debug, Clone)]
pub struct CallerUsage {
    meter: CallerMeter,
    ledger: Option<Arc<Ledger>>,
}

impl CallerUsage {
    /// One call of `operation` ended with `outcome`.
    pub fn call(&self, operation: &'static str, outcome: &'static str) {
        self.meter.call(operation, outcome);
        if outcome != "ok"
            && let Some(ledger) = &self.ledger
        {
            ledger.add(&self.meter.label(), UsageItem::Refused(outcome));
        }
    }

    /// One vendor call of `operation` let through, billed to `operator`.
    pub fn billed(&self, operator: &str, operation: &'static str) {
        self.meter.billed(operator, operation);
        if let Some(ledger) = &self.ledger {
            ledger.add(&self.meter.label(), UsageItem::Billed(operation));
        }
    }

    /// One journey created.
    pub fn journey_created(&self) {
        self.meter.journey_created();
        if let Some(ledger) = &self.ledger {
            ledger.add(&self.meter.label(), UsageItem::Journeys);
        }
    }

    /// The caller's series.
    pub fn meter(&self) -> &CallerMeter {
        &self.meter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_keeps_what_the_report_bills_and_not_the_calls_that_ended_ok() {
        let usage = Usage::new(Metrics::default());
        let a = usage.caller("a");
        a.call("create_journey", "ok");
        a.call("create_journey", "BUDGET_EXCEEDED");
        a.billed("default", "create_journey");
        a.journey_created();
        a.journey_created();
        let mut drained = usage.drain();
        drained.sort_by(|x, y| x.item.cmp(&y.item));
        let items: Vec<(&str, u64)> = drained.iter().map(|c| (c.item.as_str(), c.count)).collect();
        assert_eq!(
            items,
            vec![
                ("billed.create_journey", 1),
                ("journeys", 2),
                ("refused.BUDGET_EXCEEDED", 1)
            ]
        );
        assert!(drained.iter().all(|c| c.caller == "a" && c.day == today()));
        assert!(usage.drain().is_empty(), "drained once");
        usage.restore(drained.clone());
        let mut again = usage.drain();
        again.sort_by(|x, y| x.item.cmp(&y.item));
        assert_eq!(again, drained, "what a store did not take is drained again");
    }

    #[test]
    fn metrics_only_usage_keeps_no_ledger() {
        let usage = Usage::metrics_only(Metrics::default());
        usage.caller("a").journey_created();
        assert!(usage.drain().is_empty());
    }
}
