//! Spend: what a billed upstream call costs, and which `CreateJourney` is
//! a repeat of one already paid for.
//!
//! ```text
//! journey::Journeys::create --request_id?--> Idempotency: replay | wait | claim --> Spend::bill(create_journey) --> /appkey
//! the door (a billed row) ----------------------------------------------------------> Spend::bill(row's operation) --> vendor
//! ```
//!
//! Both keep their state in the [`SpendStore`]: fleet-wide on Redis, per
//! process in memory. The journey a request made, its owner and the
//! profile that pays for it are the journey's record, which the journey
//! room (`journey::Journeys`) writes at creation and reads on replay:
//! spend knows budgets and requests, not journeys.
//!
//! - [`config`]: `[idempotency]` and `[[budgets]]`.
//! - [`idempotency`]: one appkey per `request_id` (AIP-155).
//! - [`budget`]: per-minute and per-day limits per operator profile.

pub mod budget;
pub mod config;
pub mod idempotency;

use std::sync::Arc;

pub use budget::Budgets;
pub use config::{BilledOperation, BudgetConfig, IdempotencyConfig, validate_budgets};
pub use idempotency::{Begin, Claim, Idempotency, Replayed};

use crate::{cluster::SpendStore, error::Error, telemetry::usage::Usage};

/// The spend of a gateway: budgets and idempotency over one store. Cheap
/// to clone.
#[derive(Clone)]
pub struct Spend {
    inner: Arc<Inner>,
}

struct Inner {
    idempotency: Idempotency,
    budgets: Budgets,
    /// Where billed calls are counted by caller.
    usage: Usage,
}

impl std::fmt::Debug for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spend").finish_non_exhaustive()
    }
}

impl Spend {
    /// Spend over `state`, with `budgets` (validated), counting billed
    /// calls by caller in `usage`.
    pub fn new(
        idempotency: &IdempotencyConfig,
        budgets: &[BudgetConfig],
        state: Arc<dyn SpendStore>,
        usage: Usage,
    ) -> Self {
        let metrics = usage.metrics().clone();
        Self {
            inner: Arc::new(Inner {
                idempotency: Idempotency::new(idempotency, state.clone(), metrics.clone()),
                budgets: Budgets::new(budgets, state, metrics),
                usage,
            }),
        }
    }

    /// One appkey per `request_id`: where a `CreateJourney` claims,
    /// replays or waits.
    pub fn idempotency(&self) -> &Idempotency {
        &self.inner.idempotency
    }

    /// Bills one `operation` to `profile` (the profile that pays, already
    /// resolved; `None`: no profile is configured, so no budget applies)
    /// and to `caller`'s own budget on it, or refuses it with
    /// [`Error::BudgetExceeded`]; a call let through is counted as billed
    /// to the caller.
    pub async fn bill(
        &self,
        operation: BilledOperation,
        profile: Option<&str>,
        caller: &str,
    ) -> Result<(), Error> {
        if self.inner.budgets.covers(operation)
            && let Some(profile) = profile
        {
            self.inner
                .budgets
                .take_for(profile, Some(caller), operation)
                .await?;
        }
        self.inner
            .usage
            .caller(caller)
            .billed(profile.unwrap_or_default(), operation.as_str());
        Ok(())
    }
}
