//! The spending guard: what stands between a caller and a billed upstream
//! call.
//!
//! ```text
//! CreateJourney --request_id?--> idempotency: replay | wait | claim
//!                                   `--claimed--> budget (create_journey) --> journey core (/appkey)
//! StartSession3D ----------------------------> budget (start_session_3d) --> channel router
//! SubmitDocument* ---------------------------> budget (submit_documents) --> journey core (/document)
//! ```
//!
//! Both halves keep their state in the [`GuardStore`]: fleet-wide on
//! Redis, per process in memory.
//!
//! - [`config`]: `[idempotency]` and `[[budgets]]`.
//! - [`idempotency`]: one appkey per `request_id` (AIP-155).
//! - [`budget`]: per-minute and per-day limits per operator profile.

pub mod budget;
pub mod config;
pub mod idempotency;

use std::{future::Future, sync::Arc, time::Duration};

pub use budget::Budgets;
pub use config::{BilledOperation, BudgetConfig, GuardConfig, IdempotencyConfig, validate_budgets};
pub use idempotency::{Begin, Claim, Idempotency};

use crate::{
    cluster::{GuardStore, MemoryGuard},
    context::CallContext,
    domain::{Appkey, EndUser, JourneyRef, RequestId},
    error::Error,
    journey::NewJourney,
    telemetry::Metrics,
    ttl::TtlMap,
};

/// A journey from [`Guard::create_journey`].
#[derive(Debug)]
pub struct Created {
    /// The journey.
    pub journey: NewJourney,
    /// True when it was replayed for a repeated `request_id`.
    pub replayed: bool,
}

struct Inner {
    idempotency: Idempotency,
    budgets: Budgets,
    state: Arc<dyn GuardStore>,
    /// Operator profiles in configuration order; the first is the default.
    profiles: Vec<String>,
    /// Which profile created a journey, for billing its later calls (kept
    /// only with several profiles).
    created_by: std::sync::Mutex<TtlMap<JourneyRef, String>>,
}

/// The spending guard. Cheap to clone.
#[derive(Clone)]
pub struct Guard {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("profiles", &self.inner.profiles)
            .finish_non_exhaustive()
    }
}

impl Default for Guard {
    /// One process, no budgets, the default idempotency window, profiles
    /// unknown (every call is billed to none).
    fn default() -> Self {
        Self::new(
            &IdempotencyConfig::default(),
            &[],
            Vec::new(),
            Arc::new(MemoryGuard::default()),
            Metrics::default(),
        )
    }
}

impl Guard {
    /// A guard over `state` for the operator `profiles` (configuration
    /// order), with `budgets` (validated).
    pub fn new(
        idempotency: &IdempotencyConfig,
        budgets: &[BudgetConfig],
        profiles: Vec<String>,
        state: Arc<dyn GuardStore>,
        metrics: Metrics,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                idempotency: Idempotency::new(idempotency, state.clone(), metrics.clone()),
                budgets: Budgets::new(budgets, state.clone(), metrics),
                created_by: std::sync::Mutex::new(TtlMap::new(
                    Duration::from_secs(idempotency.ttl_secs.max(1)),
                    idempotency.max_entries,
                )),
                state,
                profiles,
            }),
        }
    }

    /// The profile a request names (`None`: the first configured one).
    fn profile(&self, requested: Option<&str>) -> Result<String, Error> {
        if self.inner.profiles.is_empty() {
            // Profiles unknown here: the journey core decides.
            return Ok(requested.unwrap_or_default().to_owned());
        }
        match requested {
            Some(name) if self.inner.profiles.iter().any(|p| p == name) => Ok(name.to_owned()),
            Some(name) => Err(Error::OperatorProfileUnknown(name.to_owned())),
            None => self
                .inner
                .profiles
                .first()
                .cloned()
                .ok_or_else(|| Error::OperatorProfileUnknown(String::new())),
        }
    }

    /// Runs `create` for `user` under the guard: with a `request_id`, at
    /// most once per request (replayed after); within the profile's
    /// `create_journey` budget.
    pub async fn create_journey<F, Fut>(
        &self,
        ctx: &CallContext,
        user: &EndUser,
        caller: Option<&str>,
        profile: Option<&str>,
        request_id: Option<&RequestId>,
        create: F,
    ) -> Result<Created, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<NewJourney, Error>>,
    {
        let profile = self.profile(profile)?;
        let claim = match request_id {
            None => None,
            Some(id) => match self
                .inner
                .idempotency
                .begin(ctx, &profile, id, user)
                .await?
            {
                Begin::Replay(journey) => {
                    return Ok(Created {
                        journey,
                        replayed: true,
                    });
                }
                Begin::Claimed(claim) => Some(claim),
            },
        };
        if let Err(e) = self
            .inner
            .budgets
            .take_for(&profile, caller, BilledOperation::CreateJourney)
            .await
        {
            if let Some(claim) = claim {
                claim.release().await;
            }
            return Err(e);
        }
        match create().await {
            Ok(journey) => {
                if let Some(claim) = claim {
                    claim.complete(&journey).await;
                }
                self.remember_profile(&journey.journey_ref, &profile).await;
                Ok(Created {
                    journey,
                    replayed: false,
                })
            }
            Err(e) => {
                if let Some(claim) = claim {
                    claim.release().await;
                }
                Err(e)
            }
        }
    }

    async fn remember_profile(&self, journey: &JourneyRef, profile: &str) {
        if self.inner.profiles.len() < 2 {
            return;
        }
        crate::sync::lock(&self.inner.created_by).insert(
            journey.clone(),
            profile.to_owned(),
            tokio::time::Instant::now(),
        );
        if self.inner.state.is_fleet()
            && self
                .inner
                .state
                .remember_profile(journey, profile)
                .await
                .is_err()
        {
            tracing::debug!(%journey, "the journey's operator profile was not shared; other replicas bill it to the first profile");
        }
    }

    /// The profile that created the journey of `appkey`: remembered here,
    /// else by the fleet, else the first profile.
    async fn profile_of(&self, appkey: &Appkey) -> Option<String> {
        let first = self.inner.profiles.first().cloned();
        if self.inner.profiles.len() < 2 {
            return first;
        }
        let journey = JourneyRef::from_appkey(appkey);
        let local = crate::sync::lock(&self.inner.created_by)
            .get(&journey, tokio::time::Instant::now())
            .cloned();
        if local.is_some() {
            return local;
        }
        if self.inner.state.is_fleet()
            && let Ok(Some(profile)) = self.inner.state.journey_profile(&journey).await
        {
            return Some(profile);
        }
        first
    }

    /// Bills one `operation` on the journey of `appkey` to the profile
    /// that created it, or refuses it with [`Error::BudgetExceeded`].
    /// `caller`: whose own budget on the profile also counts the call.
    pub async fn bill(
        &self,
        operation: BilledOperation,
        appkey: &Appkey,
        caller: Option<&str>,
    ) -> Result<(), Error> {
        if !self.inner.budgets.covers(operation) {
            return Ok(());
        }
        match self.profile_of(appkey).await {
            Some(profile) => {
                let budgets = &self.inner.budgets;
                budgets.take_for(&profile, caller, operation).await
            }
            None => Ok(()),
        }
    }

    /// Bills one `operation` on an appkey this gateway did not issue
    /// (`[guard] accept_foreign_appkeys`) to `profile` (the caller's
    /// first), else the default profile.
    pub async fn bill_foreign(
        &self,
        operation: BilledOperation,
        profile: Option<&str>,
        caller: Option<&str>,
    ) -> Result<(), Error> {
        if !self.inner.budgets.covers(operation) {
            return Ok(());
        }
        let profile = profile
            .filter(|p| self.inner.profiles.iter().any(|known| known == p))
            .map(str::to_owned)
            .or_else(|| self.inner.profiles.first().cloned());
        match profile {
            Some(profile) => {
                let budgets = &self.inner.budgets;
                budgets.take_for(&profile, caller, operation).await
            }
            None => Ok(()),
        }
    }
}
