//! A single replica's journey progress on the embedded store behind its
//! memory: a watch opened again after a restart reads a journey whose
//! steps went through at once, rather than waiting out its grace.
//!
//! Table `submitted`: the journey reference -> nothing, expiring with
//! the journey's retention.

use std::{sync::Arc, time::Duration};

use super::{MemoryProgress, ProgressStore};
use crate::{
    cluster::{
        embedded::{Embedded, Expiry, Table},
        embedded_tier::{read_failed, write_failed},
        future::{BoxFuture, ready},
    },
    domain::JourneyRef,
};

/// The marks' table.
const SUBMITTED: Table = Table::new("submitted");

/// A single replica's marks, durable, with memory in front.
#[derive(Debug, Clone)]
pub struct EmbeddedProgress {
    memory: Arc<MemoryProgress>,
    store: Embedded,
    retention: Duration,
}

impl EmbeddedProgress {
    /// Marks kept `retention` in `store` (at most `max_entries` of them
    /// in memory).
    pub fn new(store: Embedded, retention: Duration, max_entries: usize) -> Self {
        Self {
            memory: Arc::new(MemoryProgress::new(retention, max_entries)),
            store,
            retention,
        }
    }
}

impl ProgressStore for EmbeddedProgress {
    /// Marked in memory at once, and in the file before it answers; a
    /// mark the file refuses is kept in memory (a lost mark delays a
    /// watch after a restart, never strands it).
    fn mark_submitted(&self, journey: &JourneyRef) -> BoxFuture<()> {
        self.memory.mark_now(journey);
        let this = self.clone();
        let journey = journey.clone();
        Box::pin(async move {
            let written = this
                .store
                .put(
                    SUBMITTED,
                    journey.as_str().as_bytes(),
                    b"",
                    Expiry::after(this.retention),
                )
                .await;
            if let Err(e) = written {
                write_failed(&e);
            }
        })
    }

    /// Memory, else the file (a mark from before a restart), which is
    /// then held in memory.
    fn submitted(&self, journey: &JourneyRef) -> BoxFuture<bool> {
        if self.memory.marked_now(journey) {
            return ready(true);
        }
        let marked = match self.store.get(SUBMITTED, journey.as_str().as_bytes()) {
            Ok(found) => found.is_some(),
            Err(e) => {
                read_failed(&e);
                false
            }
        };
        if marked {
            self.memory.mark_now(journey);
        }
        ready(marked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::embedded::StoreConfig;

    #[tokio::test]
    async fn a_mark_made_before_a_restart_is_read_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let journey = JourneyRef::parse("j-0123456789abcdef").expect("a reference");
        let day = Duration::from_secs(86_400);
        {
            let progress = EmbeddedProgress::new(Embedded::open(&config, None).unwrap(), day, 10);
            assert!(!progress.submitted(&journey).await);
            progress.mark_submitted(&journey).await;
        }
        let progress = EmbeddedProgress::new(Embedded::open(&config, None).unwrap(), day, 10);
        assert!(progress.submitted(&journey).await);
    }
}
