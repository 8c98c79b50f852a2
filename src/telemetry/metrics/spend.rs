//! Spend's series: idempotent `CreateJourney` outcomes, and
//! the budget left per operator profile, operation and window. Operator
//! profiles and operations are configuration names: bounded, never
//! personal.

use super::*;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BudgetLabels {
    pub(super) operator: String,
    pub(super) operation: &'static str,
    pub(super) window: &'static str,
}

/// Spend's series.
pub(super) struct SpendSeries {
    pub(super) idempotency: Family<OutcomeLabels, Counter>,
    pub(super) remaining: Family<BudgetLabels, Gauge>,
    pub(super) refusals: Family<BudgetLabels, Counter>,
    pub(super) appkey_repeats: Counter,
}

impl SpendSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            idempotency: Family::default(),
            remaining: Family::default(),
            refusals: Family::default(),
            appkey_repeats: Counter::default(),
        };
        registry.register(
            "idgate_idempotent_requests",
            "CreateJourney calls with a request_id, by outcome (claimed, replayed, joined_in_flight, refused_reused, first_call_failed, unavailable)",
            series.idempotency.clone(),
        );
        registry.register(
            "idgate_budget_remaining",
            "Calls left in the current budget window, per operator profile, billed operation and window (minute, day), as of this replica's last billed call",
            series.remaining.clone(),
        );
        registry.register(
            "idgate_budget_refusals",
            "Calls refused with BUDGET_EXCEEDED, per operator profile, billed operation and window",
            series.refusals.clone(),
        );
        registry.register(
            "idgate_appkey_repeats",
            "CreateJourney calls refused APPKEY_REPEATED: the vendor issued an appkey of a journey the gateway already holds (the journey stays its first creator's)",
            series.appkey_repeats.clone(),
        );
        series
    }
}

impl Metrics {
    /// Counts one appkey the vendor issued twice.
    pub fn record_appkey_repeat(&self) {
        self.inner.spend.appkey_repeats.inc();
    }

    /// Counts one idempotent `CreateJourney` outcome (a fixed set).
    pub fn record_idempotency(&self, outcome: &'static str) {
        self.inner
            .spend
            .idempotency
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Sets the budget left of `operator`'s `operation` in `window`.
    pub fn set_budget_remaining(
        &self,
        operator: &str,
        operation: &'static str,
        window: &'static str,
        remaining: u64,
    ) {
        self.inner
            .spend
            .remaining
            .get_or_create(&BudgetLabels {
                operator: operator.to_owned(),
                operation,
                window,
            })
            .set(i64::try_from(remaining).unwrap_or(i64::MAX));
    }

    /// Counts one call refused by `operator`'s `operation` budget.
    pub fn record_budget_refusal(
        &self,
        operator: &str,
        operation: &'static str,
        window: &'static str,
    ) {
        self.inner
            .spend
            .refusals
            .get_or_create(&BudgetLabels {
                operator: operator.to_owned(),
                operation,
                window,
            })
            .inc();
    }
}
