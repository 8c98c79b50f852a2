//! Which channel issued the 3D session of an appkey.
//!
//! `/3d/liveness` must go to the channel that issued the session token: the
//! token means nothing to another vendor, and a call there could finish the
//! appkey for nothing. The binding is keyed by the journey reference (a
//! hash of the appkey, never the appkey) and holds the issuing channel's
//! `Arc`, so a verification reaches that exact channel generation even
//! after a mode change, a drain, an open circuit or a reload that removed
//! or changed the channel.
//!
//! Bounded two ways: entries expire after the TTL (the appkey's useful
//! life), and past `max_entries` the oldest go first. Insertion order is
//! expiry order because the TTL is the same for all, so both sweeps pop
//! from the front of one queue (the crate's `TtlMap`, shared with the
//! journey events).

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::channel::Channel;
use crate::{domain::JourneyRef, ttl::TtlMap};

/// The bounded binding table: a `TtlMap` from journey to issuing channel.
/// Not synchronised: the router keeps it behind a short `std::sync::Mutex`.
#[derive(Debug)]
pub struct SessionBindings {
    map: TtlMap<JourneyRef, Arc<Channel>>,
}

impl SessionBindings {
    /// An empty table.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            map: TtlMap::new(ttl, max_entries),
        }
    }

    /// Binds `key` to `channel` (a new session replaces an older one).
    pub fn insert(&mut self, key: JourneyRef, channel: Arc<Channel>, now: Instant) {
        self.map.insert(key, channel, now);
    }

    /// The channel bound to `key`, unless expired.
    pub fn get(&self, key: &JourneyRef, now: Instant) -> Option<Arc<Channel>> {
        self.map.peek(key, now).cloned()
    }

    /// Removes the binding of `key` if it still points at `channel` (a newer
    /// session of the same appkey on another channel is left alone).
    pub fn remove_if(&mut self, key: &JourneyRef, channel: &Arc<Channel>) {
        self.map.remove_if(key, |bound| Arc::ptr_eq(bound, channel));
    }

    /// Live entries (expired ones may linger until the next insert).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{channels::config::ChannelSpec, domain::Appkey};

    fn key(s: &str) -> JourneyRef {
        JourneyRef::from_appkey(&Appkey::new(s))
    }

    fn chan(name: &str) -> Arc<Channel> {
        Arc::new(Channel::new(ChannelSpec::new(name, "http://x", 0)))
    }

    #[tokio::test(start_paused = true)]
    async fn bindings_expire_after_the_ttl() {
        let mut b = SessionBindings::new(Duration::from_secs(10), 10);
        let t = Instant::now();
        b.insert(key("a"), chan("p"), t);
        assert!(b.get(&key("a"), t + Duration::from_secs(9)).is_some());
        assert!(b.get(&key("a"), t + Duration::from_secs(10)).is_none());
        b.insert(key("b"), chan("p"), t + Duration::from_secs(11));
        assert_eq!(b.len(), 1, "the expired entry is swept on insert");
    }

    #[tokio::test(start_paused = true)]
    async fn the_oldest_binding_is_evicted_past_the_bound() {
        let mut b = SessionBindings::new(Duration::from_secs(60), 2);
        let t = Instant::now();
        b.insert(key("a"), chan("p"), t);
        b.insert(key("b"), chan("p"), t);
        // Re-binding `a` makes `b` the oldest.
        b.insert(key("a"), chan("q"), t);
        b.insert(key("c"), chan("p"), t);
        assert_eq!(b.len(), 2);
        assert!(b.get(&key("b"), t).is_none());
        assert_eq!(b.get(&key("a"), t).unwrap().name(), "q");
        assert!(b.get(&key("c"), t).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn removal_spares_a_newer_session_on_another_channel() {
        let mut b = SessionBindings::new(Duration::from_secs(60), 10);
        let t = Instant::now();
        let (p, q) = (chan("p"), chan("q"));
        b.insert(key("a"), Arc::clone(&q), t);
        b.remove_if(&key("a"), &p);
        assert!(b.get(&key("a"), t).is_some());
        b.remove_if(&key("a"), &q);
        assert!(b.get(&key("a"), t).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn rebinding_the_same_key_keeps_the_queue_bounded() {
        let mut b = SessionBindings::new(Duration::from_secs(60), 4);
        let t = Instant::now();
        let p = chan("p");
        for _ in 0..100 {
            b.insert(key("a"), Arc::clone(&p), t);
        }
        assert_eq!(b.len(), 1);
        assert!(b.map.queue_len() <= 8, "{}", b.map.queue_len());
    }
}
