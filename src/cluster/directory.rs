//! The fleet's journey directory: journey reference -> what the fleet
//! knows of the journey ([`JourneyRecord`]), so that a `WatchJourney` by
//! reference resolves on any replica.
//!
//! The whole directory is this file: the record, the trait, and both
//! implementations, with the record's Redis encoding
//! (`RedisDirectory::encode` / `decode`). The record carries the
//! journey's owner (the configured name of the caller that created it),
//! so that every later call on the journey, on any replica, is checked
//! against it; a record with no owner was created while the gateway ran
//! open and only `journeys = "any"` callers may touch it.
//!
//! - [`MemoryDirectory`]: one process. The hub's own directory
//!   (`events::JourneyDirectory`) already holds every journey this process
//!   created, so here it is a no-op: a second copy would add nothing.
//! - [`RedisDirectory`]: `{p}journey:<ref>` holds the appkey, sealed
//!   (AES-256-GCM under `[cluster]`'s secret key, bound to this purpose,
//!   the Redis key and the reference: see `seal::Binding`), and its
//!   owner's caller name, sealed alike under its own binding, as
//!   `<appkey>~<owner>` (`~` is outside the Base64 alphabet), expiring
//!   with `[watch] directory_ttl_secs`. A sealed owner moved to another
//!   journey or into the appkey's place does not open; a value stripped of
//!   its owner is a journey with no owner, which only `any` callers may
//!   touch (fails closed). Nothing else of the journey, and nothing
//!   personal, goes to Redis.

use std::time::Duration;

use super::{
    BoxFuture, ClusterError, ready,
    redis::{RedisConn, millis},
    seal::Binding,
};
use crate::domain::{Appkey, CallerName, JourneyRef};

/// What the fleet's directory holds for one journey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JourneyRecord {
    /// The journey's appkey (sealed in Redis).
    pub appkey: Appkey,
    /// The caller that created it (`None`: created by the open caller of
    /// a gateway running with `[auth] mode = "none"`). Sealed in Redis.
    pub owner: Option<CallerName>,
}

/// Separates the sealed appkey from the sealed owner in Redis.
const OWNER_SEPARATOR: char = '~';

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
        self.conn.key_of(&["journey:", journey.as_str()])
    }

    /// What a stored value is sealed to: this purpose, its key, the
    /// journey.
    fn binding(&self, journey: &JourneyRef) -> Binding {
        Binding::directory(&self.key(journey), journey)
    }

    /// The record as Redis holds it: the appkey and the owner, each
    /// sealed to its entry.
    fn encode(&self, journey: &JourneyRef, record: &JourneyRecord) -> String {
        let sealer = self.conn.sealer();
        let appkey = sealer.seal(&self.binding(journey), &record.appkey);
        match &record.owner {
            // The sealer takes an opaque key; a caller name is one (a
            // configured identifier, not a secret, sealed for integrity).
            Some(owner) => format!(
                "{appkey}{OWNER_SEPARATOR}{}",
                sealer.seal(
                    &Binding::directory_owner(&self.key(journey), journey),
                    &Appkey::new(owner.as_str())
                )
            ),
            None => appkey,
        }
    }

    /// The record of a stored value; `None` (with a warning) when it does
    /// not open. An owner that does not open makes the whole record fail:
    /// a journey must not lose its owner to a Redis writer.
    fn decode(&self, journey: &JourneyRef, stored: &str) -> Option<JourneyRecord> {
        let sealer = self.conn.sealer();
        let (appkey, owner) = match stored.split_once(OWNER_SEPARATOR) {
            Some((appkey, owner)) => (appkey, Some(owner)),
            None => (stored, None),
        };
        let owner_binding = Binding::directory_owner(&self.key(journey), journey);
        let opened = sealer
            .open(&self.binding(journey), appkey)
            .and_then(|appkey| {
                let owner = match owner {
                    Some(sealed) => Some(CallerName::new(
                        sealer.open(&owner_binding, sealed)?.expose(),
                    )),
                    None => None,
                };
                Some(JourneyRecord { appkey, owner })
            });
        if opened.is_none() {
            tracing::warn!(journey = %journey, "a sealed journey record in Redis did not open (another secret_key, or a value moved from another key?)");
        }
        opened
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
