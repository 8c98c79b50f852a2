//! `CreateJourney`: a journey made at most once per caller and
//! `request_id`, within its profile's budget, and recorded before its
//! appkey reaches anyone.
//!
//! ```text
//! can record? --request_id?--> spend idempotency: replay (from the journey's record) | wait | claim
//!                     `--claimed or none--> spend budget (create_journey) --> core /appkey --> record --> complete
//! ```
//!
//! Every appkey handed out has its record (owner, profile, request) for
//! the whole retention: the store is asked before any claim, budget or
//! vendor call whether it can take one more, and a journey the store then
//! refuses is not handed out (its claim is released for a retry).

use time::OffsetDateTime;

use super::{Journeys, NewJourney};
use crate::{
    cluster::{ClusterError, journeys::now_unix},
    context::CallContext,
    domain::{Caller, CallerName, EndUser, JourneyRecord, JourneyRef, RequestId},
    error::Error,
    spend::{Begin, BilledOperation, Replayed},
    telemetry::audit::Upstream,
};

/// What a journey store's refusal means to `CreateJourney`: Redis down,
/// retry later; a single replica full (its memory, or its store at
/// `store.max_bytes`) or its store's disk behind, shed load; the caller at its share
/// of live journeys (`share`), this caller alone refused; a repeated
/// appkey, the vendor broke the contract.
fn recording_error(e: ClusterError, share: usize) -> Error {
    match e {
        ClusterError::Unavailable => Error::ClusterUnavailable,
        ClusterError::Full => {
            Error::Overloaded("the gateway holds the most journey records allowed")
        }
        ClusterError::StoreFull => {
            Error::Overloaded("store.max_bytes: the store holds the most live records allowed")
        }
        ClusterError::Busy => Error::Overloaded("writes waiting for the store's disk"),
        ClusterError::OwnerFull => Error::CallerShareSpent {
            what: "live journeys",
            key: "max_journeys",
            share,
        },
        ClusterError::Taken => Error::AppkeyRepeated,
    }
}

/// What `CreateJourney` asks for, validated.
#[derive(Debug, Clone, Copy)]
pub struct Creation<'a> {
    /// Who the journey verifies.
    pub user: &'a EndUser,
    /// The operator profile named (`None`: the default one).
    pub profile: Option<&'a str>,
    /// The caller's idempotency key, if any.
    pub request_id: Option<&'a RequestId>,
}

/// A journey from [`Journeys::create`].
#[derive(Debug)]
pub struct Created {
    /// The journey.
    pub journey: NewJourney,
    /// True when it was replayed for a repeated `request_id`.
    pub replayed: bool,
}

impl Journeys {
    /// Makes the journey `creation` asks for, on behalf of `caller`: on a
    /// profile the caller may use, at most once per caller and
    /// `request_id` (replayed after, to that caller only), within the
    /// profile's `create_journey` budget, and only when it can be
    /// recorded. `upstream` is marked when the vendor is about to be
    /// called (after every check), not before.
    pub async fn create(
        &self,
        ctx: &CallContext,
        caller: &Caller,
        creation: Creation<'_>,
        upstream: &Upstream,
    ) -> Result<Created, Error> {
        let profiles = self.inner.core.credentials().profiles();
        let named = profiles.meant(creation.profile);
        if !named.is_some_and(|p| caller.may_use_profile(p)) {
            return Err(Error::ProfileNotAllowed);
        }
        let profile = named
            .filter(|p| profiles.knows(p))
            .ok_or_else(|| Error::OperatorProfileUnknown(named.unwrap_or_default().to_owned()))?;
        let owner = caller.owner();
        let share = caller.limits.max_journeys;
        let recording = |e| recording_error(e, share);
        // Before any claim, budget or vendor call: no appkey is bought
        // that could not be recorded.
        self.inner
            .records
            .can_record(owner.as_ref(), share)
            .await
            .map_err(recording)?;
        let claim = match creation.request_id {
            None => None,
            Some(id) => match self
                .inner
                .spend
                .idempotency()
                .begin(ctx, owner.as_ref(), profile, id, creation.user)
                .await?
            {
                Begin::Replay(replayed) => return self.replay(replayed, owner.as_ref()).await,
                Begin::Claimed(claim) => Some(claim),
            },
        };
        let billed = self
            .inner
            .spend
            .bill(
                BilledOperation::CreateJourney,
                Some(profile),
                caller.name.as_str(),
            )
            .await;
        if let Err(e) = billed {
            if let Some(claim) = claim {
                claim.release().await;
            }
            return Err(e);
        }
        upstream.sending();
        let journey = match self
            .inner
            .core
            .create_journey(ctx, creation.user, profile)
            .await
        {
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
            profile: Some(profile.to_owned()),
            request: claim.as_ref().map(|c| c.key().clone()),
            created_unix: now_unix(),
        };
        // Recorded before the claim completes: a concurrent replay never
        // sees a journey without its owner. A journey the fleet cannot
        // record is not handed out (its appkey would be foreign on every
        // other replica); the claim is released for a retry.
        if let Err(e) = self
            .inner
            .records
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
        self.inner
            .usage
            .caller(caller.name.as_str())
            .journey_created();
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
    fn repeated_appkey(&self, journey: &JourneyRef) {
        self.inner.usage.metrics().record_appkey_repeat();
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
            .records
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
}
