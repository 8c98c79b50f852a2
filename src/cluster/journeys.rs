//! The journey records ([`JourneyRecord`]): one store of what the gateway
//! keeps of each journey it created, with one lifetime, `[journeys]
//! retention_hours`.
//!
//! ```text
//! journey::Journeys::create --can_record--> claim, budget, /appkey --register--> (record)
//! api::access (every call on an appkey) ---find--> issued here? whose? which profile pays?
//! events::JourneyWatches (watch by reference) --held/find--> the appkey
//! spend::Idempotency (a replay) ------------find--> the appkey, if owner and request match
//! ```
//!
//! Every tier inserts a record once: a second registration of a live
//! journey ([`ClusterError::Taken`], a vendor that issued one appkey
//! twice) changes nothing, so the journey stays its first creator's. And
//! every tier counts each owner's live records against its share
//! (`[[callers]] max_journeys`, [`ClusterError::OwnerFull`]), so that one
//! caller cannot fill the store its neighbours need.
//!
//! - [`MemoryJourneys`]: one process's whole store, bounded by `[journeys]
//!   max_entries`. When full it refuses new journeys
//!   ([`ClusterError::Full`]) rather than forget a live one: a forgotten
//!   journey would become "foreign", and with `accept_foreign_appkeys`
//!   anyone's.
//! - [`RedisJourneys`]: the fleet's store, `{p}journey:<ref>` holding the
//!   record sealed whole (written `NX`), with a [`MemoryJourneys`] in
//!   front as this replica's cache (records never change, so a cached one
//!   is never stale) and a short memory of references Redis said it does
//!   not hold; each owner's live records counted fleet-wide in a sorted
//!   set of their expiries.
//!
//! - [`EmbeddedJourneys`]: a single replica's store on the embedded
//!   store (`[store]`), a [`MemoryJourneys`] in front: table `journeys`,
//!   the record sealed whole, durable before `register` answers, read
//!   back into memory at start.
//!
//! A record older than the retention is not a record: an appkey past it is
//! unknown here and refused like any foreign one, whatever tier still
//! holds it.

mod embedded;
mod memory;
mod redis;

use serde::Deserialize;

pub use embedded::EmbeddedJourneys;
pub use memory::MemoryJourneys;
pub use redis::RedisJourneys;

use super::{error::ClusterError, future::BoxFuture};
use crate::{
    config_source::ConfigError,
    domain::{CallerName, JourneyRecord, JourneyRef},
};

/// Where journey records live. Every method answers within the
/// implementation's command timeout.
pub trait JourneyStore: Send + Sync + 'static {
    /// Whether a new journey of `owner` could be recorded now: Redis up,
    /// the memory store not full, the owner under its `share` of live
    /// records. `CreateJourney` asks before it buys an appkey, so that no
    /// appkey is bought that could not be recorded.
    fn can_record(
        &self,
        owner: Option<&CallerName>,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// Records `record` of `journey` for its retention, once: a live
    /// record under `journey` is never replaced ([`ClusterError::Taken`]),
    /// and an owner at its `share` records nothing
    /// ([`ClusterError::OwnerFull`]; checked again here, since calls
    /// racing past [`JourneyStore::can_record`] must not overshoot).
    fn register(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The record of `journey`, if it lives (`Err`: the fleet could not be
    /// asked and this replica does not hold it).
    fn find(&self, journey: &JourneyRef) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>>;

    /// How many live records `owner` holds, as this replica knows it
    /// without asking: exact in a single replica's store; in a fleet, as
    /// of this replica's last `CreateJourney` of that owner (`None`:
    /// none yet).
    fn owned(&self, owner: &CallerName) -> Option<usize>;

    /// The record of `journey` if this replica holds it, without asking
    /// the fleet.
    fn held(&self, journey: &JourneyRef) -> Option<JourneyRecord>;

    /// How long a record lives, counted from its creation (`[journeys]
    /// retention_hours`): how long a journey may still be finished.
    fn retention(&self) -> std::time::Duration;
}

/// `[journeys]`: how long the gateway keeps its journey records, which is
/// how long it can tell its own journeys from foreign ones.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JourneysConfig {
    /// How long a journey's record lives, in hours (1 to 720). At least
    /// the idempotency window and the appkey's validity.
    pub retention_hours: u64,
    /// Most records one process holds: the whole store of a single
    /// replica (past it, `CreateJourney` is refused `OVERLOADED`), a
    /// cache in a fleet.
    pub max_entries: usize,
    /// In a fleet, how long a replica remembers that Redis holds no record
    /// of a reference (an appkey not issued here), in seconds; 0: ask
    /// Redis on every call.
    pub unknown_ttl_secs: u64,
    /// Take calls on appkeys this gateway did not issue (created by
    /// another system with the same vendor account): billed to the
    /// caller's first operator profile, else the default one. Off by
    /// default: such calls are refused `NOT_FOUND`/`JOURNEY_UNKNOWN`
    /// before any vendor call or billing.
    pub accept_foreign_appkeys: bool,
}

impl Default for JourneysConfig {
    fn default() -> Self {
        Self {
            retention_hours: 24,
            max_entries: 100_000,
            unknown_ttl_secs: 30,
            accept_foreign_appkeys: false,
        }
    }
}

/// The longest retention: 30 days.
const MAX_RETENTION_HOURS: u64 = 720;

impl JourneysConfig {
    /// The retention as a duration.
    pub fn retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.retention_hours * 3600)
    }

    /// The retention within bounds, and long enough for the windows that
    /// read the record: the idempotency window (`idempotency_secs`) and
    /// the appkey's validity (`appkey_secs`).
    pub fn validate(&self, idempotency_secs: u64, appkey_secs: u64) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if !(1..=MAX_RETENTION_HOURS).contains(&self.retention_hours) {
            return invalid(format!(
                "journeys.retention_hours must be 1 to {MAX_RETENTION_HOURS}"
            ));
        }
        if self.max_entries == 0 {
            return invalid("journeys.max_entries must be at least 1".to_owned());
        }
        let retention = self.retention_hours * 3600;
        if retention < idempotency_secs {
            return invalid(
                "journeys.retention_hours must cover idempotency.ttl_secs (a replay reads the journey's record)".to_owned(),
            );
        }
        if retention < appkey_secs {
            return invalid(
                "journeys.retention_hours must cover upstream.appkey_ttl_secs (an appkey must not turn foreign while the vendor takes it)".to_owned(),
            );
        }
        Ok(())
    }
}

/// Unix seconds now.
pub(crate) fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Whether `record` is within `retention` of its creation at `now`.
fn lives(record: &JourneyRecord, retention_secs: i64, now: i64) -> bool {
    now < record.created_unix.saturating_add(retention_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retention_must_cover_the_windows_that_read_it() {
        let c = JourneysConfig::default();
        assert!(c.validate(86_400, 300).is_ok());
        assert!(c.validate(86_401, 300).is_err());
        let short = JourneysConfig {
            retention_hours: 1,
            ..c.clone()
        };
        let e = short.validate(7200, 300).unwrap_err().to_string();
        assert!(e.contains("idempotency.ttl_secs"), "{e}");
        let e = short.validate(60, 7200).unwrap_err().to_string();
        assert!(e.contains("appkey_ttl_secs"), "{e}");
        for hours in [0, 721] {
            let bad = JourneysConfig {
                retention_hours: hours,
                ..c.clone()
            };
            assert!(bad.validate(1, 1).is_err());
        }
    }
}
