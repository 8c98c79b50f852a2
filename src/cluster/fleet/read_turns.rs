//! Whose turn it is to read a watched journey's result from the vendor,
//! and the word that the result is final.
//!
//! Why: N replicas watching one journey must not poll the vendor N times
//! per interval. One replica at a time holds the journey's read turn and
//! polls; when it reads the final result it announces it (a notice:
//! journey reference and status, no result) and gives the turn up. Each
//! replica that holds watchers of the journey then reads the final result
//! once, itself, for all its watchers: Redis carries the fact that the
//! result is there, never the result, whose photos weigh hundreds of KiB
//! (`docs/capacity.md`). A single process has no turns to take: its
//! watches read whenever they need to.
//!
//! [`ReadTurns`]: `{p}turn:<ref>` (the holding replica's id, taken and
//! renewed by its holder on each read, `RedisConn::hold`, deleted by it
//! once the result is final); the announcement on `{p}{fleet}:events`, a
//! notice whose delivery is [`RESULT_READ`]. While Redis is unreachable
//! every replica takes its own turn (watchers fall back to polling, never
//! to waiting).
//!
//! Releases before this one also wrote the final result, sealed, to
//! `{p}result:<ref>` and announced it the same way: the announcement is
//! the same message, so replicas of both releases share a fleet during a
//! rolling upgrade (`docs/operations.md`).

use std::time::Duration;

use super::notices::{FleetNotice, FleetNotices, RESULT_READ};
use crate::{cluster::redis::RedisConn, domain::JourneyRef};

/// The fleet's read turns of watched journeys.
#[derive(Debug, Clone)]
pub struct ReadTurns {
    conn: RedisConn,
    notices: FleetNotices,
}

impl ReadTurns {
    /// Turns on `conn`, announced through `notices`.
    pub(in crate::cluster) fn new(conn: RedisConn, notices: FleetNotices) -> Self {
        Self { conn, notices }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["turn:", journey.as_str()])
    }

    /// Claims the next result read of `journey` for `turn`: true when no
    /// other replica holds the turn (or Redis cannot tell), so this one
    /// reads; false when another replica polls for the fleet. Answers
    /// within the command timeout.
    pub async fn take(&self, journey: &JourneyRef, turn: Duration) -> bool {
        if self.conn.check_up().is_err() {
            return true;
        }
        // Taken, or Redis did not answer: read, as one process would.
        !matches!(self.conn.hold(self.key(journey), turn).await, Ok(false))
    }

    /// Tells the replicas watching `journey` that the result this replica
    /// read on its turn is final, with a notice of `status` (`complete`,
    /// `error`) and nothing of the result, and gives the turn up: each of
    /// them reads the result once for its own watchers.
    ///
    /// Sent in the background: the reader that announces ends with its
    /// watchers, and its task is aborted as the last of them leaves,
    /// which would cut the announcement (and the turn's release) short.
    pub fn announce(&self, journey: &JourneyRef, status: &str) {
        if self.conn.check_up().is_err() {
            return;
        }
        let conn = self.conn.clone();
        let turn = self.key(journey);
        let append = self.notices.append(FleetNotice {
            journey: journey.clone(),
            status: status.to_owned(),
            delivery: RESULT_READ.to_owned(),
        });
        tokio::spawn(async move {
            // Lost, the other replicas' watchers still read once the turn
            // expires (a step and the read timeout): a delay, never a
            // stranded watch.
            let _ = conn
                .exec("XADD", move |mut c| async move {
                    append.query_async::<String>(&mut c).await
                })
                .await;
            // Given up, so that a replica of the release before this one,
            // which waits for the turn after the announcement, reads at
            // once; and nobody polls a final result.
            let origin = conn.origin().to_owned();
            let _ = conn.delete_if(turn, origin).await;
        });
    }
}
