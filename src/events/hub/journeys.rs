//! The journeys the hub knows: this replica's directory of the journeys
//! it created or was told of, and the fleet's behind it.

use super::JourneyHub;
use crate::{
    Error,
    cluster::JourneyRecord,
    domain::{Appkey, CallerName, JourneyRef},
    events::directory::{JourneyDirectory, Lookup},
};

impl JourneyHub {
    /// The directory CreateJourney registers new journeys in (shared with
    /// the hub: clone it into the journey service).
    pub fn directory(&self) -> &JourneyDirectory {
        &self.inner.directory
    }

    /// Shorthand for `directory().register(appkey)`.
    pub fn register(&self, appkey: &Appkey) -> JourneyRef {
        self.inner.directory.register(appkey)
    }

    /// [`JourneyHub::register`] with its `owner` (`None`: the open caller),
    /// remembered by the fleet too (at most the cluster's command timeout;
    /// unshared when Redis is down, with a warning).
    pub async fn register_shared(&self, appkey: &Appkey, owner: Option<CallerName>) -> JourneyRef {
        let journey = self.inner.directory.register_owned(appkey, owner.clone());
        let shared = &self.inner.shared;
        if shared.is_fleet() {
            let record = JourneyRecord {
                appkey: appkey.clone(),
                owner,
            };
            if shared.remember_journey(&journey, &record).await.is_err() {
                tracing::warn!(journey = %journey, "journey reference not shared with the fleet: watch it on this replica or by appkey");
            }
        }
        journey
    }

    /// The record of `journey`: this replica's directory, else the
    /// fleet's (`Err`: the fleet could not be asked). A record the fleet
    /// gives is kept in this replica's directory: a journey's record never
    /// changes, and the journey's later calls on this replica (about
    /// (N-1)/N of them behind a balancer over N replicas) then cost no
    /// Redis read (docs/capacity.md). So does the fleet's "no such
    /// journey", for `[watch] unknown_ttl_secs` (see
    /// [`crate::events::directory`] for why that is safe).
    pub async fn find_journey(&self, journey: &JourneyRef) -> Result<Option<JourneyRecord>, Error> {
        let shared = &self.inner.shared;
        let directory = &self.inner.directory;
        match directory.lookup(journey) {
            Lookup::Known(record) => Ok(Some(record)),
            Lookup::Unknown => Ok(None),
            Lookup::Ask if !shared.is_fleet() => Ok(None),
            Lookup::Ask => {
                let found =
                    (shared.find_journey(journey).await).map_err(|_| Error::ClusterUnavailable)?;
                match &found {
                    Some(record) => directory.remember(journey, record.clone()),
                    None => directory.remember_unknown(journey),
                }
                Ok(found)
            }
        }
    }
}
