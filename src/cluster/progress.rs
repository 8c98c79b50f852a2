//! Whether a watched journey's result may exist yet: the steps that
//! produce a result (the 2D snapshots, the 3D liveness proof) went
//! through the gateway.
//!
//! Why: a watch must start from the current state. A journey whose steps
//! went through the gateway is read at once, without waiting for a
//! webhook that may never come; one whose steps did not is left to its
//! notice (or the grace period). Which replica of a fleet reads the
//! result, and the word that it is final, are the fleet's alone
//! (`cluster::fleet::read_turns`).
//!
//! - [`MemoryProgress`]: one process, and each replica's own marks in a
//!   fleet. Kept as long as the journey records (`[journeys]
//!   retention_hours`, `max_entries`).
//! - [`RedisProgress`]: `{p}submitted:<ref>` (`1`, expiring with the
//!   journey's retention), with this replica's marks in front: a watch
//!   opened on any replica reads at once.
//! - [`EmbeddedProgress`]: a single replica's marks on the embedded
//!   store (table `submitted`), behind a [`MemoryProgress`].

mod embedded;

pub use embedded::EmbeddedProgress;

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::{
    future::{BoxFuture, ready},
    redis::{RedisConn, millis},
};
use crate::{domain::JourneyRef, ttl::TtlMap};

/// Where the journey watches keep what they learn of a journey's
/// progress. Every method answers within the implementation's command
/// timeout and never fails: unreachable, it answers with this replica's
/// own marks.
pub trait ProgressStore: Send + Sync + 'static {
    /// Notes that the steps of `journey` that produce a result (the 2D
    /// snapshots, the 3D liveness proof) went through the gateway.
    fn mark_submitted(&self, journey: &JourneyRef) -> BoxFuture<()>;

    /// Whether [`ProgressStore::mark_submitted`] was called for `journey`,
    /// on any replica, within its retention.
    fn submitted(&self, journey: &JourneyRef) -> BoxFuture<bool>;
}

/// The progress one process knows.
pub struct MemoryProgress {
    submitted: Mutex<TtlMap<JourneyRef, ()>>,
}

impl std::fmt::Debug for MemoryProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryProgress").finish_non_exhaustive()
    }
}

impl MemoryProgress {
    /// Marks kept `retention`, at most `max_entries` of them (the journey
    /// records' bounds: one mark per journey).
    pub fn new(retention: Duration, max_entries: usize) -> Self {
        Self {
            submitted: Mutex::new(TtlMap::new(retention, max_entries)),
        }
    }

    fn mark_now(&self, journey: &JourneyRef) {
        crate::sync::lock(&self.submitted).insert(journey.clone(), (), Instant::now());
    }

    fn marked_now(&self, journey: &JourneyRef) -> bool {
        crate::sync::lock(&self.submitted)
            .get(journey, Instant::now())
            .is_some()
    }
}

impl ProgressStore for MemoryProgress {
    fn mark_submitted(&self, journey: &JourneyRef) -> BoxFuture<()> {
        self.mark_now(journey);
        ready(())
    }

    fn submitted(&self, journey: &JourneyRef) -> BoxFuture<bool> {
        ready(self.marked_now(journey))
    }
}

/// The fleet's journey progress on Redis, with this replica's marks in
/// front.
#[derive(Clone)]
pub struct RedisProgress {
    conn: RedisConn,
    retention: Duration,
    local: std::sync::Arc<MemoryProgress>,
}

impl std::fmt::Debug for RedisProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisProgress").finish_non_exhaustive()
    }
}

impl RedisProgress {
    /// Marks kept `retention` (at most `max_entries` of them here).
    pub(super) fn new(conn: RedisConn, retention: Duration, max_entries: usize) -> Self {
        Self {
            conn,
            retention,
            local: std::sync::Arc::new(MemoryProgress::new(retention, max_entries)),
        }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["submitted:", journey.as_str()])
    }
}

impl ProgressStore for RedisProgress {
    /// Marked here at once; written to Redis in the background, so the
    /// liveness call that marks waits for no Redis round trip. A replica
    /// that misses the mark still reads the result once its grace ends: a
    /// lost mark delays, never strands.
    fn mark_submitted(&self, journey: &JourneyRef) -> BoxFuture<()> {
        self.local.mark_now(journey);
        if self.conn.check_up().is_ok() {
            let conn = self.conn.clone();
            let key = self.key(journey);
            let ttl = millis(self.retention);
            tokio::spawn(async move {
                let _ = conn.set_px(key, "1".to_owned(), ttl).await;
            });
        }
        ready(())
    }

    fn submitted(&self, journey: &JourneyRef) -> BoxFuture<bool> {
        if self.local.marked_now(journey) {
            return ready(true);
        }
        let this = self.clone();
        let key = self.key(journey);
        Box::pin(async move {
            this.conn.check_up().is_ok() && matches!(this.conn.get(key).await, Ok(Some(_)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_process_marks_submitted_journeys() {
        let progress = MemoryProgress::new(Duration::from_secs(60), 10);
        let journey = JourneyRef::parse("j-0123456789abcdef").expect("a reference");
        assert!(!progress.submitted(&journey).await);
        progress.mark_submitted(&journey).await;
        assert!(progress.submitted(&journey).await);
    }
}
