//! Journey references issued by CreateJourney, mapped back to appkeys.
//!
//! A caller may watch a journey by the non-secret reference CreateJourney
//! returned instead of by its appkey. Reading the result still needs the
//! appkey, so this gateway remembers, for a bounded time and number, the
//! appkeys of the journeys it created. A reference it did not issue (or
//! has forgotten) is `JOURNEY_UNKNOWN`: the caller watches by appkey.
//!
//! Each entry also names the journey's owner (the caller that created it):
//! with the appkey, that is the record every later call on the journey is
//! checked against ([`JourneyRecord`], the same record the fleet's
//! directory shares).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use crate::cluster::JourneyRecord;
use crate::domain::{Appkey, CallerName, JourneyRef};
use crate::ttl::TtlMap;

/// Bounded JourneyRef -> [`JourneyRecord`] map with a TTL. Cheap to clone
/// (shared).
#[derive(Clone)]
pub struct JourneyDirectory {
    inner: Arc<Mutex<TtlMap<JourneyRef, JourneyRecord>>>,
}

impl JourneyDirectory {
    /// A directory whose entries live `ttl` and of which at most
    /// `max_entries` are held (the oldest is forgotten first).
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(TtlMap::new(ttl, max_entries))),
        }
    }

    /// Remembers the journey of `appkey`, with no owner, and returns its
    /// reference.
    pub fn register(&self, appkey: &Appkey) -> JourneyRef {
        self.register_owned(appkey, None)
    }

    /// Remembers the journey of `appkey` created by `owner` (CreateJourney
    /// calls this) and returns its reference.
    pub fn register_owned(&self, appkey: &Appkey, owner: Option<CallerName>) -> JourneyRef {
        let journey = JourneyRef::from_appkey(appkey);
        let record = JourneyRecord {
            appkey: appkey.clone(),
            owner,
        };
        self.lock().insert(journey.clone(), record, Instant::now());
        journey
    }

    /// Remembers `record`, which the fleet's directory gave for `journey`
    /// (another replica created it), as long as a journey created here.
    pub fn remember(&self, journey: &JourneyRef, record: JourneyRecord) {
        self.lock().insert(journey.clone(), record, Instant::now());
    }

    /// The appkey of a remembered journey.
    pub fn resolve(&self, journey: &JourneyRef) -> Option<Appkey> {
        self.record(journey).map(|r| r.appkey)
    }

    /// The record of a remembered journey.
    pub fn record(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        self.lock().get(journey, Instant::now()).cloned()
    }

    /// Journeys remembered (expired entries are dropped first).
    pub fn len(&self) -> usize {
        let mut map = self.lock();
        map.purge(Instant::now());
        map.len()
    }

    /// True when no journey is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TtlMap<JourneyRef, JourneyRecord>> {
        // The map holds no invariant a panicking holder could break.
        crate::sync::lock(&self.inner)
    }
}

impl std::fmt::Debug for JourneyDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JourneyDirectory")
            .field("entries", &self.lock().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_reference_resolves_to_its_appkey() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 10);
        let key = Appkey::new("appkey-1");
        let r = dir.register(&key);
        assert_eq!(r, JourneyRef::from_appkey(&key));
        assert_eq!(dir.resolve(&r), Some(key));
        assert_eq!(
            dir.resolve(&JourneyRef::from_appkey(&Appkey::new("other"))),
            None
        );
    }

    #[test]
    fn a_record_names_its_owner() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 10);
        let key = Appkey::new("appkey-1");
        let r = dir.register_owned(&key, Some(CallerName::new("onboarding")));
        let record = dir.record(&r).expect("remembered");
        assert_eq!(record.owner, Some(CallerName::new("onboarding")));
        assert_eq!(
            dir.record(&dir.register(&Appkey::new("k2"))).unwrap().owner,
            None
        );
    }

    #[test]
    fn the_directory_forgets_the_oldest_journey_when_full() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 2);
        let refs: Vec<_> = (0..3)
            .map(|i| dir.register(&Appkey::new(format!("k{i}"))))
            .collect();
        assert_eq!(dir.len(), 2);
        assert_eq!(dir.resolve(&refs[0]), None);
        assert!(dir.resolve(&refs[2]).is_some());
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let dir = JourneyDirectory::new(Duration::ZERO, 10);
        let r = dir.register(&Appkey::new("k"));
        assert_eq!(dir.resolve(&r), None);
        assert!(dir.is_empty());
    }

    #[test]
    fn debug_shows_a_count_not_appkeys() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 10);
        dir.register(&Appkey::new("canary-appkey"));
        let s = format!("{dir:?}");
        assert!(!s.contains("canary"), "{s}");
    }
}
