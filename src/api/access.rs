//! Whose journey a call names: one directory lookup per call decides both
//! whether this gateway issued the journey (issue 25: an appkey it did
//! not issue is refused before any vendor call or billing) and whether
//! the caller may act on it (OWASP API1: object-level authorization; a
//! `journeys = "own"` caller acts only on the journeys it created).
//!
//! The lookup reads this replica's journey directory, then the fleet's
//! (Redis), so a journey created on one replica is checked alike on every
//! other. It happens before validation of the rest of the call is acted
//! on: no vendor call, no budget, no result read for a journey the caller
//! may not touch. Refusals name no value (no appkey, reference or owner).
//!
//! A directory entry lives `[watch] directory_ttl_secs` (default 1800 s),
//! and never less than `[upstream] appkey_ttl_secs` (default 300 s; see
//! `server::watch_settings`): an appkey is never refused as foreign while
//! the vendor would still take it. A memory-only gateway forgets its journeys on
//! restart and past `[watch] directory_max_entries`; a fleet falls back to
//! Redis. While Redis is down, a journey this replica does not know is
//! served to `journeys = "any"` callers (the open caller among them) and
//! refused `UNAVAILABLE`/`CLUSTER_UNAVAILABLE` to `own` callers.

use tonic::Extensions;

use super::{
    authorize::refused_in,
    slots::{CallerSlots, Slot},
};
use crate::{
    Error,
    cluster::JourneyRecord,
    domain::{Appkey, Caller, CallerName, JourneyRef, JourneyScope, ProfileGrant},
    events::JourneyHub,
    guard::{BilledOperation, Guard},
};

/// What the directory said of a journey the caller may act on.
#[derive(Debug)]
pub enum Issued {
    /// This gateway created the journey.
    Here(JourneyRecord),
    /// An appkey issued elsewhere, accepted by `[guard]
    /// accept_foreign_appkeys`; billed to the caller's first operator
    /// profile, else the default one.
    Foreign,
    /// Not known to this replica while the fleet's directory is down, for
    /// a `journeys = "any"` caller: served, billed as if issued here.
    Unverified,
}

impl Issued {
    /// Bills `operation` on the journey of `appkey`: to the profile that
    /// created it, or (foreign) to the caller's first profile, else the
    /// default one.
    async fn bill(
        &self,
        guard: &Guard,
        operation: BilledOperation,
        appkey: &Appkey,
        caller: &Caller,
    ) -> Result<(), Error> {
        match self {
            Issued::Here(_) | Issued::Unverified => {
                guard
                    .bill(operation, appkey, Some(caller.name.as_str()))
                    .await
            }
            Issued::Foreign => {
                let profile = match &caller.profiles {
                    ProfileGrant::Only(names) => names.first().map(String::as_str),
                    ProfileGrant::Any => None,
                };
                guard
                    .bill_foreign(operation, profile, Some(caller.name.as_str()))
                    .await
            }
        }
    }
}

/// The owner a journey created by `caller` is recorded with: its name, or
/// none for the open caller of a gateway without `[auth]` (so that, once
/// callers are configured, only `any` callers touch those journeys).
pub fn owner_of(caller: &Caller) -> Option<CallerName> {
    match caller.profiles {
        ProfileGrant::Any => None,
        ProfileGrant::Only(_) => Some(caller.name.clone()),
    }
}

/// The journey checks of the public API (each takes the request's
/// extensions, to count refusals with the auth layer's). Cheap to clone.
#[derive(Clone, Default)]
pub struct JourneyAccess {
    /// The directory; `None` (a service built alone): no journey is known,
    /// so every appkey is foreign.
    hub: Option<JourneyHub>,
    accept_foreign: bool,
    slots: CallerSlots,
}

impl JourneyAccess {
    /// Checks against `hub`'s directory; appkeys it does not hold are
    /// refused unless `accept_foreign`.
    pub fn new(hub: JourneyHub, accept_foreign: bool) -> Self {
        Self {
            hub: Some(hub),
            accept_foreign,
            slots: CallerSlots::default(),
        }
    }

    /// A unary call's slot for `caller`, within its `max_in_flight`; else
    /// `RESOURCE_EXHAUSTED`/`CALLER_LIMIT_REACHED`, counted as a refusal.
    pub fn call_slot(&self, request: &Extensions, caller: &Caller) -> Result<Option<Slot>, Error> {
        self.slots
            .call(caller)
            .inspect_err(|e| refused_in(request, e, "max_in_flight"))
    }

    /// A `WatchJourney` stream's slot for `caller`, within its
    /// `max_watch_streams`.
    pub fn stream_slot(
        &self,
        request: &Extensions,
        caller: &Caller,
    ) -> Result<Option<Slot>, Error> {
        self.slots
            .stream(caller)
            .inspect_err(|e| refused_in(request, e, "max_watch_streams"))
    }

    /// A billed call on the journey of `appkey`: checked as
    /// [`JourneyAccess::appkey`] does, then billed as [`Issued::bill`]
    /// does. One step, so that no call bills an appkey it has not checked.
    pub async fn billed(
        &self,
        request: &Extensions,
        caller: &Caller,
        appkey: &Appkey,
        guard: &Guard,
        operation: BilledOperation,
    ) -> Result<(), Error> {
        self.appkey(request, caller, appkey)
            .await?
            .bill(guard, operation, appkey, caller)
            .await
    }

    /// Whether `caller` may act on the journey of `appkey`: `Here` when
    /// this gateway issued it and the caller may touch it, `Foreign` when
    /// foreign appkeys are accepted; else `NOT_FOUND`/`JOURNEY_UNKNOWN` or
    /// `PERMISSION_DENIED`/`JOURNEY_NOT_OWNED`.
    pub async fn appkey(
        &self,
        request: &Extensions,
        caller: &Caller,
        appkey: &Appkey,
    ) -> Result<Issued, Error> {
        let journey = JourneyRef::from_appkey(appkey);
        let found = match self.find(&journey).await {
            // The fleet's directory is down and this replica does not know
            // the journey: an `any` caller, whose calls no owner limits,
            // is served (core RPCs outlive a Redis outage); an `own`
            // caller cannot be checked and is refused, retryable.
            Err(Error::ClusterUnavailable) if caller.journeys == JourneyScope::Any => {
                return Ok(Issued::Unverified);
            }
            found => found?,
        };
        match found {
            Some(record) => Self::owned(request, caller, record).map(Issued::Here),
            None if self.accept_foreign => Ok(Issued::Foreign),
            None => Err(Error::AppkeyUnknown),
        }
    }

    /// The record of the journey a caller names by reference, if the
    /// caller may touch it; a reference never resolves to a journey of
    /// another owner, whatever `accept_foreign` says.
    pub async fn reference(
        &self,
        request: &Extensions,
        caller: &Caller,
        journey: &JourneyRef,
    ) -> Result<JourneyRecord, Error> {
        match self.find(journey).await? {
            Some(record) => Self::owned(request, caller, record),
            None => Err(Error::JourneyUnknown),
        }
    }

    /// The record of `journey`, if this gateway issued it.
    pub async fn find(&self, journey: &JourneyRef) -> Result<Option<JourneyRecord>, Error> {
        match &self.hub {
            Some(hub) => hub.find_journey(journey).await,
            None => Ok(None),
        }
    }

    fn owned(
        request: &Extensions,
        caller: &Caller,
        record: JourneyRecord,
    ) -> Result<JourneyRecord, Error> {
        if caller.may_touch(record.owner.as_ref()) {
            return Ok(record);
        }
        refused_in(request, &Error::JourneyNotOwned, "journey");
        Err(Error::JourneyNotOwned)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        domain::{CallerLimits, Permissions, ResultView},
        events::{ResultSource, WatchSettings},
        proto::v1::JourneyResult,
    };

    struct NoResults;

    impl ResultSource for NoResults {
        async fn fetch(&self, _: &Appkey) -> Result<JourneyResult, Error> {
            Err(Error::JourneyUnknown)
        }
    }

    fn caller(name: &str, journeys: JourneyScope) -> Caller {
        Caller {
            name: CallerName::new(name),
            permissions: Permissions::all(),
            profiles: ProfileGrant::Only(Arc::from(vec!["p".to_owned()])),
            journeys,
            result_view: ResultView::Full,
            limits: CallerLimits::default(),
        }
    }

    #[tokio::test]
    async fn owners_foreign_appkeys_and_references_are_checked_once() {
        let hub = JourneyHub::new(NoResults, WatchSettings::default());
        let key = Appkey::new("appkey-of-a");
        let journey = hub.register_shared(&key, Some(CallerName::new("a"))).await;
        let access = JourneyAccess::new(hub, false);
        let r = Extensions::new();
        let a = caller("a", JourneyScope::Own);
        let b = caller("b", JourneyScope::Own);
        let any = caller("c", JourneyScope::Any);
        assert!(matches!(
            access.appkey(&r, &a, &key).await,
            Ok(Issued::Here(_))
        ));
        assert!(matches!(
            access.appkey(&r, &any, &key).await,
            Ok(Issued::Here(_))
        ));
        assert!(matches!(
            access.appkey(&r, &b, &key).await,
            Err(Error::JourneyNotOwned)
        ));
        assert!(access.reference(&r, &a, &journey).await.is_ok());
        assert!(matches!(
            access.reference(&r, &b, &journey).await,
            Err(Error::JourneyNotOwned)
        ));
        let stranger = Appkey::new("never-issued");
        assert!(matches!(
            access.appkey(&r, &any, &stranger).await,
            Err(Error::AppkeyUnknown)
        ));
        let lenient = JourneyAccess {
            accept_foreign: true,
            ..access
        };
        assert!(matches!(
            lenient.appkey(&r, &b, &stranger).await,
            Ok(Issued::Foreign)
        ));
        assert!(matches!(
            lenient
                .reference(&r, &b, &JourneyRef::from_appkey(&stranger))
                .await,
            Err(Error::JourneyUnknown)
        ));
    }
}
