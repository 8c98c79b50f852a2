//! The guarded rollout: its record, and each replica's counts of the step
//! under way. Which replica drives the steps is the fleet's alone
//! (`cluster::fleet::driver_lease`): one process drives its own.
//!
//! The record is opaque text here (the channel layer owns its form, as
//! it owns the routing mode's): this store keeps it, replaces it only
//! when it is still what the writer read (compare and set, so an abort and
//! a step decision never overwrite one another), and hands it to every
//! replica that asks.
//!
//! - [`MemoryRollout`]: one process; the record and the counts in memory.
//! - [`RedisRollout`]: `{p}{rollout}:record` and one hash per step,
//!   `{p}{rollout}:counts:<id>:<step>` (replica -> its counts, expiring
//!   with [`COUNTS_TTL`]). Every key shares the hash tag `{rollout}` (the
//!   driver's lease too), so the scripts work on Redis Cluster too.
//! - [`EmbeddedRollout`]: a single replica's, on the embedded store
//!   (table `rollout`), behind a [`MemoryRollout`].
//!
//! The conformance probe's verdicts are a fact of their own, kept in
//! [`super::probes`].
//!
//! Channel names, weights and counts only: nothing personal.

mod embedded;

pub use embedded::EmbeddedRollout;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{
    error::ClusterError,
    future::{BoxFuture, ready},
    redis::RedisConn,
};
use crate::sync::lock;

/// How long a step's counts stay in Redis: longer than any step
/// (`[rollout]` bounds a step to a day).
pub const COUNTS_TTL: Duration = Duration::from_secs(7 * 86_400);

/// Where the fleet keeps its rollout. Every method answers within the
/// implementation's command timeout.
pub trait RolloutStore: Send + Sync + 'static {
    /// This replica's name as the rollout's driver and a counts field.
    fn replica(&self) -> String;

    /// The rollout record, if one was ever started.
    fn load(&self) -> BoxFuture<Result<Option<String>, ClusterError>>;

    /// Writes `record` if the stored record is still `expected` (`None`:
    /// no record yet). `Ok(false)`: another writer changed it first.
    fn replace(
        &self,
        expected: Option<String>,
        record: String,
    ) -> BoxFuture<Result<bool, ClusterError>>;

    /// Publishes this replica's counts (`counts`, opaque text) of step
    /// `step` of rollout `id`, replacing what it published before.
    fn put_counts(
        &self,
        id: &str,
        step: u32,
        counts: String,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// Every replica's counts of step `step` of rollout `id`.
    fn counts(&self, id: &str, step: u32) -> BoxFuture<Result<Vec<String>, ClusterError>>;
}

#[derive(Default)]
struct MemoryInner {
    record: Option<String>,
    counts: HashMap<(String, u32), String>,
}

/// One process's rollout: nothing shared.
#[derive(Default, Clone)]
pub struct MemoryRollout {
    inner: Arc<Mutex<MemoryInner>>,
}

impl std::fmt::Debug for MemoryRollout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRollout").finish_non_exhaustive()
    }
}

impl RolloutStore for MemoryRollout {
    fn replica(&self) -> String {
        "this-process".to_owned()
    }

    fn load(&self) -> BoxFuture<Result<Option<String>, ClusterError>> {
        ready(Ok(lock(&self.inner).record.clone()))
    }

    fn replace(
        &self,
        expected: Option<String>,
        record: String,
    ) -> BoxFuture<Result<bool, ClusterError>> {
        let mut inner = lock(&self.inner);
        if inner.record != expected {
            return ready(Ok(false));
        }
        inner.record = Some(record);
        ready(Ok(true))
    }

    fn put_counts(
        &self,
        id: &str,
        step: u32,
        counts: String,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let mut inner = lock(&self.inner);
        // One rollout's steps at a time: older ones are of no use.
        inner.counts.retain(|(rid, _), _| rid == id);
        inner.counts.insert((id.to_owned(), step), counts);
        ready(Ok(()))
    }

    fn counts(&self, id: &str, step: u32) -> BoxFuture<Result<Vec<String>, ClusterError>> {
        let inner = lock(&self.inner);
        ready(Ok(inner
            .counts
            .get(&(id.to_owned(), step))
            .cloned()
            .into_iter()
            .collect()))
    }
}

/// Replaces `KEYS[1]` with `ARGV[2]` when it holds `ARGV[1]`, or when it
/// is absent and `ARGV[1]` is empty.
const REPLACE_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
     if (v == false and ARGV[1] == '') or v == ARGV[1] then \
       redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0";

/// The fleet's rollout on Redis.
#[derive(Debug, Clone)]
pub struct RedisRollout {
    conn: RedisConn,
}

impl RedisRollout {
    /// The rollout on `conn`.
    pub(super) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    fn key(&self, part: &str) -> String {
        self.conn.key(&format!("{{rollout}}:{part}"))
    }

    async fn script(
        &self,
        script: &'static str,
        key: String,
        args: Vec<String>,
    ) -> Result<i64, ClusterError> {
        self.conn.check_up()?;
        self.conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(script)
                    .arg(1)
                    .arg(&key)
                    .arg(&args[..])
                    .query_async(&mut c)
                    .await
            })
            .await
    }
}

impl RolloutStore for RedisRollout {
    fn replica(&self) -> String {
        self.conn.origin().to_owned()
    }

    fn load(&self) -> BoxFuture<Result<Option<String>, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            this.conn.get(this.key("record")).await
        })
    }

    fn replace(
        &self,
        expected: Option<String>,
        record: String,
    ) -> BoxFuture<Result<bool, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            let args = vec![expected.unwrap_or_default(), record];
            let done = this
                .script(REPLACE_SCRIPT, this.key("record"), args)
                .await?;
            Ok(done == 1)
        })
    }

    fn put_counts(
        &self,
        id: &str,
        step: u32,
        counts: String,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let key = self.key(&format!("counts:{id}:{step}"));
        Box::pin(async move {
            this.conn.check_up()?;
            let field = this.replica();
            let ttl = super::redis::millis(COUNTS_TTL);
            this.conn
                .exec("MULTI HSET PEXPIRE", move |mut c| async move {
                    let mut pipe = redis::pipe();
                    pipe.atomic()
                        .hset(&key, &field, &counts)
                        .ignore()
                        .cmd("PEXPIRE")
                        .arg(&key)
                        .arg(ttl)
                        .ignore();
                    pipe.query_async::<()>(&mut c).await
                })
                .await
        })
    }

    fn counts(&self, id: &str, step: u32) -> BoxFuture<Result<Vec<String>, ClusterError>> {
        let this = self.clone();
        let key = self.key(&format!("counts:{id}:{step}"));
        Box::pin(async move {
            this.conn.check_up()?;
            this.conn
                .exec("HVALS", move |mut c| async move {
                    redis::cmd("HVALS").arg(&key).query_async(&mut c).await
                })
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_record_is_replaced_only_when_it_is_still_what_the_writer_read() {
        let store = MemoryRollout::default();
        assert_eq!(store.replace(None, "a".into()).await, Ok(true));
        assert_eq!(store.replace(None, "b".into()).await, Ok(false));
        assert_eq!(store.replace(Some("a".into()), "c".into()).await, Ok(true));
        assert_eq!(store.load().await, Ok(Some("c".into())));
    }

    #[tokio::test]
    async fn counts_of_an_older_rollout_are_dropped_when_a_new_one_counts() {
        let store = MemoryRollout::default();
        store.put_counts("r1", 0, "x".into()).await.unwrap();
        store.put_counts("r2", 0, "y".into()).await.unwrap();
        assert_eq!(store.counts("r1", 0).await, Ok(vec![]));
        assert_eq!(store.counts("r2", 0).await, Ok(vec!["y".to_owned()]));
    }
}
