//! A single replica's probe verdicts on the embedded store, behind its
//! memory: a channel that failed its probe still gets no weight after a
//! restart.
//!
//! Table `probes`: the channel's name -> `1` or `0`, no expiry (a verdict
//! stands until the next probe).

use super::{MemoryProbes, ProbeStore};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table},
        embedded_tier::{read_failed, refusal},
        error::ClusterError,
        future::BoxFuture,
    },
    sync::lock,
};

/// The verdicts' table.
const PROBES: Table = Table::new("probes");

/// A single replica's verdicts, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedProbes {
    memory: MemoryProbes,
    store: Embedded,
}

impl EmbeddedProbes {
    /// The verdicts of `store`, read back into memory now.
    pub fn open(store: Embedded) -> Self {
        let memory = MemoryProbes::default();
        match store.scan(PROBES, b"", usize::MAX) {
            Ok(found) => {
                let mut verdicts = lock(&memory.verdicts);
                for (channel, record) in found {
                    if let Ok(channel) = String::from_utf8(channel) {
                        verdicts.insert(channel, record.value.as_slice() == b"1");
                    }
                }
            }
            Err(e) => read_failed(&e),
        }
        Self { memory, store }
    }
}

impl ProbeStore for EmbeddedProbes {
    fn set_verdict(&self, channel: &str, conforming: bool) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        let channel = channel.to_owned();
        Box::pin(async move {
            let value: &[u8] = if conforming { b"1" } else { b"0" };
            this.store
                .put(PROBES, channel.as_bytes(), value, Expiry::NEVER)
                .await
                .map_err(refusal)?;
            this.memory.set_verdict(&channel, conforming).await
        })
    }

    fn verdict(&self, channel: &str) -> BoxFuture<Result<Option<bool>, ClusterError>> {
        self.memory.verdict(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::embedded::StoreConfig;

    #[tokio::test]
    async fn a_verdict_stands_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        {
            let probes = EmbeddedProbes::open(Embedded::open(&config, None).unwrap());
            probes.set_verdict("vendor-b", false).await.unwrap();
            probes.set_verdict("vendor-a", true).await.unwrap();
        }
        let probes = EmbeddedProbes::open(Embedded::open(&config, None).unwrap());
        assert_eq!(probes.verdict("vendor-a").await, Ok(Some(true)));
        assert_eq!(probes.verdict("vendor-b").await, Ok(Some(false)));
        assert_eq!(probes.verdict("vendor-c").await, Ok(None));
    }
}
