//! A single replica's guarded rollout on the embedded store, behind its
//! memory: a rollout under way goes on from the step it was at after a
//! restart.
//!
//! Table `rollout`: `record` -> the rollout record (no expiry: it stands
//! until replaced), `counts:<id>:<step>` -> this process's counts of that
//! step, expiring with [`COUNTS_TTL`]. Channel names, weights and counts
//! only.

use super::{COUNTS_TTL, MemoryRollout, RolloutStore};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, StoreError, Table},
        embedded_tier::{read_failed, refusal},
        error::ClusterError,
        future::{BoxFuture, ready},
    },
    sync::lock,
};

/// The rollout's table.
const ROLLOUT: Table = Table::new("rollout");

/// The record's key.
const RECORD: &[u8] = b"record";

/// A single replica's rollout, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedRollout {
    memory: MemoryRollout,
    store: Embedded,
}

impl EmbeddedRollout {
    /// The rollout of `store`, its record read back into memory now.
    pub fn open(store: Embedded) -> Self {
        let memory = MemoryRollout::default();
        match store.get(ROLLOUT, RECORD) {
            Ok(found) => {
                lock(&memory.inner).record =
                    found.and_then(|r| String::from_utf8(r.value.to_vec()).ok());
            }
            Err(e) => read_failed(&e),
        }
        Self { memory, store }
    }
}

/// A step's counts' key.
fn counts_key(id: &str, step: u32) -> Vec<u8> {
    format!("counts:{id}:{step}").into_bytes()
}

impl RolloutStore for EmbeddedRollout {
    fn replica(&self) -> String {
        self.memory.replica()
    }

    fn load(&self) -> BoxFuture<Result<Option<String>, ClusterError>> {
        self.memory.load()
    }

    /// Compared in memory, written in the file (compare and set there
    /// too), then in memory: what `load` answers is what the file holds.
    fn replace(
        &self,
        expected: Option<String>,
        record: String,
    ) -> BoxFuture<Result<bool, ClusterError>> {
        if lock(&self.memory.inner).record != expected {
            return ready(Ok(false));
        }
        let this = self.clone();
        Box::pin(async move {
            let written = match &expected {
                Some(old) => {
                    this.store
                        .replace(
                            ROLLOUT,
                            RECORD,
                            old.as_bytes(),
                            record.as_bytes(),
                            Expiry::NEVER,
                        )
                        .await
                }
                None => match this
                    .store
                    .insert(ROLLOUT, RECORD, record.as_bytes(), Expiry::NEVER)
                    .await
                {
                    Err(StoreError::Taken) => Ok(false),
                    inserted => inserted.map(|()| true),
                },
            };
            if !written.map_err(refusal)? {
                return Ok(false);
            }
            this.memory.replace(expected, record).await
        })
    }

    fn put_counts(
        &self,
        id: &str,
        step: u32,
        counts: String,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let id = id.to_owned();
        Box::pin(async move {
            this.store
                .put(
                    ROLLOUT,
                    &counts_key(&id, step),
                    counts.as_bytes(),
                    Expiry::after(COUNTS_TTL),
                )
                .await
                .map_err(refusal)?;
            this.memory.put_counts(&id, step, counts).await
        })
    }

    /// Memory, else the file (counts published before a restart).
    fn counts(&self, id: &str, step: u32) -> BoxFuture<Result<Vec<String>, ClusterError>> {
        if let Some(held) = lock(&self.memory.inner).counts.get(&(id.to_owned(), step)) {
            return ready(Ok(vec![held.clone()]));
        }
        ready(match self.store.get(ROLLOUT, &counts_key(id, step)) {
            Ok(found) => Ok(found
                .and_then(|r| String::from_utf8(r.value.to_vec()).ok())
                .into_iter()
                .collect()),
            Err(e) => {
                read_failed(&e);
                Err(ClusterError::Unavailable)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::embedded::StoreConfig;

    #[tokio::test]
    async fn the_record_and_the_step_counts_outlive_a_restart_and_change_by_compare_and_set() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        {
            let rollout = EmbeddedRollout::open(Embedded::open(&config, None).unwrap());
            assert_eq!(rollout.replace(None, "r1".into()).await, Ok(true));
            assert_eq!(rollout.replace(None, "other".into()).await, Ok(false));
            rollout.put_counts("r", 1, "c1".into()).await.unwrap();
        }
        let rollout = EmbeddedRollout::open(Embedded::open(&config, None).unwrap());
        assert_eq!(rollout.load().await, Ok(Some("r1".into())));
        assert_eq!(rollout.counts("r", 1).await, Ok(vec!["c1".to_owned()]));
        assert_eq!(
            rollout.replace(Some("r1".into()), "r2".into()).await,
            Ok(true)
        );
        assert_eq!(
            rollout.replace(Some("r1".into()), "r3".into()).await,
            Ok(false)
        );
        assert_eq!(rollout.load().await, Ok(Some("r2".into())));
    }
}
