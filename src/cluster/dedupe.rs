//! Webhook deliveries accepted once: the first delivery of a notice is
//! handed to the watches, a repeat (the sender retrying, or the same
//! notice sent to two replicas) is acknowledged and dropped.
//!
//! A delivery the fleet saw first is then told to the other replicas
//! ([`FleetNotices`](super::FleetNotices)), with the same
//! [`DeliveryKey::digest`] this store keys on.
//!
//! - [`MemoryDedupe`]: one process, and each replica's own memory in a
//!   fleet; deliveries remembered in a bounded, expiring map (`[webhook]
//!   dedupe_ttl_secs`, `dedupe_max_entries`).
//! - [`RedisDedupe`]: `{p}dedupe:<digest>` (`SET NX`, expiring with the
//!   same TTL), remembered locally too, so that an outage does not reopen
//!   the door to duplicates on this replica. A digest only: no appkey,
//!   nothing personal.
//! - [`EmbeddedDedupe`]: a single replica's, on the embedded store
//!   (table `dedupe`, the digest only) behind a [`MemoryDedupe`].

mod embedded;

pub use embedded::EmbeddedDedupe;

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::{
    future::{BoxFuture, ready},
    redis::{RedisConn, millis},
};
use crate::{domain::JourneyRef, ttl::TtlMap};

/// What identifies a webhook delivery for dedupe.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeliveryKey {
    /// The sender's `webhook-id`.
    Id(String),
    /// No id: the journey and the announced status label.
    Journey(JourneyRef, &'static str),
}

impl DeliveryKey {
    /// A short, non-reversible id of the delivery (hex of SHA-256), as it
    /// travels in notices and keys.
    pub fn digest(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let text = match self {
            DeliveryKey::Id(id) => format!("id:{id}"),
            DeliveryKey::Journey(j, s) => format!("journey:{j}:{s}"),
        };
        let hash = Sha256::digest(text.as_bytes());
        hash[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Where the webhook receiver dedupes deliveries. Every method answers
/// within the implementation's command timeout.
pub trait DedupeStore: Send + Sync + 'static {
    /// True the first time `key` is seen (across the fleet, in a fleet)
    /// within the dedupe TTL. Never fails: unreachable, it decides for
    /// this replica.
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool>;
}

/// The deliveries one process has seen.
pub struct MemoryDedupe {
    seen: Mutex<TtlMap<DeliveryKey, ()>>,
}

impl std::fmt::Debug for MemoryDedupe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDedupe").finish_non_exhaustive()
    }
}

impl MemoryDedupe {
    /// Deliveries remembered `ttl`, at most `max_entries` of them.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            seen: Mutex::new(TtlMap::new(ttl, max_entries)),
        }
    }

    /// [`DedupeStore::first_delivery`], synchronously.
    pub fn first_delivery_now(&self, key: &DeliveryKey) -> bool {
        crate::sync::lock(&self.seen).insert_if_absent(key.clone(), (), Instant::now())
    }
}

impl DedupeStore for MemoryDedupe {
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool> {
        ready(self.first_delivery_now(key))
    }
}

/// The fleet's webhook dedupe on Redis.
#[derive(Debug, Clone)]
pub struct RedisDedupe {
    conn: RedisConn,
    ttl: Duration,
    /// Dedupe while Redis is unreachable.
    local: std::sync::Arc<MemoryDedupe>,
}

impl RedisDedupe {
    /// The dedupe on `conn`; deliveries remembered `ttl` (and at most
    /// `max_entries` of them in this process).
    pub(super) fn new(conn: RedisConn, ttl: Duration, max_entries: usize) -> Self {
        Self {
            conn,
            ttl,
            local: std::sync::Arc::new(MemoryDedupe::new(ttl, max_entries)),
        }
    }
}

impl DedupeStore for RedisDedupe {
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool> {
        let this = self.clone();
        let key = key.clone();
        Box::pin(async move {
            // Remembered here too, so an outage does not reopen the door to
            // duplicates on this replica.
            let locally_first = this.local.first_delivery_now(&key);
            if this.conn.check_up().is_err() {
                return locally_first;
            }
            let redis_key = this.conn.key(&format!("dedupe:{}", key.digest()));
            let ttl = millis(this.ttl);
            let set: Result<Option<String>, _> = this
                .conn
                .exec("SET", move |mut c| async move {
                    redis::cmd("SET")
                        .arg(&redis_key)
                        .arg("1")
                        .arg("NX")
                        .arg("PX")
                        .arg(ttl)
                        .query_async(&mut c)
                        .await
                })
                .await;
            match set {
                // Seen here before (perhaps while Redis was down): a duplicate
                // whatever Redis says.
                Ok(answer) => answer.is_some() && locally_first,
                Err(_) => locally_first,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_delivery_is_first_once_until_it_expires() {
        let state = MemoryDedupe::new(Duration::from_secs(60), 100_000);
        let key = DeliveryKey::Id("msg_1".into());
        assert!(state.first_delivery(&key).await);
        assert!(!state.first_delivery(&key).await);
        assert!(state.first_delivery(&DeliveryKey::Id("msg_2".into())).await);
    }
}
