//! The journey records of a single replica on the embedded store, behind
//! its memory tier: the records survive a restart, and every read is
//! answered from memory as without the store.
//!
//! Table `journeys`: the journey reference -> the record
//! ([`JourneyRecord::encode`]), sealed by the engine with the table and
//! the reference as associated data, expiring with `[journeys]
//! retention_hours` counted from creation. The key is a reference (a hash
//! of the appkey), never the appkey.
//!
//! A record is in memory first (so that its owner's share and the store's
//! bound are checked and taken under one lock, as in memory alone), then
//! in the file; `register` answers once the file holds it, so a journey's
//! record is durable before its appkey reaches anyone. A record the file
//! refuses is taken out of memory again.

use std::time::Duration;

use super::{JourneyStore, MemoryJourneys, lives, now_unix};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table},
        embedded_tier::{read_failed, refusal},
        error::ClusterError,
        future::{BoxFuture, ready},
    },
    domain::{CallerName, JourneyRecord, JourneyRef},
};

/// The journey records' table.
const JOURNEYS: Table = Table::new("journeys");

/// What one more journey may cost in the file, checked before its appkey
/// is bought: its record, its idempotency record, its binding and marks,
/// at the engine's measured cost per record (about 950 bytes of a
/// 300-byte value), rounded up.
const JOURNEY_ROOM: u64 = 4096;

/// A single replica's journey records, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedJourneys {
    memory: MemoryJourneys,
    store: Embedded,
    retention: Duration,
    /// Memory holds every live record of the file (all were read back at
    /// open, within the bound), so a record memory does not hold does
    /// not exist: an appkey not issued here costs no file read.
    complete: bool,
}

impl EmbeddedJourneys {
    /// The records of `store`, kept `retention`; at most `max_entries`
    /// live at once, as in memory. Reads the live records back into
    /// memory (the newest `max_entries`, should the file hold more).
    pub fn open(store: Embedded, retention: Duration, max_entries: usize) -> Self {
        let memory = MemoryJourneys::new(retention, max_entries);
        let retention_secs = i64::try_from(retention.as_secs()).unwrap_or(i64::MAX);
        let now = now_unix();
        let mut complete = true;
        let mut records: Vec<_> = match store.scan(JOURNEYS, b"", usize::MAX) {
            Ok(found) => found
                .into_iter()
                .filter_map(|(key, record)| {
                    let journey = JourneyRef::parse(std::str::from_utf8(&key).ok()?)?;
                    let text = std::str::from_utf8(&record.value).ok()?;
                    let record = JourneyRecord::decode(text)?;
                    (JourneyRef::from_appkey(&record.appkey) == journey
                        && lives(&record, retention_secs, now))
                    .then_some((journey, record))
                })
                .collect(),
            Err(e) => {
                read_failed(&e);
                complete = false;
                Vec::new()
            }
        };
        // Oldest first, as they were registered: each owner's share
        // counts its records in creation order.
        records.sort_by_key(|(_, record)| record.created_unix);
        let skip = records.len().saturating_sub(max_entries);
        complete &= skip == 0;
        for (journey, record) in records.into_iter().skip(skip) {
            // Each was registered once: none is taken or over a share.
            let _ = memory.insert_once(&journey, &record, usize::MAX);
        }
        Self {
            memory,
            store,
            retention,
            complete,
        }
    }

    fn retention_secs(&self) -> i64 {
        i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX)
    }

    /// The record of `journey` in the file, when memory may not hold it
    /// (the file held more than memory's bound at open, or could not be
    /// read back whole).
    fn read(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        if self.complete {
            return None;
        }
        let found = self
            .store
            .get(JOURNEYS, journey.as_str().as_bytes())
            .map_err(|e| read_failed(&e))
            .ok()??;
        let record = JourneyRecord::decode(std::str::from_utf8(&found.value).ok()?)?;
        (JourneyRef::from_appkey(&record.appkey) == *journey
            && lives(&record, self.retention_secs(), now_unix()))
        .then_some(record)
    }
}

impl JourneyStore for EmbeddedJourneys {
    fn can_record(
        &self,
        owner: Option<&CallerName>,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        if let Err(full) = self.store.check_room(JOURNEY_ROOM) {
            return ready(Err(refusal(full)));
        }
        self.memory.can_record(owner, share)
    }

    fn register(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        if let Err(refused) = self.memory.insert_once(journey, record, share) {
            return ready(Err(refused));
        }
        let this = self.clone();
        let journey = journey.clone();
        let record = record.clone();
        Box::pin(async move {
            let expires =
                Expiry::at_unix_secs(record.created_unix.saturating_add(this.retention_secs()));
            let text = zeroize::Zeroizing::new(record.encode());
            let written = this
                .store
                .insert(
                    JOURNEYS,
                    journey.as_str().as_bytes(),
                    text.as_bytes(),
                    expires,
                )
                .await;
            if let Err(e) = written {
                this.memory.forget(&journey, &record);
                return Err(refusal(e));
            }
            Ok(())
        })
    }

    fn find(&self, journey: &JourneyRef) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>> {
        ready(Ok(self.held(journey).or_else(|| self.read(journey))))
    }

    fn owned(&self, owner: &CallerName) -> Option<usize> {
        self.memory.owned(owner)
    }

    fn held(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        self.memory.held(journey)
    }

    fn retention(&self) -> Duration {
        self.retention
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        cluster::embedded::StoreConfig,
        domain::{Appkey, CallerName},
    };

    fn config(dir: &tempfile::TempDir) -> StoreConfig {
        StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        }
    }

    fn record(appkey: &str, owner: &str) -> (JourneyRef, JourneyRecord) {
        let appkey = Appkey::new(appkey);
        let journey = JourneyRef::from_appkey(&appkey);
        let record = JourneyRecord::new(appkey, Some(CallerName::new(owner)), now_unix());
        (journey, record)
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[tokio::test]
    async fn a_registered_journey_is_found_with_its_owner_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (journey, first) = record("appkey-1", "alice");
        {
            let store = Embedded::open(&config(&dir), None).unwrap();
            let journeys = EmbeddedJourneys::open(store, DAY, 10);
            journeys.register(&journey, &first, 5).await.unwrap();
        }
        let store = Embedded::open(&config(&dir), None).unwrap();
        let journeys = EmbeddedJourneys::open(store, DAY, 10);
        assert_eq!(journeys.held(&journey), Some(first.clone()));
        assert_eq!(journeys.owned(&CallerName::new("alice")), Some(1));
        // Still registered once: its first owner keeps it.
        let (_, mut second) = record("appkey-1", "mallory");
        second.created_unix = first.created_unix;
        assert_eq!(
            journeys.register(&journey, &second, 5).await,
            Err(ClusterError::Taken)
        );
    }

    #[tokio::test]
    async fn a_store_at_max_bytes_refuses_new_journeys_and_keeps_the_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let small = StoreConfig {
            max_bytes: 1 << 20,
            ..config(&dir)
        };
        let store = Embedded::open(&small, None).unwrap();
        let journeys = EmbeddedJourneys::open(store, DAY, 1_000_000);
        let mut kept = Vec::new();
        let refused = loop {
            let (journey, record) = record(&format!("appkey-{}", kept.len()), "alice");
            match journeys.can_record(None, usize::MAX).await {
                Ok(()) => {}
                Err(e) => break e,
            }
            match journeys.register(&journey, &record, usize::MAX).await {
                Ok(()) => kept.push((journey, record)),
                Err(e) => break e,
            }
        };
        assert_eq!(refused, ClusterError::StoreFull);
        assert!(!kept.is_empty());
        for (journey, record) in &kept {
            assert_eq!(journeys.find(journey).await, Ok(Some(record.clone())));
        }
    }
}
