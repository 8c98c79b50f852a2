//! The spending guard: what stands between a caller and a billed upstream
//! call.
//!
//! ```text
//! CreateJourney --can record?--request_id?--> idempotency: replay (from the journey's record) | wait | claim
//!                                   `--claimed--> budget (create_journey) --> journey core (/appkey) --> record --> complete
//! StartSession3D ----------------------------> budget (start_session_3d) --> channel router
//! SubmitDocument* ---------------------------> budget (submit_documents) --> journey core (/document)
//! ```
//!
//! Both halves keep their state in the [`SpendStore`]: fleet-wide on
//! Redis, per process in memory. Which appkey a request made, its owner
//! and the profile that pays for it are the journey's record
//! ([`JourneyStore`]), which the guard writes at creation and reads on
//! replay.
//!
//! - [`config`]: `[idempotency]` and `[[budgets]]`.
//! - [`idempotency`]: one appkey per `request_id` (AIP-155).
//! - [`budget`]: per-minute and per-day limits per operator profile.

pub mod budget;
pub mod config;
pub mod idempotency;

use std::{future::Future, sync::Arc};

pub use budget::Budgets;
pub use config::{BilledOperation, BudgetConfig, GuardConfig, IdempotencyConfig, validate_budgets};
pub use idempotency::{Begin, Claim, Idempotency, Replayed};

use time::OffsetDateTime;

use crate::{
    cluster::{ClusterError, JourneyStore, MemoryJourneys, MemorySpend, SpendStore},
    context::CallContext,
    domain::{Caller, CallerName, EndUser, JourneyRecord, RequestId},
    error::Error,
    events::throttle::LogThrottle,
    journey::NewJourney,
    telemetry::{Metrics, usage::Usage},
};

/// What a journey store's refusal means to `CreateJourney`: Redis down,
/// retry later; a single replica full, shed load; the caller at its share
/// of live journeys (`share`), this caller alone refused; a repeated
/// appkey, the vendor broke the contract.
fn recording_error(e: ClusterError, share: usize) -> Error {
    match e {
        ClusterError::Unavailable => Error::ClusterUnavailable,
        ClusterError::Full => {
            Error::Overloaded("the gateway holds the most journey records allowed")
        }
        ClusterError::OwnerFull => Error::CallerShareSpent {
            what: "live journeys",
            key: "max_journeys",
            share,
        },
        ClusterError::Taken => Error::AppkeyRepeated,
    }
}

/// A journey from [`SpendGuard::create_journey`].
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
    /// The journey records: registered at creation, read on replay.
    journeys: Arc<dyn JourneyStore>,
    /// Operator profiles in configuration order; the first is the default.
    profiles: Vec<String>,
    metrics: Metrics,
    /// Where billed calls and created journeys are counted by caller.
    usage: Usage,
    /// Repeated appkeys are a vendor's fault a caller cannot cause at
    /// will, but one vendor bug repeats on every call: a line a minute.
    repeats: LogThrottle,
}

/// The spending guard. Cheap to clone.
#[derive(Clone)]
pub struct SpendGuard {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SpendGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpendGuard")
            .field("profiles", &self.inner.profiles)
            .finish_non_exhaustive()
    }
}

impl Default for SpendGuard {
    /// One process, no budgets, the default idempotency window and
    /// journey retention, profiles unknown (every call is billed to none).
    fn default() -> Self {
        let journeys = crate::cluster::JourneysConfig::default();
        Self::new(
            &IdempotencyConfig::default(),
            &[],
            Vec::new(),
            Arc::new(MemorySpend::default()),
            Arc::new(MemoryJourneys::new(
                journeys.retention(),
                journeys.max_entries,
            )),
            Usage::default(),
        )
    }
}

impl SpendGuard {
    /// A guard over `state` for the operator `profiles` (configuration
    /// order), with `budgets` (validated), recording journeys in
    /// `journeys`, counting billed calls and created journeys by caller in
    /// `usage`.
    pub fn new(
        idempotency: &IdempotencyConfig,
        budgets: &[BudgetConfig],
        profiles: Vec<String>,
        state: Arc<dyn SpendStore>,
        journeys: Arc<dyn JourneyStore>,
        usage: Usage,
    ) -> Self {
        let metrics = usage.metrics().clone();
        Self {
            inner: Arc::new(Inner {
                idempotency: Idempotency::new(idempotency, state.clone(), metrics.clone()),
                budgets: Budgets::new(budgets, state, metrics.clone()),
                journeys,
                profiles,
                usage,
                metrics,
                repeats: LogThrottle::new(std::time::Duration::from_secs(60)),
            }),
        }
    }

    /// The journey records this guard registers journeys in.
    pub fn journeys(&self) -> &Arc<dyn JourneyStore> {
        &self.inner.journeys
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

    /// Runs `create` for `user`, on behalf of `caller`, under the guard:
    /// with a `request_id`, at most once per caller and request (replayed
    /// after, to that caller only); within the profile's `create_journey`
    /// budget; and only when the journey can be recorded, so that every
    /// appkey handed out has its record (owner, profile, request) for the
    /// whole retention.
    pub async fn create_journey<F, Fut>(
        &self,
        ctx: &CallContext,
        user: &EndUser,
        caller: &Caller,
        profile: Option<&str>,
        request_id: Option<&RequestId>,
        create: F,
    ) -> Result<Created, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<NewJourney, Error>>,
    {
        let profile = self.profile(profile)?;
        let owner = caller.owner();
        let share = caller.limits.max_journeys;
        let recording = |e| recording_error(e, share);
        // Before any claim, budget or vendor call: no appkey is bought
        // that could not be recorded.
        self.inner
            .journeys
            .can_record(owner.as_ref(), share)
            .await
            .map_err(recording)?;
        let claim = match request_id {
            None => None,
            Some(id) => match self
                .inner
                .idempotency
                .begin(ctx, owner.as_ref(), &profile, id, user)
                .await?
            {
                Begin::Replay(replayed) => return self.replay(replayed, owner.as_ref()).await,
                Begin::Claimed(claim) => Some(claim),
            },
        };
        let caller_name = Some(caller.name.as_str());
        let billed = BilledOperation::CreateJourney;
        if let Err(e) = self
            .inner
            .budgets
            .take_for(&profile, caller_name, billed)
            .await
        {
            if let Some(claim) = claim {
                claim.release().await;
            }
            return Err(e);
        }
        let usage = self.inner.usage.caller(caller.name.as_str());
        usage.billed(&profile, billed.as_str());
        let journey = match create().await {
            Ok(journey) => journey,
            Err(e) => {
                if let Some(claim) = claim {
                    claim.release().await;
                }
                return Err(e);
            }
        };
        let record = JourneyRecord {
            appkey: journey.appkey.clone(),
            owner,
            profile: (!profile.is_empty()).then_some(profile),
            request: claim.as_ref().map(|c| c.key().clone()),
            created_unix: crate::cluster::journeys::now_unix(),
        };
        // Recorded before the claim completes: a concurrent replay never
        // sees a journey without its owner. A journey the fleet cannot
        // record is not handed out (its appkey would be foreign on every
        // other replica); the claim is released for a retry.
        if let Err(e) = self
            .inner
            .journeys
            .register(&journey.journey_ref, &record, share)
            .await
        {
            if e == ClusterError::Taken {
                self.repeated_appkey(&journey.journey_ref);
            } else {
                tracing::warn!(journey = %journey.journey_ref, "the new journey could not be recorded; CreateJourney fails rather than hand out an appkey the gateway cannot check");
            }
            if let Some(claim) = claim {
                claim.release().await;
            }
            return Err(recording(e));
        }
        usage.journey_created();
        if let Some(claim) = claim {
            claim
                .complete(&journey.journey_ref, journey.expires_at.unix_timestamp())
                .await;
        }
        Ok(Created {
            journey,
            replayed: false,
        })
    }

    /// The vendor issued the appkey of a live journey again: counted, and
    /// said at most once a minute (the reference only; the journey stays
    /// its first creator's, and this call's audit record says
    /// `APPKEY_REPEATED`).
    fn repeated_appkey(&self, journey: &crate::domain::JourneyRef) {
        self.inner.metrics.record_appkey_repeat();
        if let Some(suppressed) = self.inner.repeats.admit(tokio::time::Instant::now()) {
            tracing::error!(
                journey = %journey,
                suppressed,
                "the vendor issued an appkey it had already issued for a live journey; the journey stays its first creator's and this CreateJourney fails APPKEY_REPEATED"
            );
        }
    }

    /// The journey a completed request of `owner` made, from its record:
    /// only when the record is that owner's and carries the request's key
    /// (an idempotency record pointed at another journey replays
    /// nothing, and a replay never registers or changes an owner).
    async fn replay(
        &self,
        replayed: Replayed,
        owner: Option<&CallerName>,
    ) -> Result<Created, Error> {
        let record = self
            .inner
            .journeys
            .find(&replayed.journey)
            .await
            .map_err(|e| recording_error(e, usize::MAX))?
            .ok_or(Error::JourneyUnknown)?;
        if record.owner.as_ref() != owner || record.request.as_ref() != Some(&replayed.key) {
            return Err(Error::JourneyNotOwned);
        }
        Ok(Created {
            journey: NewJourney {
                appkey: record.appkey,
                journey_ref: replayed.journey,
                expires_at: OffsetDateTime::from_unix_timestamp(replayed.expires_unix)
                    .unwrap_or(OffsetDateTime::UNIX_EPOCH),
            },
            replayed: true,
        })
    }

    /// Bills one `operation` on a journey created under `profile` (its
    /// record's; `None`: the first profile), or refuses it with
    /// [`Error::BudgetExceeded`]. `caller`: whose own budget on the
    /// profile also counts the call.
    pub async fn bill(
        &self,
        operation: BilledOperation,
        profile: Option<&str>,
        caller: Option<&str>,
    ) -> Result<(), Error> {
        self.bill_to(operation, profile, caller).await
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
        let known = profile.filter(|p| self.inner.profiles.iter().any(|known| known == p));
        self.bill_to(operation, known, caller).await
    }

    /// Takes one `operation` from `profile`'s budgets (`None`: the first
    /// profile's), and the caller's own on it; a call let through is
    /// counted as billed to the caller.
    async fn bill_to(
        &self,
        operation: BilledOperation,
        profile: Option<&str>,
        caller: Option<&str>,
    ) -> Result<(), Error> {
        let profile = profile.or_else(|| self.inner.profiles.first().map(String::as_str));
        if self.inner.budgets.covers(operation)
            && let Some(profile) = profile
        {
            self.inner
                .budgets
                .take_for(profile, caller, operation)
                .await?;
        }
        if let Some(caller) = caller {
            self.inner
                .usage
                .caller(caller)
                .billed(profile.unwrap_or_default(), operation.as_str());
        }
        Ok(())
    }
}
