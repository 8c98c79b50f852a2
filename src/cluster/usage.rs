//! Where the charge-back report's counts are kept: by UTC day, caller
//! name and item (`journeys`, `billed.<operation>`, `refused.<reason>`),
//! plain sums, so the fleet's count of a day is the sum of what each
//! replica added (`crate::usage` drains each replica's ledger into it).
//!
//! Three tiers:
//!
//! - [`MemoryUsage`]: one process; the counts live as long as it does.
//! - [`EmbeddedUsage`]: a single replica's, on the embedded store (table
//!   `usage`, `<day>|<caller>|<item>` -> count), behind a [`MemoryUsage`].
//! - [`RedisUsage`]: the fleet's. `{p}{usage}:<day>` (days since the
//!   Unix epoch), a hash of `<caller>|<item>` -> count, grown with
//!   `HINCRBY` and expiring `[usage] retention_days` after its day.
//!   Configured caller names (`[A-Za-z0-9._:-]`) and fixed words only:
//!   nothing personal. The hashes share the hash tag `{usage}` (one slot
//!   on a Redis Cluster): a read pipelines one `HGETALL` per day, and the
//!   volume (one batch a second per replica) allows it.
//!
//! Days older than the retention are forgotten by every tier.

mod embedded;

pub use embedded::EmbeddedUsage;

use std::{collections::BTreeMap, sync::Mutex, time::Duration};

use super::{
    error::ClusterError,
    future::{BoxFuture, ready},
    redis::{RedisConn, millis},
};
use crate::telemetry::usage::{UsageCount, today};

/// Separates the caller from the item in a hash field (caller names
/// never hold it).
const FIELD_SEPARATOR: char = '|';

/// Most days one pipelined read asks for.
const READ_CHUNK_DAYS: i64 = 64;

/// Where the report's counts are kept. Every method answers within the
/// implementation's command timeout.
pub trait UsageStore: Send + Sync + 'static {
    /// Adds `counts`. On an error some may have been added and others
    /// not (the caller keeps them to try again).
    fn add(&self, counts: Vec<UsageCount>) -> BoxFuture<Result<(), ClusterError>>;

    /// Every count of days `first..=last`, summed by (day, caller, item).
    fn read(&self, first: i64, last: i64) -> BoxFuture<Result<Vec<UsageCount>, ClusterError>>;

    /// True when the counts are the fleet's (not this process's alone).
    fn fleet(&self) -> bool;
}

type Sums = BTreeMap<(i64, String, String), u64>;

fn sums_to_counts(sums: Sums) -> Vec<UsageCount> {
    sums.into_iter()
        .map(|((day, caller, item), count)| UsageCount {
            day,
            caller,
            item,
            count,
        })
        .collect()
}

/// The counts of one process.
#[derive(Debug)]
pub struct MemoryUsage {
    retention_days: i64,
    sums: Mutex<Sums>,
}

impl MemoryUsage {
    /// Counts kept `retention` (whole days, at least one).
    pub fn new(retention: Duration) -> Self {
        Self {
            retention_days: retention_days(retention),
            sums: Mutex::default(),
        }
    }
}

fn retention_days(retention: Duration) -> i64 {
    i64::try_from(retention.as_secs() / 86_400)
        .unwrap_or(i64::MAX)
        .max(1)
}

impl UsageStore for MemoryUsage {
    fn add(&self, counts: Vec<UsageCount>) -> BoxFuture<Result<(), ClusterError>> {
        let oldest = today() - self.retention_days + 1;
        let mut sums = crate::sync::lock(&self.sums);
        for c in counts.into_iter().filter(|c| c.day >= oldest) {
            let sum = sums.entry((c.day, c.caller, c.item)).or_default();
            *sum = sum.saturating_add(c.count);
        }
        sums.retain(|(day, _, _), _| *day >= oldest);
        ready(Ok(()))
    }

    fn read(&self, first: i64, last: i64) -> BoxFuture<Result<Vec<UsageCount>, ClusterError>> {
        let sums = crate::sync::lock(&self.sums);
        let within: Sums = sums
            .iter()
            .filter(|((day, _, _), _)| (first..=last).contains(day))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        ready(Ok(sums_to_counts(within)))
    }

    fn fleet(&self) -> bool {
        false
    }
}

/// The fleet's counts on Redis.
#[derive(Debug, Clone)]
pub struct RedisUsage {
    conn: RedisConn,
    retention: Duration,
}

impl RedisUsage {
    /// The counts on `conn`; a day's hash lives `retention` after that
    /// day ends.
    pub(super) fn new(conn: RedisConn, retention: Duration) -> Self {
        Self { conn, retention }
    }

    fn key(&self, day: i64) -> String {
        self.conn.tagged_key("usage", &day.to_string())
    }
}

impl UsageStore for RedisUsage {
    fn add(&self, counts: Vec<UsageCount>) -> BoxFuture<Result<(), ClusterError>> {
        let conn = self.conn.clone();
        let ttl = millis(self.retention + Duration::from_secs(86_400));
        let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
        let mut pipe = redis::pipe();
        let mut days = std::collections::BTreeSet::new();
        for c in &counts {
            pipe.hincr(
                self.key(c.day),
                format!("{}{FIELD_SEPARATOR}{}", c.caller, c.item),
                c.count,
            )
            .ignore();
            days.insert(c.day);
        }
        for day in days {
            pipe.pexpire(self.key(day), ttl).ignore();
        }
        Box::pin(async move {
            conn.check_up()?;
            conn.exec("HINCRBY", move |mut c| async move {
                pipe.query_async::<()>(&mut c).await
            })
            .await
        })
    }

    fn read(&self, first: i64, last: i64) -> BoxFuture<Result<Vec<UsageCount>, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let mut sums = Sums::new();
            let mut from = first;
            while from <= last {
                let to = last.min(from + READ_CHUNK_DAYS - 1);
                let mut pipe = redis::pipe();
                for day in from..=to {
                    pipe.hgetall(this.key(day));
                }
                let hashes: Vec<Vec<(String, u64)>> = this
                    .conn
                    .exec("HGETALL", move |mut c| async move {
                        pipe.query_async(&mut c).await
                    })
                    .await?;
                for (day, hash) in (from..=to).zip(hashes) {
                    for (field, n) in hash {
                        if let Some((caller, item)) = field.split_once(FIELD_SEPARATOR) {
                            let sum = sums
                                .entry((day, caller.to_owned(), item.to_owned()))
                                .or_default();
                            *sum = sum.saturating_add(n);
                        }
                    }
                }
                from = to + 1;
            }
            Ok(sums_to_counts(sums))
        })
    }

    fn fleet(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(day: i64, caller: &str, item: &str, n: u64) -> UsageCount {
        UsageCount {
            day,
            caller: caller.into(),
            item: item.into(),
            count: n,
        }
    }

    #[tokio::test]
    async fn memory_sums_counts_by_day_caller_and_item_and_forgets_days_past_retention() {
        let store = MemoryUsage::new(Duration::from_secs(3 * 86_400));
        let d = today();
        store
            .add(vec![
                count(d, "a", "journeys", 2),
                count(d - 1, "a", "journeys", 1),
                count(d - 3, "a", "journeys", 7),
            ])
            .await
            .unwrap();
        store
            .add(vec![
                count(d, "a", "journeys", 3),
                count(d, "b", "billed.create_journey", 1),
            ])
            .await
            .unwrap();
        let all = store.read(d - 10, d).await.unwrap();
        assert_eq!(
            all,
            vec![
                count(d - 1, "a", "journeys", 1),
                count(d, "a", "journeys", 5),
                count(d, "b", "billed.create_journey", 1),
            ]
        );
        assert_eq!(store.read(d - 1, d - 1).await.unwrap().len(), 1);
        assert!(!store.fleet());
    }
}
