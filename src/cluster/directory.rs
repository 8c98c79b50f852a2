//! The fleet's journey directory: journey reference -> what the fleet
//! knows of the journey ([`JourneyRecord`]), so that a `WatchJourney` by
//! reference resolves on any replica.
//!
//! The whole directory is this file: the record, the trait, and both
//! implementations, with the record's Redis encoding
//! (`RedisDirectory::encode` / `decode`). Adding a field to the record
//! (the next one: the journey's creator, for caller ownership) changes
//! this file alone, besides the callers that fill or read it.
//!
//! - [`MemoryDirectory`]: one process. The hub's own directory
//!   (`events::JourneyDirectory`) already holds every journey this process
//!   created, so here it is a no-op: a second copy would add nothing.
//! - [`RedisDirectory`]: `{p}journey:<ref>` holds the appkey, sealed
//!   (AES-256-GCM under `[cluster]`'s secret key, bound to this purpose,
//!   the Redis key and the reference: see `seal::Binding`),
//!   expiring with `[watch] directory_ttl_secs`. Nothing else of the
//!   journey, and nothing personal, goes to Redis.

use std::time::Duration;

use super::{
    BoxFuture, ClusterError, ready,
    redis::{RedisConn, millis},
    seal::Binding,
};
use crate::domain::{Appkey, JourneyRef};

/// What the fleet's directory holds for one journey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JourneyRecord {
    /// The journey's appkey (sealed in Redis).
    pub appkey: Appkey,
}

/// Where a hub remembers the journeys it created for the other replicas.
/// Every method answers within the implementation's command timeout.
pub trait DirectoryStore: Send + Sync + 'static {
    /// True when other replicas share this directory (else every call is
    /// a no-op, and the hub skips them).
    fn is_fleet(&self) -> bool;

    /// Remembers `record` of `journey` for the fleet.
    fn remember_journey(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The record of `journey`, if a replica remembered it.
    fn find_journey(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>>;
}

/// The directory of one process: the hub's own; nothing to share.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryDirectory;

impl DirectoryStore for MemoryDirectory {
    fn is_fleet(&self) -> bool {
        false
    }

    fn remember_journey(
        &self,
        _: &JourneyRef,
        _: &JourneyRecord,
    ) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn find_journey(
        &self,
        _: &JourneyRef,
    ) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>> {
        ready(Ok(None))
    }
}

/// The fleet's journey directory on Redis.
#[derive(Debug, Clone)]
pub struct RedisDirectory {
    conn: RedisConn,
    ttl: Duration,
}

impl RedisDirectory {
    /// The directory on `conn`; entries live `ttl`.
    pub(super) fn new(conn: RedisConn, ttl: Duration) -> Self {
        Self { conn, ttl }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key(&format!("journey:{journey}"))
    }

    /// What a stored value is sealed to: this purpose, its key, the
    /// journey.
    fn binding(&self, journey: &JourneyRef) -> Binding {
        Binding::directory(&self.key(journey), journey)
    }

    /// The record as Redis holds it: the appkey, sealed to its entry.
    fn encode(&self, journey: &JourneyRef, record: &JourneyRecord) -> String {
        self.conn
            .sealer()
            .seal(&self.binding(journey), &record.appkey)
    }

    /// The record of a stored value; `None` (with a warning) when it does
    /// not open.
    fn decode(&self, journey: &JourneyRef, stored: &str) -> Option<JourneyRecord> {
        let opened = self.conn.sealer().open(&self.binding(journey), stored);
        if opened.is_none() {
            tracing::warn!(journey = %journey, "a sealed appkey in Redis did not open (another secret_key, or a value moved from another key?)");
        }
        opened.map(|appkey| JourneyRecord { appkey })
    }
}

impl DirectoryStore for RedisDirectory {
    fn is_fleet(&self) -> bool {
        true
    }

    fn remember_journey(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let conn = self.conn.clone();
        let key = self.key(journey);
        let sealed = self.encode(journey, record);
        let ttl = millis(self.ttl);
        Box::pin(async move {
            conn.check_up()?;
            conn.set_px(key, sealed, ttl).await
        })
    }

    fn find_journey(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>> {
        let this = self.clone();
        let key = self.key(journey);
        let journey = journey.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let stored = this.conn.get(key).await?;
            Ok(stored.and_then(|s| this.decode(&journey, &s)))
        })
    }
}
