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
//! from the front of one queue.

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use tokio::time::Instant;

use super::channel::Channel;
use crate::domain::JourneyRef;

#[derive(Debug)]
struct Entry {
    channel: Arc<Channel>,
    expires_at: Instant,
    seq: u64,
}

/// The bounded binding table. Not synchronised: the router keeps it behind
/// a short `std::sync::Mutex`.
#[derive(Debug)]
pub struct SessionBindings {
    ttl: Duration,
    max_entries: usize,
    map: HashMap<JourneyRef, Entry>,
    /// Insertion order; an item whose `seq` no longer matches the map's
    /// entry is stale (the key was re-bound or removed) and is skipped.
    order: VecDeque<(JourneyRef, u64)>,
    next_seq: u64,
}

impl SessionBindings {
    /// An empty table.
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            ttl,
            max_entries: max_entries.max(1),
            map: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    /// Binds `key` to `channel` (a new session replaces an older one).
    pub fn insert(&mut self, key: JourneyRef, channel: Arc<Channel>, now: Instant) {
        self.sweep(now);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((key.clone(), seq));
        self.map.insert(
            key,
            Entry {
                channel,
                expires_at: now + self.ttl,
                seq,
            },
        );
        while self.map.len() > self.max_entries {
            if !self.pop_oldest() {
                break;
            }
        }
        // Re-binding leaves stale queue items; keep the queue proportional.
        if self.order.len() > 2 * self.max_entries.max(self.map.len()) {
            let map = &self.map;
            self.order
                .retain(|(k, s)| map.get(k).is_some_and(|e| e.seq == *s));
        }
    }

    /// The channel bound to `key`, unless expired.
    pub fn get(&self, key: &JourneyRef, now: Instant) -> Option<Arc<Channel>> {
        self.map
            .get(key)
            .filter(|e| e.expires_at > now)
            .map(|e| Arc::clone(&e.channel))
    }

    /// Removes the binding of `key` if it still points at `channel` (a newer
    /// session of the same appkey on another channel is left alone).
    pub fn remove_if(&mut self, key: &JourneyRef, channel: &Arc<Channel>) {
        if self
            .map
            .get(key)
            .is_some_and(|e| Arc::ptr_eq(&e.channel, channel))
        {
            self.map.remove(key);
        }
    }

    /// Live entries (expired ones may linger until the next insert).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn sweep(&mut self, now: Instant) {
        while let Some((key, seq)) = self.order.front() {
            match self.map.get(key) {
                Some(e) if e.seq == *seq && e.expires_at > now => break,
                Some(e) if e.seq == *seq => {
                    self.map.remove(key);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    /// Evicts the oldest live entry; false when there is none.
    fn pop_oldest(&mut self) -> bool {
        while let Some((key, seq)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.seq == seq) {
                self.map.remove(&key);
                return true;
            }
        }
        false
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
        assert!(b.order.len() <= 8, "{}", b.order.len());
    }
}
