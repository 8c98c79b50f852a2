//! A single replica's charge-back counts on the embedded store, behind
//! its memory: a restart does not reset the report.
//!
//! Table `usage`: `<day>|<caller>|<item>` -> the count (8 bytes, big
//! endian), expiring `[usage] retention_days` after its day. Configured
//! caller names and fixed words only.

use std::{sync::Arc, time::Duration};

use futures_util::future::join_all;

use super::{FIELD_SEPARATOR, MemoryUsage, UsageStore};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table},
        embedded_tier::{read_failed, refusal},
        error::ClusterError,
        future::BoxFuture,
    },
    telemetry::usage::UsageCount,
};

/// The counts' table.
const USAGE: Table = Table::new("usage");

/// Seconds in a day.
const DAY_SECS: i64 = 86_400;

/// A single replica's counts, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedUsage {
    memory: Arc<MemoryUsage>,
    store: Embedded,
    retention: Duration,
}

impl EmbeddedUsage {
    /// The counts of `store`, kept `retention` after their day, read back
    /// into memory now.
    pub fn open(store: Embedded, retention: Duration) -> Self {
        let memory = MemoryUsage::new(retention);
        match store.scan(USAGE, b"", usize::MAX) {
            Ok(found) => {
                let counts = found
                    .into_iter()
                    .filter_map(|(key, record)| {
                        let (day, caller, item) = parse_key(std::str::from_utf8(&key).ok()?)?;
                        let count = u64::from_be_bytes(record.value.as_slice().try_into().ok()?);
                        Some(UsageCount {
                            day,
                            caller,
                            item,
                            count,
                        })
                    })
                    .collect();
                // Memory answers at once.
                drop(memory.add(counts));
            }
            Err(e) => read_failed(&e),
        }
        Self {
            memory: Arc::new(memory),
            store,
            retention,
        }
    }
}

/// A count's key.
fn key(day: i64, caller: &str, item: &str) -> String {
    format!("{day}{FIELD_SEPARATOR}{caller}{FIELD_SEPARATOR}{item}")
}

/// A count's day, caller and item.
fn parse_key(key: &str) -> Option<(i64, String, String)> {
    let mut parts = key.splitn(3, FIELD_SEPARATOR);
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.to_owned(),
        parts.next()?.to_owned(),
    ))
}

impl UsageStore for EmbeddedUsage {
    /// Summed in memory, then each sum it changed written to the file
    /// (all in one commit when they arrive together). On an error memory
    /// holds the sums; the next add of the same count writes them again.
    fn add(&self, counts: Vec<UsageCount>) -> BoxFuture<Result<(), ClusterError>> {
        let touched: Vec<_> = counts
            .iter()
            .map(|c| (c.day, c.caller.clone(), c.item.clone()))
            .collect();
        // Memory answers at once.
        drop(self.memory.add(counts));
        let sums = crate::sync::lock(&self.memory.sums);
        let writes: Vec<_> = touched
            .into_iter()
            .filter_map(|k| {
                sums.get(&k)
                    .map(|sum| (key(k.0, &k.1, &k.2), k.0, sum.to_be_bytes()))
            })
            .collect();
        drop(sums);
        let this = self.clone();
        Box::pin(async move {
            let written = join_all(writes.iter().map(|(key, day, sum)| {
                let expires = Expiry::at_unix_secs(
                    (day + 1)
                        .saturating_mul(DAY_SECS)
                        .saturating_add(i64::try_from(this.retention.as_secs()).unwrap_or(0)),
                );
                this.store.put(USAGE, key.as_bytes(), sum, expires)
            }))
            .await;
            written
                .into_iter()
                .collect::<Result<Vec<()>, _>>()
                .map(drop)
                .map_err(refusal)
        })
    }

    fn read(&self, first: i64, last: i64) -> BoxFuture<Result<Vec<UsageCount>, ClusterError>> {
        self.memory.read(first, last)
    }

    fn fleet(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cluster::embedded::StoreConfig, telemetry::usage::today};

    #[tokio::test]
    async fn counts_are_summed_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let retention = Duration::from_secs(93 * 86_400);
        let count = |n| UsageCount {
            day: today(),
            caller: "alice".into(),
            item: "journeys".into(),
            count: n,
        };
        {
            let usage = EmbeddedUsage::open(Embedded::open(&config, None).unwrap(), retention);
            usage.add(vec![count(2)]).await.unwrap();
        }
        let usage = EmbeddedUsage::open(Embedded::open(&config, None).unwrap(), retention);
        usage.add(vec![count(3)]).await.unwrap();
        assert_eq!(usage.read(today(), today()).await.unwrap(), vec![count(5)]);
    }
}
