//! The fleet's 3D session bindings: journey reference -> the name of the
//! channel that issued its session, so that any replica routes the
//! verification without the caller's hint.
//!
//! - [`MemoryBindings`]: one process. The router's own bindings hold the
//!   issuing channel generation, which a name cannot, so here every call
//!   is a no-op.
//! - [`RedisBindings`]: `{p}binding:<ref>` holds the channel name,
//!   expiring with `[routing] binding_ttl_secs`; an unbinding deletes it
//!   only if it still names the channel. A channel name only: nothing
//!   personal.

use std::time::Duration;

use super::{
    BoxFuture, ClusterError, ready,
    redis::{RedisConn, millis},
};
use crate::domain::JourneyRef;

/// Where the channel router shares which channel issued a 3D session.
/// Every method answers within the implementation's command timeout.
pub trait BindingStore: Send + Sync + 'static {
    /// Records that `channel` issued the 3D session of `journey`.
    fn bind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>>;

    /// The channel that issued the 3D session of `journey`, if known.
    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>>;

    /// Forgets, in the background, the binding of `journey` if it still
    /// names `channel`: the caller has its answer and waits for nothing
    /// (one process has nothing to forget, and starts nothing).
    fn release_session(&self, journey: &JourneyRef, channel: &str);
}

/// The bindings of one process: the router's own; nothing to share.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryBindings;

impl BindingStore for MemoryBindings {
    fn bind_session(&self, _: &JourneyRef, _: &str) -> BoxFuture<Result<(), ClusterError>> {
        ready(Ok(()))
    }

    fn bound_channel(&self, _: &JourneyRef) -> BoxFuture<Result<Option<String>, ClusterError>> {
        ready(Ok(None))
    }

    fn release_session(&self, _: &JourneyRef, _: &str) {}
}

/// The fleet's session bindings on Redis.
#[derive(Debug, Clone)]
pub struct RedisBindings {
    conn: RedisConn,
    ttl: Duration,
}

impl RedisBindings {
    /// The bindings on `conn`; each lives `ttl`.
    pub(super) fn new(conn: RedisConn, ttl: Duration) -> Self {
        Self { conn, ttl }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["binding:", journey.as_str()])
    }
}

impl BindingStore for RedisBindings {
    fn bind_session(
        &self,
        journey: &JourneyRef,
        channel: &str,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let conn = self.conn.clone();
        let key = self.key(journey);
        let channel = channel.to_owned();
        let ttl = millis(self.ttl);
        Box::pin(async move {
            conn.check_up()?;
            conn.set_px(key, channel, ttl).await
        })
    }

    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<String>, ClusterError>> {
        let conn = self.conn.clone();
        let key = self.key(journey);
        Box::pin(async move {
            conn.check_up()?;
            conn.get(key).await
        })
    }

    fn release_session(&self, journey: &JourneyRef, channel: &str) {
        if self.conn.check_up().is_err() {
            // Expires with its TTL.
            return;
        }
        let conn = self.conn.clone();
        let key = self.key(journey);
        let channel = channel.to_owned();
        tokio::spawn(async move {
            let _ = conn.delete_if(key, channel).await;
        });
    }
}
