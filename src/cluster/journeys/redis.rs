//! The fleet's journey records on Redis, behind this replica's cache.
//!
//! `{p}journey:<ref>` holds `r1.` and the record ([`JourneyRecord::encode`])
//! sealed whole: AES-256-GCM under `[cluster]`'s secret key, bound to this
//! purpose, the Redis key and the reference (`encryption::Binding::journey_record`),
//! so a value moved to another journey does not open. It expires with
//! `[journeys] retention_hours`, counted from creation.
//!
//! Values the previous release wrote (`<sealed appkey>[~<sealed owner>]`,
//! no profile, no request) are still read, so a rolling upgrade keeps
//! every live journey's owner; they expire within their own (shorter)
//! lifetime.

use std::time::Duration;

use super::{
    JourneyStore, lives,
    memory::{Lookup, MemoryJourneys},
    now_unix,
};
use crate::{
    cluster::{
        BoxFuture, ClusterError,
        encryption::Binding,
        redis::{RedisConn, millis},
    },
    domain::{CallerName, JourneyRecord, JourneyRef},
};

/// The marker of a whole sealed record (`.` is outside Base64's alphabet,
/// so no value of the previous release starts so).
const RECORD_PREFIX: &str = "r1.";
/// Separates the sealed appkey from the sealed owner in a value of the
/// previous release.
const LEGACY_OWNER_SEPARATOR: char = '~';

/// Journey records on Redis, with this replica's cache in front.
#[derive(Clone)]
pub struct RedisJourneys {
    conn: RedisConn,
    retention: Duration,
    cache: MemoryJourneys,
}

impl RedisJourneys {
    /// Records on `conn` kept `retention`; at most `cache_entries` cached
    /// here, and Redis's "no such record" remembered `unknown_ttl`.
    pub(crate) fn new(
        conn: RedisConn,
        retention: Duration,
        cache_entries: usize,
        unknown_ttl: Duration,
    ) -> Self {
        Self {
            conn,
            retention,
            cache: MemoryJourneys::cache(retention, cache_entries, unknown_ttl),
        }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["journey:", journey.as_str()])
    }

    fn retention_secs(&self) -> i64 {
        i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX)
    }

    fn encode(&self, journey: &JourneyRef, record: &JourneyRecord) -> String {
        let binding = Binding::journey_record(&self.key(journey), journey);
        let text = zeroize::Zeroizing::new(record.encode());
        let sealed = self.conn.sealer().seal_bytes(&binding, text.as_bytes());
        format!("{RECORD_PREFIX}{sealed}")
    }

    /// The record of a stored value; `None` (with a warning) when it does
    /// not open. In a value of the previous release, an owner that does
    /// not open fails the whole record: a journey must not lose its owner
    /// to a Redis writer.
    fn decode(&self, journey: &JourneyRef, stored: &str) -> Option<JourneyRecord> {
        let key = self.key(journey);
        let sealer = self.conn.sealer();
        let opened = match stored.strip_prefix(RECORD_PREFIX) {
            Some(sealed) => sealer
                .open_bytes(&Binding::journey_record(&key, journey), sealed)
                .and_then(|plain| JourneyRecord::decode(std::str::from_utf8(&plain).ok()?)),
            None => {
                let (appkey, owner) = match stored.split_once(LEGACY_OWNER_SEPARATOR) {
                    Some((appkey, owner)) => (appkey, Some(owner)),
                    None => (stored, None),
                };
                sealer
                    .open(&Binding::directory(&key, journey), appkey)
                    .and_then(|appkey| {
                        let owner = match owner {
                            Some(sealed) => Some(CallerName::new(
                                sealer
                                    .open(&Binding::directory_owner(&key, journey), sealed)?
                                    .expose(),
                            )),
                            None => None,
                        };
                        // Written within the previous release's shorter
                        // lifetime: alive now, gone with its Redis entry.
                        Some(JourneyRecord::new(appkey, owner, now_unix()))
                    })
            }
        };
        let opened = opened.filter(|r| JourneyRef::from_appkey(&r.appkey) == *journey);
        if opened.is_none() {
            tracing::warn!(journey = %journey, "a sealed journey record in Redis did not open (another secret_key, or a value moved from another key?)");
        }
        opened
    }
}

impl JourneyStore for RedisJourneys {
    fn can_record(&self) -> Result<(), ClusterError> {
        self.conn.check_up()
    }

    fn register(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let journey = journey.clone();
        let record = record.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let left = record.created_unix.saturating_add(this.retention_secs()) - now_unix();
            let ttl = Duration::from_secs(u64::try_from(left).unwrap_or(0).max(1));
            let sealed = this.encode(&journey, &record);
            this.conn
                .set_px(this.key(&journey), sealed, millis(ttl))
                .await?;
            this.cache.remember(&journey, record);
            Ok(())
        })
    }

    /// This replica's cache, else Redis. A record Redis gives is cached (a
    /// record never changes, and the journey's later calls on this
    /// replica then cost no Redis read), and so is Redis's "no such
    /// record", for `[journeys] unknown_ttl_secs`: a reference derives
    /// from a vendor-issued appkey, which a caller learns from
    /// CreateJourney only after its record is on Redis, so a remembered
    /// "unknown" can only be an appkey not issued here.
    fn find(&self, journey: &JourneyRef) -> BoxFuture<Result<Option<JourneyRecord>, ClusterError>> {
        match self.cache.lookup(journey) {
            Lookup::Known(record) => return crate::cluster::ready(Ok(Some(record))),
            Lookup::Unknown => return crate::cluster::ready(Ok(None)),
            Lookup::Ask => {}
        }
        let this = self.clone();
        let journey = journey.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let stored = this.conn.get(this.key(&journey)).await?;
            let found = stored
                .and_then(|s| this.decode(&journey, &s))
                .filter(|r| lives(r, this.retention_secs(), now_unix()));
            match &found {
                Some(record) => this.cache.remember(&journey, record.clone()),
                None => this.cache.remember_unknown(&journey),
            }
            Ok(found)
        })
    }

    fn held(&self, journey: &JourneyRef) -> Option<JourneyRecord> {
        self.cache.held(journey)
    }

    fn retention(&self) -> Duration {
        self.retention
    }
}

impl std::fmt::Debug for RedisJourneys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisJourneys")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}
