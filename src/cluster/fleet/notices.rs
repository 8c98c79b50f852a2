//! Completion notices told to the other replicas of the fleet.
//!
//! A replica that accepts a webhook delivery the fleet saw first
//! (`cluster::dedupe`) tells the others, whose watchers of the journey
//! then read the result themselves; a replica that read a result on its
//! read turn and found it final announces it the same way
//! ([`super::read_turns`]). Only a fleet has anyone to tell: a single
//! process's watches hear its own webhook receiver directly.
//!
//! [`FleetNotices`] appends each notice to the event stream
//! `{p}{fleet}:events` as (journey reference, status, delivery digest):
//! no appkey, no result, nothing personal. Receiving notices is the
//! supervisor's task, which hands them to the replica as
//! [`FleetEvent::Notice`](super::FleetEvent::Notice).

use super::event_log::{self, Body};
use crate::{
    cluster::{error::ClusterError, redis::RedisConn},
    domain::JourneyRef,
};

/// The delivery of a notice that announces a result a replica read on its
/// read turn and found final, rather than a webhook delivery. The same
/// text as the releases that also shared the result on Redis wrote, so
/// that both understand each other's announcements.
pub const RESULT_READ: &str = "result-read";

/// A completion notice as it crosses the fleet: no appkey, no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNotice {
    /// The journey.
    pub journey: JourneyRef,
    /// The announced status label (`complete`, `error`).
    pub status: String,
    /// [`DeliveryKey::digest`](crate::cluster::DeliveryKey::digest) of the
    /// webhook delivery, or [`RESULT_READ`].
    pub delivery: String,
}

impl FleetNotice {
    /// Whether another replica read the result and found it final (not
    /// only a webhook delivery, which may come before the result settles).
    pub fn announces_result(&self) -> bool {
        self.delivery == RESULT_READ
    }
}

/// Tells the other replicas of the fleet the notices this one accepted.
#[derive(Debug, Clone)]
pub struct FleetNotices {
    conn: RedisConn,
}

impl FleetNotices {
    /// Notices appended to the event stream on `conn`.
    pub(in crate::cluster) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    /// The `XADD` that appends `notice` to the event stream, for a caller
    /// that sends it itself (in the background, or in a `MULTI`).
    pub(in crate::cluster) fn append(&self, notice: FleetNotice) -> redis::Cmd {
        event_log::append(
            &self.conn,
            Body::Notice {
                journey_ref: notice.journey.to_string(),
                status: notice.status,
                delivery: notice.delivery,
            },
        )
    }

    /// Tells the other replicas `notice`. Answers within the command
    /// timeout; an error means the other replicas' watchers will read the
    /// result by polling.
    pub async fn publish(&self, notice: FleetNotice) -> Result<(), ClusterError> {
        self.conn.check_up()?;
        let append = self.append(notice);
        self.conn
            .exec("XADD", move |mut c| async move {
                append.query_async::<String>(&mut c).await
            })
            .await
            .map(|_| ())
    }
}
