//! The conformance probe's verdicts: the last verdict of each channel, so
//! that a probe run through one replica refuses weight to a
//! non-conforming channel on every replica.
//!
//! - [`MemoryProbes`]: one process; a verdict per configured channel.
//! - [`RedisProbes`]: `{p}{rollout}:probe:<channel>` (`1` or `0`, no
//!   expiry: a verdict stands until the next probe), under the rollout's
//!   hash tag, where the rollout that reads them keeps its keys.
//! - [`EmbeddedProbes`]: a single replica's, on the embedded store
//!   (table `probes`), behind a [`MemoryProbes`].
//!
//! Channel names and a bit each: nothing personal.

mod embedded;

pub use embedded::EmbeddedProbes;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use super::{
    error::ClusterError,
    future::{BoxFuture, ready},
    redis::RedisConn,
};
use crate::sync::lock;

/// Where the last probe verdict of each channel is kept. Every method
/// answers within the implementation's command timeout.
pub trait ProbeStore: Send + Sync + 'static {
    /// Notes the verdict of the last conformance probe of `channel`.
    fn set_verdict(&self, channel: &str, conforming: bool) -> BoxFuture<Result<(), ClusterError>>;

    /// The verdict of the last probe of `channel`; `None` if never probed.
    fn verdict(&self, channel: &str) -> BoxFuture<Result<Option<bool>, ClusterError>>;
}

/// One process's verdicts.
#[derive(Debug, Default, Clone)]
pub struct MemoryProbes {
    verdicts: Arc<Mutex<HashMap<String, bool>>>,
}

impl ProbeStore for MemoryProbes {
    fn set_verdict(&self, channel: &str, conforming: bool) -> BoxFuture<Result<(), ClusterError>> {
        lock(&self.verdicts).insert(channel.to_owned(), conforming);
        ready(Ok(()))
    }

    fn verdict(&self, channel: &str) -> BoxFuture<Result<Option<bool>, ClusterError>> {
        ready(Ok(lock(&self.verdicts).get(channel).copied()))
    }
}

/// The fleet's verdicts on Redis.
#[derive(Debug, Clone)]
pub struct RedisProbes {
    conn: RedisConn,
}

impl RedisProbes {
    /// Verdicts on `conn`.
    pub(super) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    fn key(&self, channel: &str) -> String {
        self.conn.key(&format!("{{rollout}}:probe:{channel}"))
    }
}

impl ProbeStore for RedisProbes {
    fn set_verdict(&self, channel: &str, conforming: bool) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let key = self.key(channel);
        Box::pin(async move {
            this.conn.check_up()?;
            let value = if conforming { "1" } else { "0" };
            this.conn
                .exec("SET", move |mut c| async move {
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(value)
                        .query_async::<()>(&mut c)
                        .await
                })
                .await
        })
    }

    fn verdict(&self, channel: &str) -> BoxFuture<Result<Option<bool>, ClusterError>> {
        let this = self.clone();
        let key = self.key(channel);
        Box::pin(async move {
            this.conn.check_up()?;
            Ok(this.conn.get(key).await?.map(|v| v == "1"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_last_verdict_of_each_channel_stands() {
        let probes = MemoryProbes::default();
        assert_eq!(probes.verdict("alt").await, Ok(None));
        probes.set_verdict("alt", false).await.unwrap();
        probes.set_verdict("alt", true).await.unwrap();
        probes.set_verdict("primary", false).await.unwrap();
        assert_eq!(probes.verdict("alt").await, Ok(Some(true)));
        assert_eq!(probes.verdict("primary").await, Ok(Some(false)));
    }
}
