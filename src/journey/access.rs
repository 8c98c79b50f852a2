//! Whose journey a call names: one lookup of the journey's record per
//! call decides both whether this gateway issued the journey (an appkey it
//! did not issue is refused before any vendor call or billing) and
//! whether the caller may act on it (OWASP API1: object-level
//! authorization; a `journeys = "own"` caller acts only on the journeys it
//! created).
//!
//! The record ([`JourneyRecord`], `cluster::journeys`) lives `[journeys]
//! retention_hours` (default 24 h, never less than the appkey's validity
//! or the idempotency window): while it lives, an appkey issued here is
//! checked against its owner on every call, whatever `[journeys]
//! accept_foreign_appkeys` says; that setting applies only to appkeys
//! this gateway never issued (or whose record has passed its retention).
//! In a fleet the lookup reads this replica's records, then Redis; while
//! Redis is down, a journey this replica does not hold is served to
//! `journeys = "any"` callers (the open caller among them) and refused
//! `UNAVAILABLE`/`CLUSTER_UNAVAILABLE` to `own` callers. Refusals name no
//! value (no appkey, reference or owner).

use std::sync::Arc;

use crate::{
    Error,
    cluster::{ClusterError, JourneyStore},
    domain::{Appkey, Caller, JourneyRecord, JourneyRef, JourneyScope},
};

/// What the records said of a journey the caller may act on.
#[derive(Debug)]
pub enum Issued {
    /// This gateway created the journey.
    Here(JourneyRecord),
    /// An appkey not issued here, accepted by `[journeys]
    /// accept_foreign_appkeys`; billed to the caller's first operator
    /// profile, else the default one.
    Foreign,
    /// Not known to this replica while the fleet's records are out of
    /// reach, for a `journeys = "any"` caller: served, billed to the
    /// default profile.
    Unverified,
}

/// The journey checks: issued here, and the caller's to touch. Cheap to
/// clone.
#[derive(Clone)]
pub struct JourneyAccess {
    journeys: Arc<dyn JourneyStore>,
    accept_foreign: bool,
}

impl JourneyAccess {
    /// Checks against `journeys`; appkeys it holds no record of are
    /// refused unless `accept_foreign`.
    pub fn new(journeys: Arc<dyn JourneyStore>, accept_foreign: bool) -> Self {
        Self {
            journeys,
            accept_foreign,
        }
    }

    /// Whether `caller` may act on the journey of `appkey`: `Here` when
    /// this gateway issued it and the caller may touch it, `Foreign` when
    /// foreign appkeys are accepted; else `NOT_FOUND`/`APPKEY_UNKNOWN` or
    /// `PERMISSION_DENIED`/`JOURNEY_NOT_OWNED`.
    pub async fn appkey(&self, caller: &Caller, appkey: &Appkey) -> Result<Issued, Error> {
        let journey = JourneyRef::from_appkey(appkey);
        let found = match self.journeys.find(&journey).await {
            // The fleet's records are out of reach and this replica does
            // not hold the journey: an `any` caller, whose calls no owner
            // limits, is served (core RPCs outlive a Redis outage); an
            // `own` caller cannot be checked and is refused, retryable.
            Err(ClusterError::Unavailable) if caller.journeys == JourneyScope::Any => {
                return Ok(Issued::Unverified);
            }
            found => found.map_err(|_| Error::ClusterUnavailable)?,
        };
        match found {
            Some(record) => Self::owned(caller, record).map(Issued::Here),
            None if self.accept_foreign => Ok(Issued::Foreign),
            None => Err(Error::AppkeyUnknown),
        }
    }

    /// The record of the journey a caller names by reference, if the
    /// caller may touch it; a reference never resolves to a journey of
    /// another owner, whatever `accept_foreign` says.
    pub async fn reference(
        &self,
        caller: &Caller,
        journey: &JourneyRef,
    ) -> Result<JourneyRecord, Error> {
        let found = self
            .journeys
            .find(journey)
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        match found {
            Some(record) => Self::owned(caller, record),
            None => Err(Error::JourneyUnknown),
        }
    }

    fn owned(caller: &Caller, record: JourneyRecord) -> Result<JourneyRecord, Error> {
        match caller.may_touch(record.owner.as_ref()) {
            true => Ok(record),
            false => Err(Error::JourneyNotOwned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        cluster::{MemoryJourneys, journeys::now_unix},
        domain::{CallerLimits, CallerName, Permissions, ProfileGrant, ResultView},
    };

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
        let store = MemoryJourneys::new(std::time::Duration::from_secs(60), 10);
        let key = Appkey::new("appkey-of-a");
        let journey = JourneyRef::from_appkey(&key);
        let record = JourneyRecord::new(key.clone(), Some(CallerName::new("a")), now_unix());
        store.register(&journey, &record, usize::MAX).await.unwrap();
        let access = JourneyAccess::new(Arc::new(store), false);
        let a = caller("a", JourneyScope::Own);
        let b = caller("b", JourneyScope::Own);
        let any = caller("c", JourneyScope::Any);
        assert!(matches!(access.appkey(&a, &key).await, Ok(Issued::Here(_))));
        assert!(matches!(
            access.appkey(&any, &key).await,
            Ok(Issued::Here(_))
        ));
        assert!(matches!(
            access.appkey(&b, &key).await,
            Err(Error::JourneyNotOwned)
        ));
        assert!(access.reference(&a, &journey).await.is_ok());
        assert!(matches!(
            access.reference(&b, &journey).await,
            Err(Error::JourneyNotOwned)
        ));
        let stranger = Appkey::new("never-issued");
        assert!(matches!(
            access.appkey(&any, &stranger).await,
            Err(Error::AppkeyUnknown)
        ));
        let lenient = JourneyAccess {
            accept_foreign: true,
            ..access
        };
        assert!(matches!(
            lenient.appkey(&b, &stranger).await,
            Ok(Issued::Foreign)
        ));
        // Issued here: never foreign, whatever accept_foreign says.
        assert!(matches!(
            lenient.appkey(&b, &key).await,
            Err(Error::JourneyNotOwned)
        ));
        assert!(matches!(
            lenient
                .reference(&b, &JourneyRef::from_appkey(&stranger))
                .await,
            Err(Error::JourneyUnknown)
        ));
    }
}
