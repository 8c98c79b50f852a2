//! The journey records of one process, in memory: a single replica's
//! whole store, and a fleet replica's cache in front of Redis.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use super::{JourneyStore, lives, now_unix};
use crate::{
    cluster::{
        error::ClusterError,
        future::{BoxFuture, ready},
    },
    domain::{CallerName, JourneyRecord, JourneyRef},
    ttl::TtlMap,
};

/// Journey records by reference, for their retention, at most
/// `max_entries`. Cheap to clone (shared).
#[derive(Clone)]
pub struct MemoryJourneys {
    inner: Arc<Mutex<Entries>>,
    retention_secs: i64,
    max_entries: usize,
    /// A single replica's whole store refuses new journeys when full; a
    /// cache forgets its oldest (Redis still holds it).
    whole: bool,
}

struct Entries {
    known: TtlMap<JourneyRef, JourneyRecord>,
    /// References the fleet said it holds no record of (`None`: none is
    /// remembered).
    unknown: Option<TtlMap<JourneyRef, ()>>,
    /// Each owner's live records, as their creation times in the order
    /// they were registered (a whole store only: a cache's owners are
    /// counted by the fleet).
    owners: HashMap<CallerName, VecDeque<i64>>,
}

impl Entries {
    /// How many live records `owner` holds at `now` (unix seconds),
    /// forgetting those past `retention_secs`.
    fn owned(&mut self, owner: &CallerName, retention_secs: i64, now: i64) -> usize {
        let Some(created) = self.owners.get_mut(owner) else {
            return 0;
        };
        while created
            .front()
            .is_some_and(|at| at.saturating_add(retention_secs) <= now)
        {
            created.pop_front();
        }
        if created.is_empty() {
            self.owners.remove(owner);
            return 0;
        }
        created.len()
    }
}

/// What the memory tier says of a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lookup {
    /// A record held here.
    Known(JourneyRecord),
    /// The fleet held no record of it a moment ago.
    Unknown,
    /// Not remembered either way: the fleet decides.
    Ask,
}

impl MemoryJourneys {
    /// A single replica's whole store: records live `retention`; past
    /// `max_entries` new journeys are refused.
    pub fn new(retention: Duration, max_entries: usize) -> Self {
        Self::build(retention, max_entries, true)
    }

    /// A fleet replica's cache: the oldest record is forgotten when full,
    /// and references the fleet does not hold are remembered for
    /// `unknown_ttl` (zero: never).
    pub(super) fn cache(retention: Duration, max_entries: usize, unknown_ttl: Duration) -> Self {
        let cache = Self::build(retention, max_entries, false);
        cache.lock().unknown =
            (!unknown_ttl.is_zero()).then(|| TtlMap::new(unknown_ttl, max_entries));
        cache
    }

    fn build(retention: Duration, max_entries: usize, whole: bool) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Entries {
                known: TtlMap::new(retention, max_entries),
                unknown: None,
                owners: HashMap::new(),
            })),
            retention_secs: i64::try_from(retention.as_secs()).unwrap_or(i64::MAX),
            max_entries: max_entries.max(1),
            whole,
        }
    }

    /// Holds `record` (created here, or read from the fleet).
    pub(super) fn remember(&self, journey: &JourneyRef, record: JourneyRecord) {
        let mut entries = self.lock();
        if let Some(unknown) = &mut entries.unknown {
            unknown.remove_if(journey, |_| true);
        }
        entries
            .known
            .insert(journey.clone(), record, Instant::now());
    }

    /// Remembers that the fleet holds no record of `journey`.
    pub(super) fn remember_unknown(&self, journey: &JourneyRef) {
        if let Some(unknown) = &mut self.lock().unknown {
            unknown.insert(journey.clone(), (), Instant::now());
        }
    }

    /// What this tier knows of `journey`, in one lock; a record past its
    /// retention is not known.
    pub(super) fn lookup(&self, journey: &JourneyRef) -> Lookup {
        let now = Instant::now();
        let mut entries = self.lock();
        if let Some(record) = entries.known.get(journey, now)
            && lives(record, self.retention_secs, now_unix())
        {
            return Lookup::Known(record.clone());
        }
        match entries.unknown.as_ref().and_then(|u| u.peek(journey, now)) {
            Some(()) => Lookup::Unknown,
            None => Lookup::Ask,
        }
    }

    /// Records held (expired ones dropped first).
    pub fn len(&self) -> usize {
        let known = &mut self.lock().known;
        known.purge(Instant::now());
        known.len()
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The maps hold no invariant a panicking holder could break.
        crate::sync::lock(&self.inner)
    }
}

impl MemoryJourneys {
    /// Why a new record of `owner` could not be held now (a whole store's
    /// bounds), under the lock the caller holds.
    fn refusal(
        &self,
        entries: &mut Entries,
        owner: Option<&CallerName>,
        share: usize,
    ) -> Option<ClusterError> {
        if !self.whole {
            return None;
        }
        entries.known.purge(Instant::now());
        if entries.known.len() >= self.max_entries {
            return Some(ClusterError::Full);
        }
        let owned = owner.map_or(0, |o| entries.owned(o, self.retention_secs, now_unix()));
        (owned >= share).then_some(ClusterError::OwnerFull)
    }

    /// Inserts `record` unless a live one holds `journey` (`Taken`), or a
    /// whole store's bounds refuse it; one lock, so that two journeys
    /// created at once at a bound cannot both pass it.
    pub(super) fn insert_once(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
        share: usize,
    ) -> Result<(), ClusterError> {
        let now = Instant::now();
        let mut entries = self.lock();
        if entries
            .known
            .get(journey, now)
            .is_some_and(|held| lives(held, self.retention_secs, now_unix()))
        {
            return Err(ClusterError::Taken);
        }
        if let Some(refused) = self.refusal(&mut entries, record.owner.as_ref(), share) {
            return Err(refused);
        }
        if let Some(unknown) = &mut entries.unknown {
            unknown.remove_if(journey, |_| true);
        }
        if self.whole
            && let Some(owner) = &record.owner
        {
            entries
                .owners
                .entry(owner.clone())
                .or_default()
                .push_back(record.created_unix);
        }
        entries.known.insert(journey.clone(), record.clone(), now);
        Ok(())
    }
}

impl MemoryJourneys {
    /// Forgets `journey`'s record, if it still is `record` (its insertion
    /// failed in the tier behind this one): the record and its place in
    /// its owner's share.
    pub(super) fn forget(&self, journey: &JourneyRef, record: &JourneyRecord) {
        let mut entries = self.lock();
        if !entries.known.remove_if(journey, |held| held == record) {
            return;
        }
        if let Some(owner) = &record.owner
            && let Some(created) = entries.owners.get_mut(owner)
            && let Some(at) = created.iter().rposition(|at| *at == record.created_unix)
        {
            created.remove(at);
        }
    }
}

impl JourneyStore for MemoryJourneys {
    fn can_record(
        &self,
        owner: Option<&CallerName>,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        ready(match self.refusal(&mut self.lock(), owner, share) {
            Some(refused) => Err(refused),
            None => Ok(()),
        })
    }

    fn register(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        ready(self.insert_once(journey, record, share))
    }

    fn owned(&self, owner: &CallerName) -> Option<usize> {
        self.whole
            .then(|| self.lock().owned(owner, self.retention_secs, now_unix()))
    }

    fn find(&self, journey: &JourneyRef) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>> {
        ready(Ok(self.held(journey)))
    }

    fn held(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        match self.lookup(journey) {
            Lookup::Known(record) => Some(record),
            Lookup::Unknown | Lookup::Ask => None,
        }
    }

    fn retention(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.retention_secs).unwrap_or(0))
    }
}

impl std::fmt::Debug for MemoryJourneys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryJourneys")
            .field("entries", &self.lock().known.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Appkey, CallerName};

    fn record(appkey: &str) -> (JourneyRef, JourneyRecord) {
        let appkey = Appkey::new(appkey);
        let journey = JourneyRef::from_appkey(&appkey);
        let record = JourneyRecord::new(appkey, Some(CallerName::new("a")), now_unix());
        (journey, record)
    }

    #[tokio::test]
    async fn a_whole_store_refuses_new_journeys_when_full_and_forgets_none() {
        let store = MemoryJourneys::new(Duration::from_secs(60), 2);
        let records: Vec<_> = (0..3).map(|i| record(&format!("k{i}"))).collect();
        for (journey, record) in &records[..2] {
            store.register(journey, record, usize::MAX).await.unwrap();
        }
        assert_eq!(
            store.can_record(None, usize::MAX).await,
            Err(ClusterError::Full)
        );
        let (journey, third) = &records[2];
        assert_eq!(
            store.register(journey, third, usize::MAX).await,
            Err(ClusterError::Full)
        );
        assert_eq!(store.held(&records[0].0), Some(records[0].1.clone()));
        assert!(!format!("{store:?}").contains("k0"));
    }

    #[tokio::test]
    async fn a_cache_forgets_its_oldest_and_remembers_unknown_references() {
        let cache = MemoryJourneys::cache(Duration::from_secs(60), 1, Duration::from_secs(30));
        let (j0, r0) = record("k0");
        let (j1, r1) = record("k1");
        cache.remember(&j0, r0);
        cache.remember(&j1, r1.clone());
        assert_eq!(cache.lookup(&j0), Lookup::Ask);
        assert_eq!(cache.lookup(&j1), Lookup::Known(r1));
        cache.remember_unknown(&j0);
        assert_eq!(cache.lookup(&j0), Lookup::Unknown);
    }

    #[tokio::test]
    async fn a_live_record_is_registered_once_and_its_first_owner_keeps_it() {
        let store = MemoryJourneys::new(Duration::from_secs(60), 10);
        let (journey, first) = record("k");
        store.register(&journey, &first, 5).await.unwrap();
        let mut second = first.clone();
        second.owner = Some(CallerName::new("mallory"));
        assert_eq!(
            store.register(&journey, &second, 5).await,
            Err(ClusterError::Taken)
        );
        assert_eq!(store.held(&journey), Some(first));
    }

    #[tokio::test]
    async fn an_owner_at_its_share_is_refused_and_others_are_not() {
        let store = MemoryJourneys::new(Duration::from_secs(60), 100);
        let owned = |name: &str, i: usize| {
            let appkey = Appkey::new(format!("{name}{i}"));
            let record =
                JourneyRecord::new(appkey.clone(), Some(CallerName::new(name)), now_unix());
            (JourneyRef::from_appkey(&appkey), record)
        };
        for i in 0..3 {
            let (journey, record) = owned("mallory", i);
            store.register(&journey, &record, 3).await.unwrap();
        }
        let mallory = CallerName::new("mallory");
        assert_eq!(
            store.can_record(Some(&mallory), 3).await,
            Err(ClusterError::OwnerFull)
        );
        let (journey, record) = owned("mallory", 3);
        assert_eq!(
            store.register(&journey, &record, 3).await,
            Err(ClusterError::OwnerFull)
        );
        assert_eq!(store.owned(&mallory), Some(3));
        let alice = CallerName::new("alice");
        assert_eq!(store.owned(&alice), Some(0));
        assert_eq!(store.can_record(Some(&alice), 3).await, Ok(()));
        let (journey, record) = owned("alice", 0);
        assert_eq!(store.register(&journey, &record, 3).await, Ok(()));
    }

    #[tokio::test]
    async fn an_owner_s_records_past_their_retention_leave_its_share() {
        let store = MemoryJourneys::new(Duration::from_secs(60), 100);
        let mallory = CallerName::new("mallory");
        let appkey = Appkey::new("old");
        let old = JourneyRecord::new(appkey.clone(), Some(mallory.clone()), now_unix() - 61);
        store
            .register(&JourneyRef::from_appkey(&appkey), &old, 1)
            .await
            .unwrap();
        assert_eq!(store.can_record(Some(&mallory), 1).await, Ok(()));
    }

    #[test]
    fn a_record_past_its_retention_is_not_known_whatever_holds_it() {
        let store = MemoryJourneys::new(Duration::from_secs(60), 10);
        let (journey, mut old) = record("k");
        old.created_unix -= 61;
        store.remember(&journey, old);
        assert_eq!(store.held(&journey), None);
    }
}
