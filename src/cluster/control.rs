//! The fleet's channel control state: routing mode, drained channels and
//! contingency hold, as `SetRoutingMode`, `DrainChannel`/`UndrainChannel`
//! and a contingency hold set them on any replica.
//!
//! - [`MemoryControl`]: one process; the router's own state is the whole
//!   truth (`control` answers `None`) and there is no one to tell.
//! - [`RedisControl`]: `{p}control:mode`, `{p}control:drained` (a set),
//!   `{p}control:hold` (expires with the hold), `{p}control:seeded`; no
//!   expiry otherwise; on a Redis Cluster the four share the hash tag
//!   `{control}` (`{p}{control}:mode`, ...), as the seed script and the
//!   `MULTI`s touch them together. Each change is one `MULTI` that writes it and
//!   publishes `control` on `{p}events`; the other replicas re-read the
//!   whole state (`crate::cluster::redis::pubsub`), which also seeds it
//!   from the first replica to connect when Redis holds none.
//!
//! Channel names and modes only: nothing personal.

use std::{collections::BTreeSet, time::Duration};

use super::{
    BoxFuture, ClusterError, ready,
    redis::{Body, RedisConn, millis},
};

/// The fleet's channel control state. Channel names and modes travel as
/// text (`RoutingMode`'s `Display` form); the router parses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlState {
    /// The routing mode set with `SetRoutingMode`; `None`: never set in
    /// this fleet (each replica keeps its configured mode).
    pub mode: Option<String>,
    /// Drained channels.
    pub drained: BTreeSet<String>,
    /// What is left of a contingency hold, if one is active.
    pub hold: Option<Duration>,
}

/// One change of the control state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlChange {
    /// Sets the routing mode (its text form).
    Mode(String),
    /// Drains a channel.
    Drain(String),
    /// Undrains a channel.
    Undrain(String),
    /// Starts (or extends) a contingency hold.
    Hold(Duration),
}

/// Where the channel router keeps the control state the fleet shares.
/// Every method answers within the implementation's command timeout.
pub trait ControlStore: Send + Sync + 'static {
    /// The fleet's control state; `None` for a single process (its own
    /// router is the whole truth).
    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>>;

    /// Applies `change` for the whole fleet and tells the other replicas.
    /// An error means nothing was applied anywhere.
    fn change_control(&self, change: ControlChange) -> BoxFuture<Result<(), ClusterError>>;
}

/// The control state of one process: the router's own.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryControl;

impl ControlStore for MemoryControl {
    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>> {
        ready(Ok(None))
    }

    fn change_control(&self, _: ControlChange) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }
}

/// Writes a replica's control state only when Redis holds none (a fresh or
/// restarted Redis without persistence): the first replica to connect
/// seeds, the others read what it wrote. ARGV: mode, then drained names.
const SEED_SCRIPT: &str = "if redis.call('SET', KEYS[1], '1', 'NX') then \
       redis.call('SET', KEYS[2], ARGV[1]) \
       redis.call('DEL', KEYS[3]) \
       for i = 2, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end \
       return 1 end return 0";

/// The fleet's control state on Redis.
#[derive(Debug, Clone)]
pub struct RedisControl {
    conn: RedisConn,
}

impl RedisControl {
    /// The control state on `conn`.
    pub(super) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    /// `{p}control:<part>`; `{p}{control}:<part>` on a Redis Cluster,
    /// where the seed script and the `MULTI`s touch them together.
    fn key(&self, part: &str) -> String {
        self.conn.tagged_key("control", part)
    }

    /// Reads the whole state in one `MULTI`.
    pub(super) async fn read(&self) -> Result<ControlState, ClusterError> {
        let keys = [self.key("mode"), self.key("drained"), self.key("hold")];
        let (mode, drained, hold_ms) = self
            .conn
            .exec("MULTI GET SMEMBERS PTTL", move |mut c| async move {
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .get(&keys[0])
                    .smembers(&keys[1])
                    .pttl(&keys[2]);
                pipe.query_async::<(Option<String>, Vec<String>, i64)>(&mut c)
                    .await
            })
            .await?;
        Ok(ControlState {
            mode,
            drained: drained.into_iter().collect(),
            hold: u64::try_from(hold_ms)
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
        })
    }

    /// Writes `state` if Redis holds no control state ([`SEED_SCRIPT`]).
    pub(super) async fn seed(&self, state: ControlState) -> Result<(), ClusterError> {
        let keys = [self.key("seeded"), self.key("mode"), self.key("drained")];
        let mut args = vec![state.mode.unwrap_or_else(|| "auto".to_owned())];
        args.extend(state.drained);
        let seeded: i64 = self
            .conn
            .exec("EVAL", move |mut c| async move {
                redis::cmd("EVAL")
                    .arg(SEED_SCRIPT)
                    .arg(3)
                    .arg(&keys[..])
                    .arg(&args[..])
                    .query_async(&mut c)
                    .await
            })
            .await?;
        if seeded == 1 {
            tracing::info!("fleet control state seeded from this replica (Redis held none)");
        }
        Ok(())
    }
}

impl ControlStore for RedisControl {
    fn control(&self) -> BoxFuture<Result<Option<ControlState>, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            this.read().await.map(Some)
        })
    }

    fn change_control(&self, change: ControlChange) -> BoxFuture<Result<(), ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            this.conn.check_up()?;
            let message = this.conn.message(Body::Control);
            let events = this.conn.events_key();
            let mut pipe = redis::pipe();
            pipe.atomic();
            let command = match &change {
                ControlChange::Mode(mode) => {
                    pipe.set(this.key("mode"), mode).ignore();
                    "MULTI SET PUBLISH"
                }
                ControlChange::Drain(name) => {
                    pipe.sadd(this.key("drained"), name).ignore();
                    "MULTI SADD PUBLISH"
                }
                ControlChange::Undrain(name) => {
                    pipe.srem(this.key("drained"), name).ignore();
                    "MULTI SREM PUBLISH"
                }
                ControlChange::Hold(d) => {
                    pipe.cmd("SET")
                        .arg(this.key("hold"))
                        .arg("1")
                        .arg("PX")
                        .arg(millis(*d))
                        .ignore();
                    "MULTI SET PUBLISH"
                }
            };
            pipe.cmd("SET").arg(this.key("seeded")).arg("1").ignore();
            pipe.publish(events, message).ignore();
            this.conn
                .exec(command, move |mut c| async move {
                    pipe.query_async::<()>(&mut c).await
                })
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_process_has_no_fleet_control_state() {
        assert_eq!(MemoryControl.control().await, Ok(None));
        assert_eq!(
            MemoryControl
                .change_control(ControlChange::Drain("a".into()))
                .await,
            Ok(())
        );
    }
}
