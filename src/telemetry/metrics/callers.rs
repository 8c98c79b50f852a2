//! Series by configured caller: calls by operation and outcome, vendor
//! calls billed by operator profile and operation, journeys created, the
//! caller's own budget windows and its use of its shares.
//!
//! The `caller` label is the caller's configured name (`[[callers]]
//! name`, or `anonymous` for the open caller of a gateway without
//! `[auth]`): configuration, bounded by the caller table. An identity no
//! entry names is refused before it is a caller, so it is never a label.
//! Reloads that rename callers add names; past [`MAX_CALLER_LABELS`]
//! names a caller is labelled [`OVERFLOW`](super::labels::OVERFLOW).
//! Cardinality: callers × operations (nine audit names) × outcomes seen
//! (`ok`, `cancelled`, and the reasons and gRPC code names actually
//! answered).
//!
//! A caller's series are resolved once: [`Metrics::caller`] finds its
//! [`CallerMeter`] (a read lock and a hash of the name), which holds the
//! caller's label and its series by (operation, outcome) and by (profile,
//! operation); a call then costs a read lock on the caller's own small
//! map and an atomic add. Nothing is formatted or allocated per call
//! after the first of each label set.

use std::{collections::HashMap, sync::RwLock};

use super::*;
use crate::sync::{read, write};

/// A configured name as a label value: the shared string of
/// [`ChannelLabel`], cloned by a reference count.
type CallerLabel = ChannelLabel;

/// Most distinct caller names one registry labels (callers are
/// configuration; a table holds far fewer).
const MAX_CALLER_LABELS: usize = 1024;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CallLabels {
    caller: CallerLabel,
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BilledLabels {
    caller: CallerLabel,
    operator: CallerLabel,
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CallerOnly {
    caller: CallerLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CallerBudgetLabels {
    caller: CallerLabel,
    operator: CallerLabel,
    operation: &'static str,
    window: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShareLabels {
    caller: CallerLabel,
    share: &'static str,
}

/// The families by caller, registered once.
#[derive(Clone)]
pub(super) struct CallerSeries {
    calls: Family<CallLabels, Counter>,
    billed: Family<BilledLabels, Counter>,
    journeys: Family<CallerOnly, Counter>,
    budget_used: Family<CallerBudgetLabels, Gauge>,
    budget_remaining: Family<CallerBudgetLabels, Gauge>,
    share_used: Family<ShareLabels, Gauge>,
    share_limit: Family<ShareLabels, Gauge>,
}

impl CallerSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            calls: Family::default(),
            billed: Family::default(),
            journeys: Family::default(),
            budget_used: Family::default(),
            budget_remaining: Family::default(),
            share_used: Family::default(),
            share_limit: Family::default(),
        };
        registry.register(
            "idgate_caller_calls",
            "Public calls by configured caller, operation (the audit record's: create_journey, challenges_2d, session_3d, verify_3d, documents, read_result, watch, reflection) and outcome (ok, cancelled, or the ErrorInfo reason or gRPC code the caller was answered)",
            series.calls.clone(),
        );
        registry.register(
            "idgate_caller_billed",
            "Vendor calls spend let through (billed, whatever their outcome upstream), by configured caller, operator profile and billed operation (create_journey, start_session_3d, submit_documents)",
            series.billed.clone(),
        );
        registry.register(
            "idgate_caller_journeys",
            "Journeys created by configured caller (replays of a request_id not counted)",
            series.journeys.clone(),
        );
        registry.register(
            "idgate_caller_budget_used",
            "Calls counted in a caller's own budget window ([[budgets]] caller), per caller, operator profile, billed operation and window (minute, day), as of this replica's last billed call of that caller",
            series.budget_used.clone(),
        );
        registry.register(
            "idgate_caller_budget_remaining",
            "Calls left in a caller's own budget window, per caller, operator profile, billed operation and window, as of this replica's last billed call of that caller",
            series.budget_remaining.clone(),
        );
        registry.register(
            "idgate_caller_share_used",
            "A caller's use of its shares at scrape time: body_bytes, the request bytes this replica is receiving for it ([[callers]] max_body_bytes)",
            series.share_used.clone(),
        );
        registry.register(
            "idgate_caller_share_limit",
            "A caller's shares: body_bytes ([[callers]] max_body_bytes) and journeys ([[callers]] max_journeys); absent when the caller has none (the open caller)",
            series.share_limit.clone(),
        );
        series
    }
}

/// One caller's series, resolved once per caller name (see the module
/// doc). Cheap to clone.
#[derive(Clone)]
pub struct CallerMeter {
    inner: Arc<MeterInner>,
}

/// Billed counters by operator profile, then operation (a short list).
type BilledByProfile = HashMap<Box<str>, Vec<(&'static str, Counter)>, foldhash::fast::RandomState>;

struct MeterInner {
    label: CallerLabel,
    series: CallerSeries,
    journeys: Counter,
    calls: Handles<(&'static str, &'static str), Counter>,
    billed: RwLock<BilledByProfile>,
}

impl fmt::Debug for CallerMeter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CallerMeter")
            .field(&self.inner.label.as_str())
            .finish()
    }
}

impl CallerMeter {
    fn new(label: CallerLabel, series: &CallerSeries) -> Self {
        let journeys = series
            .journeys
            .get_or_create(&CallerOnly {
                caller: label.clone(),
            })
            .clone();
        Self {
            inner: Arc::new(MeterInner {
                label,
                series: series.clone(),
                journeys,
                calls: Handles::default(),
                billed: RwLock::default(),
            }),
        }
    }

    /// The caller's name as labelled (`_OTHER` past the cap).
    pub fn name(&self) -> &str {
        self.inner.label.as_str()
    }

    /// The label, shared (for the usage ledger's keys).
    pub fn label(&self) -> ChannelLabel {
        self.inner.label.clone()
    }

    /// Counts one call of `operation` that ended with `outcome` (fixed
    /// sets: audit operation names; `ok`, `cancelled`, reasons, gRPC code
    /// names).
    pub fn call(&self, operation: &'static str, outcome: &'static str) {
        let inner = &self.inner;
        inner
            .calls
            .get(&(operation, outcome), |(operation, outcome)| {
                inner
                    .series
                    .calls
                    .get_or_create(&CallLabels {
                        caller: inner.label.clone(),
                        operation,
                        outcome,
                    })
                    .clone()
            })
            .inc();
    }

    /// Counts one vendor call of `operation` billed to `operator` (a
    /// configured profile, or empty when the profiles are not known here).
    pub fn billed(&self, operator: &str, operation: &'static str) {
        let inner = &self.inner;
        let known = read(&inner.billed)
            .get(operator)
            .and_then(|ops| ops.iter().find(|(op, _)| *op == operation))
            .map(|(_, counter)| counter.clone());
        let counter = known.unwrap_or_else(|| {
            let counter = inner
                .series
                .billed
                .get_or_create(&BilledLabels {
                    caller: inner.label.clone(),
                    operator: ChannelLabel::new(operator),
                    operation,
                })
                .clone();
            let mut map = write(&inner.billed);
            let ops = map.entry(Box::from(operator)).or_default();
            if !ops.iter().any(|(op, _)| *op == operation) {
                ops.push((operation, counter.clone()));
            }
            counter
        });
        counter.inc();
    }

    /// Counts one journey created.
    pub fn journey_created(&self) {
        self.inner.journeys.inc();
    }

    /// The gauges of this caller's own budget window (made once, when
    /// the budgets are built).
    pub fn budget_window(
        &self,
        operator: &str,
        operation: &'static str,
        window: &'static str,
    ) -> BudgetGauges {
        let labels = CallerBudgetLabels {
            caller: self.inner.label.clone(),
            operator: ChannelLabel::new(operator),
            operation,
            window,
        };
        let series = &self.inner.series;
        BudgetGauges {
            used: series.budget_used.get_or_create(&labels).clone(),
            remaining: series.budget_remaining.get_or_create(&labels).clone(),
        }
    }

    /// Sets this caller's use of `share` (`body_bytes`, `journeys`) and,
    /// when it has one, the share's size.
    pub fn set_share(&self, share: &'static str, used: usize, limit: Option<usize>) {
        let labels = ShareLabels {
            caller: self.inner.label.clone(),
            share,
        };
        let series = &self.inner.series;
        series.share_used.get_or_create(&labels).set(gauge(used));
        self.set_share_limit(share, limit);
    }

    /// Sets the size of this caller's `share`, when it has one.
    pub fn set_share_limit(&self, share: &'static str, limit: Option<usize>) {
        if let Some(limit) = limit {
            let labels = ShareLabels {
                caller: self.inner.label.clone(),
                share,
            };
            let series = &self.inner.series;
            series.share_limit.get_or_create(&labels).set(gauge(limit));
        }
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A caller's budget window's gauges: used and remaining.
#[derive(Debug, Clone)]
pub struct BudgetGauges {
    used: Gauge,
    remaining: Gauge,
}

impl BudgetGauges {
    /// `used` of `limit` calls counted in the window.
    pub fn set(&self, used: u64, limit: u64) {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.used.set(gauge(used.min(limit)));
        self.remaining.set(gauge(limit.saturating_sub(used)));
    }
}

/// The meters of one registry, by caller name.
#[derive(Default)]
pub(super) struct CallerMeters {
    by_name: RwLock<HashMap<ChannelLabel, CallerMeter, foldhash::fast::RandomState>>,
}

impl CallerMeters {
    fn get(&self, name: &str, series: &CallerSeries) -> CallerMeter {
        if let Some(meter) = read(&self.by_name).get(name) {
            return meter.clone();
        }
        let mut map = write(&self.by_name);
        if let Some(meter) = map.get(name) {
            return meter.clone();
        }
        if map.len() >= MAX_CALLER_LABELS {
            let overflow = ChannelLabel::new(super::labels::OVERFLOW);
            return map
                .entry(overflow.clone())
                .or_insert_with(|| CallerMeter::new(overflow, series))
                .clone();
        }
        let label = ChannelLabel::new(name);
        let meter = CallerMeter::new(label.clone(), series);
        map.insert(label, meter.clone());
        meter
    }
}

impl Metrics {
    /// The series of the caller named `name` (a configured name, or the
    /// open caller's), made the first time: its journeys counter shows at
    /// zero from then on.
    pub fn caller(&self, name: &str) -> CallerMeter {
        self.inner.caller_meters.get(name, &self.inner.callers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::exposition::assert_sample;

    #[test]
    fn a_callers_calls_billed_calls_and_journeys_are_counted_under_its_name() {
        let metrics = Metrics::default();
        let a = metrics.caller("onboarding");
        a.call("create_journey", "ok");
        a.call("create_journey", "ok");
        a.call("session_3d", "BUDGET_EXCEEDED");
        a.billed("default", "create_journey");
        a.billed("default", "create_journey");
        a.billed("premium", "start_session_3d");
        a.journey_created();
        metrics.caller("backoffice");
        let text = metrics.encode().unwrap();
        assert_sample(
            &text,
            r#"idgate_caller_calls_total{caller="onboarding",operation="create_journey",outcome="ok"} 2"#,
        );
        assert_sample(
            &text,
            r#"idgate_caller_calls_total{caller="onboarding",operation="session_3d",outcome="BUDGET_EXCEEDED"} 1"#,
        );
        assert_sample(
            &text,
            r#"idgate_caller_billed_total{caller="onboarding",operator="default",operation="create_journey"} 2"#,
        );
        assert_sample(
            &text,
            r#"idgate_caller_billed_total{caller="onboarding",operator="premium",operation="start_session_3d"} 1"#,
        );
        assert_sample(
            &text,
            r#"idgate_caller_journeys_total{caller="onboarding"} 1"#,
        );
        assert_sample(
            &text,
            r#"idgate_caller_journeys_total{caller="backoffice"} 0"#,
        );
    }

    #[test]
    fn a_caller_is_resolved_once_and_past_the_cap_is_labelled_overflow() {
        let metrics = Metrics::default();
        let a = metrics.caller("a");
        let again = metrics.caller("a");
        assert!(Arc::ptr_eq(&a.inner, &again.inner));
        for i in 1..MAX_CALLER_LABELS {
            metrics.caller(&format!("c{i}"));
        }
        assert_eq!(
            metrics.caller("one-more").name(),
            super::super::labels::OVERFLOW
        );
        assert_eq!(metrics.caller("a").name(), "a");
    }
}
