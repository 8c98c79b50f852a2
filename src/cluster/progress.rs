//! What the fleet knows of a watched journey's way to its result: whether
//! the steps that produce a result went through the gateway, whose turn it
//! is to poll the vendor for the result, and that the result is final.
//!
//! Why: a watch must start from the current state (a journey already
//! complete answers at once, without waiting for a webhook that may never
//! come), and N replicas watching one journey must not poll the vendor N
//! times per interval. One replica at a time holds the journey's read
//! turn and polls; when it reads the final result it announces it (a
//! notice: journey reference and status, no result) and gives the turn
//! up. Each replica that holds watchers of the journey then reads the
//! final result once, itself, for all its watchers: Redis carries the
//! fact that the result is there, never the result, whose photos weigh
//! hundreds of KiB (`docs/capacity.md`).
//!
//! - [`MemoryProgress`]: one process. The submitted marks are kept as long
//!   as the journey records (`[journeys] retention_hours`, `max_entries`);
//!   the turn is always this process's, and there is no one to tell.
//! - [`RedisProgress`]: `{p}submitted:<ref>` (`1`, expiring with the
//!   journey's retention); `{p}turn:<ref>` (the holding replica's id, `SET
//!   NX PX` by [`TURN_SCRIPT`], renewed by its holder on each read,
//!   deleted by it once the result is final); the announcement on
//!   `{p}{fleet}:events`, a notice whose delivery is
//!   [`RESULT_READ`](super::RESULT_READ). While Redis is unreachable every
//!   replica takes its own turn (watchers fall back to polling, never to
//!   waiting).
//!
//! Releases before this one also wrote the final result, sealed, to
//! `{p}result:<ref>` and announced it the same way: the announcement is
//! the same message, so replicas of both releases share a fleet during a
//! rolling upgrade (`docs/operations.md`).

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::{
    BoxFuture, RESULT_READ, ready,
    redis::{Body, RedisConn, event_log, millis},
};
use crate::{domain::JourneyRef, ttl::TtlMap};

/// Takes the read turn of `KEYS[1]` for replica `ARGV[1]`, for `ARGV[2]`
/// milliseconds, when nobody holds it or this replica already does.
const TURN_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
    if v == false or v == ARGV[1] then \
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return 0";

/// Where the journey watches keep what it learns of a journey's progress.
/// Every method answers within the implementation's command timeout and
/// never fails: unreachable, it answers as one process would.
pub trait ProgressStore: Send + Sync + 'static {
    /// Notes that the steps of `journey` that produce a result (the 2D
    /// snapshots, the 3D liveness proof) went through the gateway.
    fn mark_submitted(&self, journey: &JourneyRef) -> BoxFuture<()>;

    /// Whether [`ProgressStore::mark_submitted`] was called for `journey`,
    /// on any replica, within its retention.
    fn submitted(&self, journey: &JourneyRef) -> BoxFuture<bool>;

    /// Claims the next result read of `journey` for `turn`: true when no
    /// other replica holds the turn (or Redis cannot tell), so this one
    /// reads; false when another replica polls for the fleet.
    fn take_read_turn(&self, journey: &JourneyRef, turn: Duration) -> BoxFuture<bool>;

    /// Tells the replicas watching `journey` that the result this replica
    /// read on its turn is final, with a notice of `status` (`complete`,
    /// `error`) and nothing of the result, and gives the turn up: each of
    /// them reads the result once for its own watchers. Nothing to do for
    /// one process.
    fn announce_result(&self, journey: &JourneyRef, status: &str) -> BoxFuture<()>;
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

    fn take_read_turn(&self, _: &JourneyRef, _: Duration) -> BoxFuture<bool> {
        ready(true)
    }

    fn announce_result(&self, _: &JourneyRef, _: &str) -> BoxFuture<()> {
        ready(())
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

    fn key(&self, what: &str, journey: &JourneyRef) -> String {
        self.conn.key_of(&[what, journey.as_str()])
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
            let key = self.key("submitted:", journey);
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
        let key = self.key("submitted:", journey);
        Box::pin(async move {
            this.conn.check_up().is_ok() && matches!(this.conn.get(key).await, Ok(Some(_)))
        })
    }

    fn take_read_turn(&self, journey: &JourneyRef, turn: Duration) -> BoxFuture<bool> {
        let this = self.clone();
        let key = self.key("turn:", journey);
        Box::pin(async move {
            if this.conn.check_up().is_err() {
                return true;
            }
            let origin = this.conn.origin().to_owned();
            let ttl = millis(turn);
            let taken = this
                .conn
                .exec("EVAL", move |mut c| async move {
                    redis::cmd("EVAL")
                        .arg(TURN_SCRIPT)
                        .arg(1)
                        .arg(&key)
                        .arg(&origin)
                        .arg(ttl)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await;
            // Taken (1), or Redis did not answer: read, as one process
            // would.
            !matches!(taken, Ok(0))
        })
    }

    /// Sent in the background: the reader that announces ends with its
    /// watchers, and its task is aborted as the last of them leaves,
    /// which would cut the announcement (and the turn's release) short.
    fn announce_result(&self, journey: &JourneyRef, status: &str) -> BoxFuture<()> {
        if self.conn.check_up().is_err() {
            return ready(());
        }
        let this = self.clone();
        let turn = self.key("turn:", journey);
        let append = event_log::append(
            &self.conn,
            Body::Notice {
                journey_ref: journey.to_string(),
                status: status.to_owned(),
                delivery: RESULT_READ.to_owned(),
            },
        );
        tokio::spawn(async move {
            // Lost, the other replicas' watchers still read once the turn
            // expires (a step and the read timeout): a delay, never a
            // stranded watch.
            let _ = this
                .conn
                .exec("XADD", move |mut c| async move {
                    append.query_async::<String>(&mut c).await
                })
                .await;
            // Given up, so that a replica of the release before this one,
            // which waits for the turn after the announcement, reads at
            // once; and nobody polls a final result.
            let _ = this
                .conn
                .delete_if(turn, this.conn.origin().to_owned())
                .await;
        });
        ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_process_marks_submitted_journeys_and_always_has_the_turn() {
        let progress = MemoryProgress::new(Duration::from_secs(60), 10);
        let journey = JourneyRef::parse("j-0123456789abcdef").expect("a reference");
        assert!(!progress.submitted(&journey).await);
        progress.mark_submitted(&journey).await;
        assert!(progress.submitted(&journey).await);
        assert!(
            progress
                .take_read_turn(&journey, Duration::from_secs(1))
                .await
        );
        assert!(
            progress
                .take_read_turn(&journey, Duration::from_secs(1))
                .await
        );
        progress.announce_result(&journey, "complete").await;
        assert!(
            progress
                .take_read_turn(&journey, Duration::from_secs(1))
                .await
        );
    }
}
