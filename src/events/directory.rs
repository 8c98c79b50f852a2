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
//!
//! In a fleet it also remembers, for `[watch] unknown_ttl_secs` (default
//! 30 s), the references the fleet's directory said it does not hold: an
//! appkey this gateway did not issue (accepted foreign, or refused) then
//! costs one Redis read per replica and interval, not one per call, and a
//! flood of made-up appkeys cannot turn into as many Redis reads. This is
//! safe because a reference is derived from a vendor-issued appkey, which
//! a caller learns from CreateJourney only after the journey is in the
//! fleet's directory; a journey registered on this replica is found first
//! whatever was remembered.

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
    inner: Arc<Mutex<Entries>>,
}

struct Entries {
    known: TtlMap<JourneyRef, JourneyRecord>,
    /// References the fleet's directory said it does not hold (`None`:
    /// none is remembered).
    unknown: Option<TtlMap<JourneyRef, ()>>,
}

/// What this replica's directory says of a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A journey created here or remembered from the fleet.
    Known(JourneyRecord),
    /// The fleet's directory did not hold it a moment ago.
    Unknown,
    /// Not remembered either way: the fleet's directory decides.
    Ask,
}

impl JourneyDirectory {
    /// A directory whose entries live `ttl` and of which at most
    /// `max_entries` are held (the oldest is forgotten first). It
    /// remembers no unknown reference until [`JourneyDirectory::remembering_unknown`].
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Entries {
                known: TtlMap::new(ttl, max_entries),
                unknown: None,
            })),
        }
    }

    /// Remembers references the fleet said it does not hold for `ttl`
    /// (zero: never), at most `max_entries` of them.
    pub fn remembering_unknown(self, ttl: Duration, max_entries: usize) -> Self {
        self.lock().unknown = (!ttl.is_zero()).then(|| TtlMap::new(ttl, max_entries));
        self
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
        self.remember(&journey, record);
        journey
    }

    /// Remembers `record`, which the fleet's directory gave for `journey`
    /// (another replica created it), as long as a journey created here.
    pub fn remember(&self, journey: &JourneyRef, record: JourneyRecord) {
        let mut entries = self.lock();
        if let Some(unknown) = &mut entries.unknown {
            unknown.remove_if(journey, |_| true);
        }
        entries
            .known
            .insert(journey.clone(), record, Instant::now());
    }

    /// Remembers that the fleet's directory does not hold `journey`.
    pub fn remember_unknown(&self, journey: &JourneyRef) {
        if let Some(unknown) = &mut self.lock().unknown {
            unknown.insert(journey.clone(), (), Instant::now());
        }
    }

    /// What this replica knows of `journey`, in one lock.
    pub fn lookup(&self, journey: &JourneyRef) -> Lookup {
        let now = Instant::now();
        let mut entries = self.lock();
        if let Some(record) = entries.known.get(journey, now) {
            return Lookup::Known(record.clone());
        }
        match entries.unknown.as_ref().and_then(|u| u.peek(journey, now)) {
            Some(()) => Lookup::Unknown,
            None => Lookup::Ask,
        }
    }

    /// The appkey of a remembered journey.
    pub fn resolve(&self, journey: &JourneyRef) -> Option<Appkey> {
        self.record(journey).map(|r| r.appkey)
    }

    /// The record of a remembered journey.
    pub fn record(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        self.lock().known.get(journey, Instant::now()).cloned()
    }

    /// Journeys remembered (expired entries are dropped first).
    pub fn len(&self) -> usize {
        let known = &mut self.lock().known;
        known.purge(Instant::now());
        known.len()
    }

    /// True when no journey is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The map holds no invariant a panicking holder could break.
        crate::sync::lock(&self.inner)
    }
}

impl std::fmt::Debug for JourneyDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JourneyDirectory")
            .field("entries", &self.lock().known.len())
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
    fn an_unknown_reference_is_remembered_until_its_ttl_and_a_registration_wins() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 10)
            .remembering_unknown(Duration::from_secs(30), 10);
        let key = Appkey::new("k");
        let r = JourneyRef::from_appkey(&key);
        assert_eq!(dir.lookup(&r), Lookup::Ask);
        dir.remember_unknown(&r);
        assert_eq!(dir.lookup(&r), Lookup::Unknown);
        dir.register(&key);
        assert!(matches!(dir.lookup(&r), Lookup::Known(_)));
        // A registration forgets the unknown mark, so nothing stale
        // remains once the record itself expires.
        assert_eq!(dir.lock().unknown.as_ref().map(TtlMap::len), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_references_expire_and_are_bounded() {
        let off = JourneyDirectory::new(Duration::from_secs(60), 10);
        let r = JourneyRef::from_appkey(&Appkey::new("k"));
        off.remember_unknown(&r);
        assert_eq!(off.lookup(&r), Lookup::Ask, "not remembered by default");

        let dir = JourneyDirectory::new(Duration::from_secs(60), 10)
            .remembering_unknown(Duration::from_secs(30), 10);
        dir.remember_unknown(&r);
        tokio::time::advance(Duration::from_secs(29)).await;
        assert_eq!(dir.lookup(&r), Lookup::Unknown);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(dir.lookup(&r), Lookup::Ask, "the fleet is asked again");

        let dir = JourneyDirectory::new(Duration::from_secs(60), 10)
            .remembering_unknown(Duration::from_secs(30), 2);
        let refs: Vec<_> = (0..3)
            .map(|i| JourneyRef::from_appkey(&Appkey::new(format!("k{i}"))))
            .collect();
        refs.iter().for_each(|r| dir.remember_unknown(r));
        assert_eq!(dir.lookup(&refs[0]), Lookup::Ask, "the oldest is forgotten");
        assert_eq!(dir.lookup(&refs[2]), Lookup::Unknown);
    }

    #[test]
    fn debug_shows_a_count_not_appkeys() {
        let dir = JourneyDirectory::new(Duration::from_secs(60), 10);
        dir.register(&Appkey::new("canary-appkey"));
        let s = format!("{dir:?}");
        assert!(!s.contains("canary"), "{s}");
    }
}
