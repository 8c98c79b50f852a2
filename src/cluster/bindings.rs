//! 3D session bindings: journey reference -> the channel that issued its
//! session, so that `/3d/liveness` goes to that channel: the session token
//! means nothing to another vendor, and a call there could finish the
//! appkey for nothing.
//!
//! Three tiers, one store:
//!
//! - [`MemoryBindings`]: the bindings of one process, and each replica's
//!   own tier in a fleet. It holds the issuer itself (for the router, the
//!   channel generation's `Arc`), so a verification reaches that exact
//!   generation even after a mode change, a drain, an open circuit or a
//!   reload that removed or changed the channel. Bounded two ways: entries
//!   expire after the TTL (the appkey's useful life), and past
//!   `max_entries` the oldest go first (one queue serves both sweeps: the
//!   TTL is the same for all, so insertion order is expiry order).
//! - [`RedisBindings`]: the fleet's, wrapping a [`MemoryBindings`] as its
//!   own tier. `{p}binding:<ref>` holds the channel's name, expiring with
//!   `[routing] binding_ttl_secs`, so any replica routes the verification
//!   without the caller's hint; an unbinding deletes it only if it still
//!   names the channel. A channel name only: nothing personal.
//!
//! - [`EmbeddedBindings`]: a single replica's on the embedded store,
//!   wrapping a [`MemoryBindings`] as its own tier: table `bindings`
//!   holds the channel's name, so that after a restart a verification
//!   still goes to the channel of that name.
//!
//! The key is the journey reference (a hash of the appkey), never the
//! appkey.

mod embedded;

pub use embedded::EmbeddedBindings;

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

use super::{
    error::ClusterError,
    future::{BoxFuture, ready},
    redis::{RedisConn, millis},
};
use crate::{domain::JourneyRef, sync::lock, ttl::TtlMap};

/// What issued a 3D session, as a binding keeps it: the name the fleet
/// knows it by, and an identity of its own (the router's channel
/// generation) that only this process can hold.
pub trait Issuer: Clone + Send + Sync + 'static {
    /// The name the fleet shares.
    fn name(&self) -> &str;
    /// True when `self` and `other` are the same issuer (the same
    /// generation, not merely the same name).
    fn is(&self, other: &Self) -> bool;
}

/// Where a session is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound<I> {
    /// On this replica: the issuer itself.
    Here(I),
    /// By another replica of the fleet: the issuer's name only.
    Elsewhere(String),
}

/// The one store of 3D session bindings the channel router holds. Every
/// method answers within the implementation's command timeout.
pub trait BindingStore<I: Issuer>: Send + Sync + 'static {
    /// Records that `issuer` issued the 3D session of `journey` (a new
    /// session replaces an older one).
    fn bind_session(&self, journey: JourneyRef, issuer: I) -> BoxFuture<Result<(), ClusterError>>;

    /// Where the 3D session of `journey` is bound, if anywhere.
    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<Bound<I>>, ClusterError>>;

    /// Forgets the binding of `journey` if it still names `issuer` (a
    /// newer session of the same appkey elsewhere is left alone). The
    /// fleet's copy goes in the background: the caller has its answer.
    fn release_session(&self, journey: &JourneyRef, issuer: &I);

    /// Bindings held on this replica (expired ones may linger until the
    /// next insert).
    fn local_len(&self) -> usize;
}

/// The bindings of one process: a bounded, expiring table behind a short
/// lock.
#[derive(Debug)]
pub struct MemoryBindings<I> {
    map: Mutex<TtlMap<JourneyRef, I>>,
}

impl<I: Issuer> MemoryBindings<I> {
    /// An empty table whose entries live `ttl`, at most `max_entries`.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            map: Mutex::new(TtlMap::new(ttl, max_entries)),
        }
    }

    fn insert(&self, journey: JourneyRef, issuer: I) {
        lock(&self.map).insert(journey, issuer, Instant::now());
    }

    fn get(&self, journey: &JourneyRef) -> Option<I> {
        lock(&self.map).peek(journey, Instant::now()).cloned()
    }

    fn remove_if(&self, journey: &JourneyRef, issuer: &I) {
        lock(&self.map).remove_if(journey, |bound| bound.is(issuer));
    }
}

impl<I: Issuer> BindingStore<I> for MemoryBindings<I> {
    fn bind_session(&self, journey: JourneyRef, issuer: I) -> BoxFuture<Result<(), ClusterError>> {
        self.insert(journey, issuer);
        ready(Ok(()))
    }

    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<Bound<I>>, ClusterError>> {
        ready(Ok(self.get(journey).map(Bound::Here)))
    }

    fn release_session(&self, journey: &JourneyRef, issuer: &I) {
        self.remove_if(journey, issuer);
    }

    fn local_len(&self) -> usize {
        lock(&self.map).len()
    }
}

/// The fleet's session bindings on Redis, in front of this replica's own.
#[derive(Debug)]
pub struct RedisBindings<I> {
    local: MemoryBindings<I>,
    conn: RedisConn,
    ttl: Duration,
}

impl<I: Issuer> RedisBindings<I> {
    /// The bindings on `conn`, each living `ttl`, with `local` as this
    /// replica's tier.
    pub(super) fn new(conn: RedisConn, ttl: Duration, local: MemoryBindings<I>) -> Self {
        Self { local, conn, ttl }
    }

    fn key(&self, journey: &JourneyRef) -> String {
        self.conn.key_of(&["binding:", journey.as_str()])
    }
}

impl<I: Issuer> BindingStore<I> for RedisBindings<I> {
    /// Bound here at once; waits for the fleet's copy (at most the command
    /// timeout), so a verification sent to another replica right after
    /// finds it. An error leaves the local binding: this replica can still
    /// verify.
    fn bind_session(&self, journey: JourneyRef, issuer: I) -> BoxFuture<Result<(), ClusterError>> {
        let conn = self.conn.clone();
        let key = self.key(&journey);
        let channel = issuer.name().to_owned();
        let ttl = millis(self.ttl);
        self.local.insert(journey, issuer);
        Box::pin(async move {
            conn.check_up()?;
            conn.set_px(key, channel, ttl).await
        })
    }

    fn bound_channel(
        &self,
        journey: &JourneyRef,
    ) -> BoxFuture<Result<Option<Bound<I>>, ClusterError>> {
        if let Some(issuer) = self.local.get(journey) {
            return ready(Ok(Some(Bound::Here(issuer))));
        }
        let conn = self.conn.clone();
        let key = self.key(journey);
        Box::pin(async move {
            conn.check_up()?;
            Ok(conn.get(key).await?.map(Bound::Elsewhere))
        })
    }

    fn release_session(&self, journey: &JourneyRef, issuer: &I) {
        self.local.remove_if(journey, issuer);
        if self.conn.check_up().is_err() {
            // Expires with its TTL.
            return;
        }
        let conn = self.conn.clone();
        let key = self.key(journey);
        let channel = issuer.name().to_owned();
        tokio::spawn(async move {
            let _ = conn.delete_if(key, channel).await;
        });
    }

    fn local_len(&self) -> usize {
        self.local.local_len()
    }
}

#[cfg(test)]
mod tests;
