//! Budgets: what each operator profile may spend on each billed
//! operation, per minute and per day.
//!
//! Fixed windows, not token buckets: a window opens at the first call
//! counted in it and lasts a minute (or a day); it lets `limit` calls
//! through, then refuses until it closes. A fixed window is one atomic
//! counter with an expiry (one Redis script across the fleet), its
//! "remaining" is exact, and a refusal can say exactly when the window
//! reopens. The cost: up to twice the limit can pass around a window's
//! end; with a day limit beside the minute one, that burst stays bounded.
//!
//! An entry may name a `caller`: its windows are counted for that caller's
//! calls on the profile, in the same atomic take as the profile's own (a
//! call passes only when both have room). Caller windows are the series
//! `idgate_caller_budget_used` / `_remaining` (the caller's configured
//! name is the label; their gauges are made once, here).
//!
//! A refused call counts in no window; a call let through counts in every
//! window of its budget, whatever its outcome upstream (it may have cost
//! money). At 80 % of a window one warning is logged (by the replica whose
//! call reached it); at 100 % calls are refused with `RESOURCE_EXHAUSTED`
//! / `BUDGET_EXCEEDED` and a `RetryInfo` for when the window reopens,
//! before any upstream call.

use std::{collections::HashMap, sync::Arc, time::Duration};

use super::config::{BilledOperation, BudgetConfig};
use crate::{
    cluster::{BudgetTake, BudgetWindow, SpendStore},
    error::Error,
    telemetry::{Metrics, metrics::BudgetGauges},
};

/// The windows of a budget, shortest first.
const WINDOWS: [(&str, Duration); 2] = [
    ("minute", Duration::from_secs(60)),
    ("day", Duration::from_secs(86_400)),
];

/// One budget's limits, per window of [`WINDOWS`] (`None`: no limit).
#[derive(Debug, Clone, Copy)]
struct Limits([Option<u64>; 2]);

/// A caller's own limits on a profile's operation, and the gauges of
/// each of its windows that has a limit (in [`WINDOWS`] order).
type CallerLimits = (Limits, [Option<BudgetGauges>; 2]);

/// The configured budgets, counted in the shared state.
#[derive(Clone)]
pub struct Budgets {
    limits: Arc<HashMap<(String, BilledOperation), Limits>>,
    /// Entries naming a caller: (profile, caller, operation), with the
    /// gauges of each window that has a limit.
    by_caller: Arc<HashMap<(String, String, BilledOperation), CallerLimits>>,
    state: Arc<dyn SpendStore>,
    metrics: Metrics,
}

impl std::fmt::Debug for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgets")
            .field("budgets", &self.limits.len())
            .finish_non_exhaustive()
    }
}

/// The call count at which a window's 80 % warning is logged: 80 %
/// rounded up (`limit - ⌊limit / 5⌋`, which cannot overflow).
fn warn_at(limit: u64) -> u64 {
    (limit - limit / 5).max(1)
}

impl Budgets {
    /// The budgets of `config` (validated), counted in `state`; the
    /// remaining gauges start at each limit.
    pub fn new(config: &[BudgetConfig], state: Arc<dyn SpendStore>, metrics: Metrics) -> Self {
        let mut limits = HashMap::new();
        let mut by_caller = HashMap::new();
        for b in config {
            let l = Limits([b.per_minute, b.per_day]);
            if let Some(caller) = &b.caller {
                let meter = metrics.caller(caller);
                let gauges = [0, 1].map(|i| {
                    l.0[i].map(|limit| {
                        let g =
                            meter.budget_window(&b.operator, b.operation.as_str(), WINDOWS[i].0);
                        g.set(0, limit);
                        g
                    })
                });
                by_caller.insert(
                    (b.operator.clone(), caller.clone(), b.operation),
                    (l, gauges),
                );
                continue;
            }
            for ((window, _), limit) in WINDOWS.iter().zip(l.0) {
                if let Some(limit) = limit {
                    metrics.set_budget_remaining(&b.operator, b.operation.as_str(), window, limit);
                }
            }
            limits.insert((b.operator.clone(), b.operation), l);
        }
        Self {
            limits: Arc::new(limits),
            by_caller: Arc::new(by_caller),
            state,
            metrics,
        }
    }

    /// True when some profile has a budget for `operation`.
    pub fn covers(&self, operation: BilledOperation) -> bool {
        self.limits.keys().any(|(_, op)| *op == operation)
            || self.by_caller.keys().any(|(_, _, op)| *op == operation)
    }

    /// Counts one `operation` of `operator`, or refuses it with
    /// [`Error::BudgetExceeded`] when a window is spent. Without a budget
    /// for the pair, nothing is counted.
    pub async fn take(&self, operator: &str, operation: BilledOperation) -> Result<(), Error> {
        self.take_for(operator, None, operation).await
    }

    /// [`Budgets::take`], counting `caller`'s own budget on the profile
    /// too, in the same atomic take.
    pub async fn take_for(
        &self,
        operator: &str,
        caller: Option<&str>,
        operation: BilledOperation,
    ) -> Result<(), Error> {
        let own = self.limits.get(&(operator.to_owned(), operation));
        let of_caller = caller.and_then(|c| {
            self.by_caller
                .get(&(operator.to_owned(), c.to_owned(), operation))
                .map(|(l, gauges)| (c, l, gauges))
        });
        if own.is_none() && of_caller.is_none() {
            return Ok(());
        }
        let windows =
            |limits: Option<&Limits>, name: &str| -> Vec<(&'static str, u64, BudgetWindow)> {
                let Some(limits) = limits else {
                    return Vec::new();
                };
                WINDOWS
                    .iter()
                    .zip(limits.0)
                    .filter_map(|((window, length), limit)| {
                        limit.map(|limit| {
                            (
                                *window,
                                limit,
                                BudgetWindow {
                                    name: format!("{name}:{operation}:{window}"),
                                    limit,
                                    length: *length,
                                },
                            )
                        })
                    })
                    .collect()
            };
        let mut windows_all = windows(own, operator);
        // The profile's windows first: metrics and warnings are theirs.
        let profile_windows = windows_all.len();
        // The caller's windows' gauges, in the order of its windows.
        let mut caller_gauges: Vec<&BudgetGauges> = Vec::new();
        if let Some((c, l, gauges)) = of_caller {
            windows_all.extend(windows(Some(l), &format!("{operator}:caller:{c}")));
            caller_gauges.extend(gauges.iter().flatten());
        }
        let windows = windows_all;
        let take = self
            .state
            .take_budget(windows.iter().map(|(_, _, w)| w.clone()).collect())
            .await;
        let op = operation.as_str();
        match take {
            BudgetTake::Granted(uses) => {
                for ((_, limit, _), (used, gauges)) in windows
                    .iter()
                    .zip(&uses)
                    .skip(profile_windows)
                    .zip(&caller_gauges)
                    .map(|((w, u), g)| (w, (u, g)))
                {
                    gauges.set(used.used, *limit);
                }
                for ((window, limit, _), used) in windows.iter().zip(uses).take(profile_windows) {
                    self.metrics.set_budget_remaining(
                        operator,
                        op,
                        window,
                        limit.saturating_sub(used.used),
                    );
                    if used.used == warn_at(*limit) {
                        tracing::warn!(
                            operator_profile = operator,
                            operation = op,
                            window = *window,
                            limit = *limit,
                            used = used.used,
                            reopens_in_secs = used.resets_in.as_secs(),
                            "budget 80% used: calls past the limit will be refused with BUDGET_EXCEEDED until the window reopens"
                        );
                    }
                }
                Ok(())
            }
            BudgetTake::Refused {
                window,
                retry_after,
            } => {
                let of_profile = window < profile_windows;
                if let Some(((_, limit, _), gauges)) = window
                    .checked_sub(profile_windows)
                    .and_then(|i| Some((windows.get(window)?, caller_gauges.get(i)?)))
                {
                    gauges.set(*limit, *limit);
                }
                let window = windows.get(window).map_or("minute", |(w, _, _)| *w);
                if of_profile {
                    self.metrics.set_budget_remaining(operator, op, window, 0);
                }
                self.metrics.record_budget_refusal(operator, op, window);
                Err(Error::BudgetExceeded {
                    operator: operator.to_owned(),
                    operation: op,
                    window,
                    retry_after: retry_after.max(Duration::from_millis(1)),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::MemorySpend;

    #[test]
    fn the_warning_threshold_is_80_percent_rounded_up() {
        assert_eq!(warn_at(1), 1);
        assert_eq!(warn_at(5), 4);
        assert_eq!(warn_at(10), 8);
        assert_eq!(warn_at(11), 9);
        assert_eq!(warn_at(3), 3);
        assert_eq!(warn_at(u64::MAX), u64::MAX - u64::MAX / 5);
    }

    #[tokio::test]
    async fn a_budget_lets_its_limit_through_then_refuses_with_when_it_reopens() {
        let metrics = Metrics::default();
        let budgets = Budgets::new(
            &[BudgetConfig {
                caller: None,
                operator: "default".into(),
                operation: BilledOperation::CreateJourney,
                per_minute: Some(2),
                per_day: Some(100),
            }],
            Arc::new(MemorySpend::default()),
            metrics.clone(),
        );
        assert!(budgets.covers(BilledOperation::CreateJourney));
        assert!(!budgets.covers(BilledOperation::SubmitDocuments));
        for _ in 0..2 {
            budgets
                .take("default", BilledOperation::CreateJourney)
                .await
                .unwrap();
        }
        let err = budgets
            .take("default", BilledOperation::CreateJourney)
            .await
            .unwrap_err();
        let Error::BudgetExceeded {
            window,
            retry_after,
            ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(*window, "minute");
        assert!(*retry_after <= Duration::from_secs(60));
        // Other profiles and operations have no budget: never counted.
        budgets
            .take("other", BilledOperation::CreateJourney)
            .await
            .unwrap();
        let text = metrics.encode().unwrap();
        crate::telemetry::metrics::exposition::assert_sample(
            &text,
            r#"idgate_budget_remaining{operator="default",operation="create_journey",window="day"} 98"#,
        );
    }

    #[tokio::test]
    async fn a_callers_budget_counts_its_calls_beside_the_profiles() {
        let entry = |caller: Option<&str>, per_minute| BudgetConfig {
            caller: caller.map(str::to_owned),
            operator: "p".into(),
            operation: BilledOperation::StartSession3D,
            per_minute: Some(per_minute),
            per_day: None,
        };
        let metrics = Metrics::default();
        let budgets = Budgets::new(
            &[entry(None, 3), entry(Some("greedy"), 1)],
            Arc::new(MemorySpend::default()),
            metrics.clone(),
        );
        let gauge = |name: &str, value: u64| {
            crate::telemetry::metrics::exposition::assert_sample(
                &metrics.encode().unwrap(),
                &format!(
                    r#"{name}{{caller="greedy",operator="p",operation="start_session_3d",window="minute"}} {value}"#
                ),
            );
        };
        gauge("idgate_caller_budget_remaining", 1);
        gauge("idgate_caller_budget_used", 0);
        let op = BilledOperation::StartSession3D;
        assert!(budgets.take_for("p", Some("greedy"), op).await.is_ok());
        gauge("idgate_caller_budget_remaining", 0);
        gauge("idgate_caller_budget_used", 1);
        let err = budgets.take_for("p", Some("greedy"), op).await.unwrap_err();
        assert!(matches!(err, Error::BudgetExceeded { .. }), "{err}");
        // The refused call counted nowhere: the profile has two left.
        assert!(budgets.take_for("p", Some("other"), op).await.is_ok());
        assert!(budgets.take_for("p", None, op).await.is_ok());
        assert!(budgets.take_for("p", None, op).await.is_err());
    }
}
