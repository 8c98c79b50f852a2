//! The fleet's channel control state: routing mode, drained channels and
//! contingency hold, as `SetRoutingMode`, `DrainChannel`/`UndrainChannel`
//! and a contingency hold set them on any replica.
//!
//! Only a fleet has one: a single process's router holds its own control
//! state, which is the whole truth, and there is no one to tell of a
//! change.
//!
//! [`FleetControl`], on Redis: `{p}{fleet}:control:mode`,
//! `{p}{fleet}:control:drained` (a set), `{p}{fleet}:control:hold`
//! (expires with the hold), `{p}{fleet}:control:seeded`; no expiry
//! otherwise. Each change is one `MULTI` that writes it and appends
//! `control` to the event stream `{p}{fleet}:events` (the same hash tag:
//! one Redis Cluster slot); the other replicas re-read the whole state
//! (`super::supervisor`), which also seeds it from the first
//! replica to connect when Redis holds none, and re-read it on every
//! reconnection.
//!
//! Channel names and modes only: nothing personal.

use std::{collections::BTreeSet, time::Duration};

use super::event_log::{self, Body, FLEET_GROUP};
use crate::cluster::{
    error::ClusterError,
    redis::{RedisConn, millis},
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

/// Writes a replica's control state only when Redis holds none (a fresh or
/// restarted Redis without persistence): the first replica to connect
/// seeds, the others read what it wrote. ARGV: mode, then drained names.
const SEED_SCRIPT: &str = "if redis.call('SET', KEYS[1], '1', 'NX') then \
       redis.call('SET', KEYS[2], ARGV[1]) \
       redis.call('DEL', KEYS[3]) \
       for i = 2, #ARGV do redis.call('SADD', KEYS[3], ARGV[i]) end \
       return 1 end return 0";

/// The fleet's control state on Redis: read whole, changed for every
/// replica at once.
#[derive(Debug, Clone)]
pub struct FleetControl {
    conn: RedisConn,
}

impl FleetControl {
    /// The control state on `conn`.
    pub(in crate::cluster) fn new(conn: RedisConn) -> Self {
        Self { conn }
    }

    /// `{p}{fleet}:control:<part>`: the seed script and the `MULTI`s touch
    /// them together, and the `MULTI`s append to the stream too.
    fn key(&self, part: &str) -> String {
        self.conn
            .tagged_key(FLEET_GROUP, &format!("control:{part}"))
    }

    /// The fleet's control state, read whole in one `MULTI`.
    pub async fn read(&self) -> Result<ControlState, ClusterError> {
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
    pub(in crate::cluster) async fn seed(&self, state: ControlState) -> Result<(), ClusterError> {
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

    /// Applies `change` for the whole fleet and tells the other replicas.
    /// Answers within the command timeout; an error means nothing was
    /// applied anywhere.
    pub async fn change(&self, change: ControlChange) -> Result<(), ClusterError> {
        self.conn.check_up()?;
        let append = event_log::append(&self.conn, Body::Control);
        let mut pipe = redis::pipe();
        pipe.atomic();
        let command = match &change {
            ControlChange::Mode(mode) => {
                pipe.set(self.key("mode"), mode).ignore();
                "MULTI SET XADD"
            }
            ControlChange::Drain(name) => {
                pipe.sadd(self.key("drained"), name).ignore();
                "MULTI SADD XADD"
            }
            ControlChange::Undrain(name) => {
                pipe.srem(self.key("drained"), name).ignore();
                "MULTI SREM XADD"
            }
            ControlChange::Hold(d) => {
                pipe.cmd("SET")
                    .arg(self.key("hold"))
                    .arg("1")
                    .arg("PX")
                    .arg(millis(*d))
                    .ignore();
                "MULTI SET XADD"
            }
        };
        pipe.cmd("SET").arg(self.key("seeded")).arg("1").ignore();
        pipe.add_command(append).ignore();
        self.conn
            .exec(command, move |mut c| async move {
                pipe.query_async::<()>(&mut c).await
            })
            .await
    }
}
