//! The fleet's journey records on Redis, behind this replica's cache.
//!
//! `{p}journey:<ref>` holds `r1.` and the record ([`JourneyRecord::encode`])
//! sealed whole: AES-256-GCM under `[cluster]`'s secret key, bound to this
//! purpose, the Redis key and the reference (`encryption::SealContext::journey_record`),
//! so a value moved to another journey does not open. It expires with
//! `[journeys] retention_hours`, counted from creation.
//!
//! A record is written `NX`: a live one is never replaced, whoever asks.
//! Each owner's live records are counted fleet-wide in
//! `{p}{journey-owners}:<owner>`, a sorted set of their references scored
//! by expiry (the owner is a configured caller name, not personal data);
//! a script trims the expired and adds the new one only under the owner's
//! share, so replicas racing at the share cannot overshoot it.
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
        encryption::SealContext,
        error::ClusterError,
        future::{BoxFuture, ready},
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

/// Trims an owner's set of expired references (`ARGV[1]`: now, in
/// milliseconds) and answers how many live ones it holds.
const OWNED_SCRIPT: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZCARD', KEYS[1])
"#;

/// Adds reference `ARGV[3]` expiring at `ARGV[2]` to an owner's set only
/// while fewer than `ARGV[4]` live ones are held (`ARGV[1]`: now); keeps
/// the set alive as long as its newest member. 1: added; 0: at the share.
const OWN_SCRIPT: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
"#;

/// Journey records on Redis, with this replica's cache in front.
#[derive(Clone)]
pub struct RedisJourneys {
    conn: RedisConn,
    retention: Duration,
    cache: MemoryJourneys,
    /// Each owner's live records as this replica last counted them.
    owned: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<CallerName, usize>>>,
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
            owned: std::sync::Arc::default(),
        }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["journey:", journey.as_str()])
    }

    fn owner_key(&self, owner: &CallerName) -> String {
        self.conn.tagged_key("journey-owners", owner.as_str())
    }

    /// How many live records `owner` holds fleet-wide.
    async fn count_owned(&self, owner: &CallerName) -> Result<usize, ClusterError> {
        let key = self.owner_key(owner);
        let now = crate::cluster::redis::now_ms();
        self.conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(OWNED_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(now)
                    .query_async::<usize>(&mut c)
                    .await
            })
            .await
    }

    /// Counts `journey` against `owner`'s share until `expires_ms`; false
    /// when the owner is at its share.
    async fn own(
        &self,
        owner: &CallerName,
        journey: &JourneyRef,
        expires_ms: u64,
        share: usize,
    ) -> Result<bool, ClusterError> {
        let key = self.owner_key(owner);
        let member = journey.as_str().to_owned();
        let now = crate::cluster::redis::now_ms();
        self.conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(OWN_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(now)
                    .arg(expires_ms)
                    .arg(&member)
                    .arg(share)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|added| added == 1)
    }

    fn retention_secs(&self) -> i64 {
        i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX)
    }

    fn encode(&self, journey: &JourneyRef, record: &JourneyRecord) -> String {
        let context = SealContext::journey_record(&self.key(journey), journey);
        let text = zeroize::Zeroizing::new(record.encode());
        let sealed = self.conn.sealer().seal_bytes(&context, text.as_bytes());
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
                .open_bytes(&SealContext::journey_record(&key, journey), sealed)
                .and_then(|plain| JourneyRecord::decode(std::str::from_utf8(&plain).ok()?)),
            None => {
                let (appkey, owner) = match stored.split_once(LEGACY_OWNER_SEPARATOR) {
                    Some((appkey, owner)) => (appkey, Some(owner)),
                    None => (stored, None),
                };
                sealer
                    .open(&SealContext::directory(&key, journey), appkey)
                    .and_then(|appkey| {
                        let owner = match owner {
                            Some(sealed) => Some(CallerName::new(
                                sealer
                                    .open(&SealContext::directory_owner(&key, journey), sealed)?
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
    fn can_record(
        &self,
        owner: Option<&CallerName>,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        if let Err(down) = self.conn.check_up() {
            return ready(Err(down));
        }
        let Some(owner) = owner.filter(|_| share != usize::MAX).cloned() else {
            return ready(Ok(()));
        };
        let this = self.clone();
        Box::pin(async move {
            let owned = this.count_owned(&owner).await?;
            crate::sync::lock(&this.owned).insert(owner, owned);
            match owned >= share {
                true => Err(ClusterError::OwnerFull),
                false => Ok(()),
            }
        })
    }

    /// The record first (`NX`: a live one is never replaced), then its
    /// place in the owner's share; a record the share refuses is deleted
    /// again (it was this call's own).
    fn register(
        &self,
        journey: &JourneyRef,
        record: &JourneyRecord,
        share: usize,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let journey = journey.clone();
        let record = record.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let left = record.created_unix.saturating_add(this.retention_secs()) - now_unix();
            let ttl = Duration::from_secs(u64::try_from(left).unwrap_or(0).max(1));
            let sealed = this.encode(&journey, &record);
            let key = this.key(&journey);
            if !this
                .conn
                .set_nx_px(key.clone(), sealed.clone(), millis(ttl))
                .await?
            {
                return Err(ClusterError::Taken);
            }
            if let Some(owner) = record.owner.as_ref().filter(|_| share != usize::MAX) {
                let expires_ms = crate::cluster::redis::now_ms().saturating_add(millis(ttl));
                if !this.own(owner, &journey, expires_ms, share).await? {
                    this.conn.delete_if(key, sealed).await?;
                    return Err(ClusterError::OwnerFull);
                }
                if let Some(n) = crate::sync::lock(&this.owned).get_mut(owner) {
                    *n += 1;
                }
            }
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
            Lookup::Known(record) => return ready(Ok(Some(record))),
            Lookup::Unknown => return ready(Ok(None)),
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

    fn owned(&self, owner: &CallerName) -> Option<usize> {
        crate::sync::lock(&self.owned).get(owner).copied()
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
