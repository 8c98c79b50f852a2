//! Webhook deliveries accepted once for the fleet, and the completion
//! notice told to the other replicas.
//!
//! The notice fan-out lives here, with the dedupe, and not with the
//! journey directory: both are the webhook receiver's, and only its; a
//! notice is published only for a delivery the fleet saw first, and
//! carries that delivery's [`DeliveryKey::digest`], the same digest the
//! dedupe keys on. Together they are one step: "accept this delivery once
//! for the fleet, and tell the fleet". Receiving notices is not a store's
//! job: the event stream's task hands them to the replica as
//! [`FleetEvent::Notice`](super::FleetEvent::Notice), on the channel that
//! also carries control changes.
//!
//! - [`MemoryDedupe`]: one process; deliveries remembered in a bounded,
//!   expiring map (`[webhook] dedupe_ttl_secs`, `dedupe_max_entries`);
//!   there is no one to tell.
//! - [`RedisDedupe`]: `{p}dedupe:<digest>` (`SET NX`, expiring with the
//!   same TTL), remembered locally too, so that an outage does not reopen
//!   the door to duplicates on this replica; notices are appended to the
//!   event stream `{p}{fleet}:events` as (journey reference, status,
//!   delivery digest): no appkey, no result, nothing personal.

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::{
    BoxFuture, ClusterError, ready,
    redis::{Body, RedisConn, event_log, millis},
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

/// The delivery of a notice that announces a result a replica read on its
/// read turn and found final (`cluster::progress`), rather than a webhook
/// delivery. The same text as the releases that also shared the result
/// on Redis wrote, so that both understand each other's announcements.
pub const RESULT_READ: &str = "result-read";

/// A completion notice as it crosses the fleet: no appkey, no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNotice {
    /// The journey.
    pub journey: JourneyRef,
    /// The announced status label (`complete`, `error`).
    pub status: String,
    /// [`DeliveryKey::digest`] of the delivery, or [`RESULT_READ`].
    pub delivery: String,
}

impl FleetNotice {
    /// Whether another replica read the result and found it final (not
    /// only a webhook delivery, which may come before the result settles).
    pub fn announces_result(&self) -> bool {
        self.delivery == RESULT_READ
    }
}

/// Where the webhook receiver dedupes deliveries and fans notices out.
/// Every method answers within the implementation's command timeout.
pub trait DedupeStore: Send + Sync + 'static {
    /// True the first time `key` is seen across the fleet within the
    /// dedupe TTL. Never fails: unreachable, it decides for this replica.
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool>;

    /// Fans a notice this replica accepted out to the other replicas.
    fn publish_notice(&self, notice: FleetNotice) -> BoxFuture<Result<(), ClusterError>>;
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

    fn publish_notice(&self, _: FleetNotice) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }
}

/// The fleet's webhook dedupe and notice fan-out on Redis.
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

    fn publish_notice(&self, notice: FleetNotice) -> BoxFuture<Result<(), ClusterError>> {
        let conn = self.conn.clone();
        Box::pin(async move {
            conn.check_up()?;
            let append = event_log::append(
                &conn,
                Body::Notice {
                    journey_ref: notice.journey.to_string(),
                    status: notice.status,
                    delivery: notice.delivery,
                },
            );
            conn.exec("XADD", move |mut c| async move {
                append.query_async::<String>(&mut c).await
            })
            .await
            .map(|_| ())
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
