//! The webhook deliveries a single replica has seen, on the embedded
//! store behind its memory: a delivery seen before a restart is still a
//! repeat after it.
//!
//! Table `dedupe`: [`DeliveryKey::digest`] -> nothing, expiring with
//! `[webhook] dedupe_ttl_secs`. A digest only: no appkey, nothing
//! personal.

use std::{sync::Arc, time::Duration};

use super::{DedupeStore, DeliveryKey, MemoryDedupe};
use crate::cluster::{
    embedded::{Embedded, Expiry, Table},
    embedded_tier::refusal,
    error::ClusterError,
    future::{BoxFuture, ready},
};

/// The deliveries' table.
const DEDUPE: Table = Table::new("dedupe");

/// A single replica's webhook dedupe, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedDedupe {
    memory: Arc<MemoryDedupe>,
    store: Embedded,
    ttl: Duration,
}

impl EmbeddedDedupe {
    /// Deliveries remembered `ttl` in `store` (and at most `max_entries`
    /// of them in memory).
    pub fn new(store: Embedded, ttl: Duration, max_entries: usize) -> Self {
        Self {
            memory: Arc::new(MemoryDedupe::new(ttl, max_entries)),
            store,
            ttl,
        }
    }
}

impl DedupeStore for EmbeddedDedupe {
    /// A repeat in memory is a repeat; a first here is first unless the
    /// file saw it (before a restart). Should the file fail, memory
    /// decides.
    fn first_delivery(&self, key: &DeliveryKey) -> BoxFuture<bool> {
        if !self.memory.first_delivery_now(key) {
            return ready(false);
        }
        let this = self.clone();
        let digest = key.digest();
        Box::pin(async move {
            let inserted = this
                .store
                .insert(DEDUPE, digest.as_bytes(), b"", Expiry::after(this.ttl))
                .await;
            match inserted.map_err(refusal) {
                Ok(()) => true,
                Err(ClusterError::Taken) => false,
                Err(_) => true,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::embedded::StoreConfig;

    #[tokio::test]
    async fn a_delivery_seen_before_a_restart_is_a_repeat_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let key = DeliveryKey::Id("msg_1".into());
        let ttl = Duration::from_secs(60);
        {
            let dedupe = EmbeddedDedupe::new(Embedded::open(&config, None).unwrap(), ttl, 10);
            assert!(dedupe.first_delivery(&key).await);
            assert!(!dedupe.first_delivery(&key).await);
        }
        let dedupe = EmbeddedDedupe::new(Embedded::open(&config, None).unwrap(), ttl, 10);
        assert!(!dedupe.first_delivery(&key).await);
        assert!(
            dedupe
                .first_delivery(&DeliveryKey::Id("msg_2".into()))
                .await
        );
    }
}
