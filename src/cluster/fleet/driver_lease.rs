//! Which replica drives the guarded rollout's steps: a lease, so that one
//! replica at a time judges a step and writes its decision, and a killed
//! driver's lease runs out for another replica to take over.
//!
//! Only a fleet has several replicas to choose from: a single process
//! drives its rollout itself.
//!
//! [`DriverLease`]: `{p}{rollout}:lease` (the holding replica's id, `SET
//! NX PX` by `LEASE_SCRIPT`, renewed by its holder every round), under the
//! rollout's hash tag, where the rollout store keeps its keys
//! (`cluster::rollout`). A replica id only: nothing personal.

use std::time::Duration;

use crate::cluster::{
    error::ClusterError,
    redis::{RedisConn, millis},
};

/// Takes `KEYS[1]` for `ARGV[1]` for `ARGV[2]` ms, or renews it when
/// `ARGV[1]` holds it.
const LEASE_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
     if v == false or v == ARGV[1] then \
       redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return 0";

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
        let key = self.conn.key("{rollout}:lease");
        let holder = self.conn.origin().to_owned();
        let ttl = millis(ttl);
        let held: i64 = self
            .conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(LEASE_SCRIPT)
                    .arg(1)
                    .arg(&key)
                    .arg(&holder)
                    .arg(ttl)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(held == 1)
    }
}
