//! Vendor figures the fleet shares: per-minute counters per channel, so
//! `GetChannelFigures` answers for every replica's calls from any one.
//!
//! This store knows counters by name only: what they count (sessions,
//! verdicts, latency buckets) is the channel figures' business
//! (`crate::channels::figures`), which names them and adds them up. Every
//! counter is a plain sum, so the fleet's bucket of a minute is the sum of
//! what each replica added to it.
//!
//! Only a fleet has them: a single process's router holds its own
//! figures, which are the whole truth.
//!
//! [`FleetFigures`]: `{p}{figures}:<minute>` (minutes since the Unix
//! epoch), a hash of `<channel>|<counter>` -> count, grown with `HINCRBY`
//! and expiring after the retention. Channel names and counts only:
//! nothing personal. Replicas add their counts in batches, off the call
//! path (`crate::channels::figures`); a read pipelines one `HGETALL` per
//! minute of the window, in bounded chunks. A pipeline touches several
//! minutes, so the hashes share the hash tag `{figures}`: on a Redis
//! Cluster they live in one slot (one node), which their volume (one
//! batch a second per replica) allows.

use std::{collections::BTreeMap, time::Duration};

use crate::cluster::{
    error::ClusterError,
    redis::{RedisConn, millis},
};

/// Counts to add to one channel's bucket of one minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FigureDelta {
    /// The channel's configured name.
    pub channel: String,
    /// Minutes since the Unix epoch.
    pub minute: u64,
    /// Counter name -> count to add (zero counts are left out).
    pub counts: Vec<(String, u64)>,
}

/// Counter name -> count, by channel name.
pub type FigureSums = BTreeMap<String, BTreeMap<String, u64>>;

/// Separates the channel from the counter in a hash field (channel names
/// are `[A-Za-z0-9_.-]`, see `channels::valid_name`).
const FIELD_SEPARATOR: char = '|';

/// Most minutes one pipelined read asks for: a 7-day window is 42 reads,
/// each within the command timeout.
const READ_CHUNK_MINUTES: u64 = 240;

/// The fleet's channel figures on Redis. Every method answers within the
/// command timeout.
#[derive(Debug, Clone)]
pub struct FleetFigures {
    conn: RedisConn,
    retention: Duration,
}

impl FleetFigures {
    /// The figures on `conn`; a minute's bucket lives `retention` after
    /// that minute (and one minute more, for a late batch).
    pub(in crate::cluster) fn new(conn: RedisConn, retention: Duration) -> Self {
        Self { conn, retention }
    }

    fn key(&self, minute: u64) -> String {
        self.conn.tagged_key("figures", &minute.to_string())
    }

    /// Adds `deltas` to the fleet's buckets. On an error some may have
    /// been added and others not (the caller keeps them to try again).
    pub async fn add(&self, deltas: Vec<FigureDelta>) -> Result<(), ClusterError> {
        let ttl = millis(self.retention + Duration::from_secs(60));
        let mut pipe = redis::pipe();
        let mut minutes = std::collections::BTreeSet::new();
        for delta in &deltas {
            let key = self.key(delta.minute);
            for (counter, n) in &delta.counts {
                pipe.hincr(
                    &key,
                    format!("{}{FIELD_SEPARATOR}{counter}", delta.channel),
                    *n,
                )
                .ignore();
            }
            minutes.insert(delta.minute);
        }
        for minute in minutes {
            pipe.pexpire(self.key(minute), i64::try_from(ttl).unwrap_or(i64::MAX))
                .ignore();
        }
        self.conn.check_up()?;
        self.conn
            .exec("HINCRBY", move |mut c| async move {
                pipe.query_async::<()>(&mut c).await
            })
            .await
    }

    /// The counters of minutes `first..=last`, summed, by channel.
    pub async fn sums(&self, first: u64, last: u64) -> Result<FigureSums, ClusterError> {
        self.conn.check_up()?;
        let mut sums = FigureSums::new();
        let mut from = first;
        while from <= last {
            let to = last.min(from + READ_CHUNK_MINUTES - 1);
            let mut pipe = redis::pipe();
            for minute in from..=to {
                pipe.hgetall(self.key(minute));
            }
            let buckets: Vec<Vec<(String, u64)>> = self
                .conn
                .exec("HGETALL", move |mut c| async move {
                    pipe.query_async(&mut c).await
                })
                .await?;
            for (field, n) in buckets.into_iter().flatten() {
                if let Some((channel, counter)) = field.split_once(FIELD_SEPARATOR) {
                    let sum = sums
                        .entry(channel.to_owned())
                        .or_default()
                        .entry(counter.to_owned())
                        .or_default();
                    *sum = sum.saturating_add(n);
                }
            }
            from = to + 1;
        }
        Ok(sums)
    }
}
