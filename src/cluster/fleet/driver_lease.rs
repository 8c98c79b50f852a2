//! Which replica drives the guarded rollout's steps: a lease, so that one
//! replica at a time judges a step and writes its decision, and a killed
//! driver's lease runs out for another replica to take over.
//!
//! Only a fleet has several replicas to choose from: a single process
//! drives its rollout itself.
//!
//! [`DriverLease`]: `{p}{rollout}:lease` (the holding replica's id, taken
//! and renewed every round by its holder, `RedisConn::hold`), under the
//! rollout's hash tag, where the rollout store keeps its keys
//! (`cluster::rollout`). A replica id only: nothing personal.

use std::time::Duration;

use crate::cluster::{error::ClusterError, redis::RedisConn};

/// The lease of the replica that drives the fleet's rollout.
#[derive(Debug, Clone)]
pub struct DriverLease {
    conn: RedisConn,
}

impl DriverLease {
    /// The lease on `conn`.
    pub(in crate::cluster) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    /// Takes the lease for `ttl`, or renews it when this replica holds it.
    /// `Ok(true)` while this replica holds it. Answers within the command
    /// timeout.
    pub async fn take(&self, ttl: Duration) -> Result<bool, ClusterError> {
        self.conn.check_up()?;
        self.conn.hold(self.conn.key("{rollout}:lease"), ttl).await
    }
}
