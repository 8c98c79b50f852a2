//! A map whose entries expire after a fixed time and whose size is capped.
//!
//! The journey directory, the webhook dedupe set and the notice board all
//! remember things that a sender or caller controls; each must forget them
//! in time and never grow without bound, whatever the traffic.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
    time::Duration,
};

use tokio::time::Instant;

/// Entries expire `ttl` after their last insertion; when `max_entries` are
/// held, inserting evicts the oldest. Not synchronised: callers wrap it in
/// a mutex and hold the lock only for one call.
#[derive(Debug)]
pub(crate) struct TtlMap<K, V> {
    ttl: Duration,
    max_entries: usize,
    entries: HashMap<K, Entry<V>>,
    /// Insertion order: (key, generation). A key re-inserted later has a
    /// newer generation, so its stale queue items are skipped.
    order: VecDeque<(K, u64)>,
    next_generation: u64,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    generation: u64,
    expires_at: Instant,
}

impl<K: Hash + Eq + Clone, V> TtlMap<K, V> {
    /// An empty map. A `max_entries` of 0 is treated as 1.
    pub(crate) fn new(ttl: Duration, max_entries: usize) -> Self {
        Self {
            ttl,
            max_entries: max_entries.max(1),
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_generation: 0,
        }
    }

    /// Inserts or refreshes `key`. Returns true when the key was already
    /// present and unexpired (its value is replaced either way).
    pub(crate) fn insert(&mut self, key: K, value: V, now: Instant) -> bool {
        self.purge(now);
        let generation = self.next_generation;
        self.next_generation += 1;
        let entry = Entry {
            value,
            generation,
            expires_at: now + self.ttl,
        };
        let was_present = self.entries.insert(key.clone(), entry).is_some();
        self.order.push_back((key, generation));
        while self.entries.len() > self.max_entries {
            self.evict_oldest();
        }
        self.compact();
        was_present
    }

    /// Inserts `key` only when absent or expired. Returns true when it was
    /// inserted (the caller is the first to see it).
    pub(crate) fn insert_if_absent(&mut self, key: K, value: V, now: Instant) -> bool {
        if self.get(&key, now).is_some() {
            return false;
        }
        !self.insert(key, value, now)
    }

    /// The unexpired value of `key`.
    pub(crate) fn get(&mut self, key: &K, now: Instant) -> Option<&V> {
        self.purge(now);
        self.entries.get(key).map(|e| &e.value)
    }

    /// Entries held, expired ones included until the next purge.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops every expired entry. Expiry follows insertion order, so this
    /// stops at the first live entry.
    pub(crate) fn purge(&mut self, now: Instant) {
        while let Some((key, generation)) = self.order.front() {
            match self.entries.get(key) {
                Some(e) if e.generation == *generation => {
                    if e.expires_at > now {
                        break;
                    }
                    self.entries.remove(key);
                }
                // Stale: the key was evicted or re-inserted since.
                _ => {}
            }
            self.order.pop_front();
        }
    }

    fn evict_oldest(&mut self) {
        while let Some((key, generation)) = self.order.pop_front() {
            if self
                .entries
                .get(&key)
                .is_some_and(|e| e.generation == generation)
            {
                self.entries.remove(&key);
                return;
            }
        }
    }

    /// Re-insertions leave stale queue items behind; drop them once they
    /// outnumber the live entries, so the queue stays O(max_entries).
    fn compact(&mut self) {
        if self.order.len() > 2 * self.max_entries + 16 {
            let entries = &self.entries;
            self.order
                .retain(|(k, g)| entries.get(k).is_some_and(|e| e.generation == *g));
        }
    }

    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_ttl() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 10);
        m.insert("a", 1, t0);
        assert_eq!(m.get(&"a", t0 + Duration::from_secs(9)), Some(&1));
        assert_eq!(m.get(&"a", t0 + Duration::from_secs(10)), None);
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn reinsertion_refreshes_the_expiry() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 10);
        m.insert("a", 1, t0);
        assert!(m.insert("a", 2, t0 + Duration::from_secs(8)));
        assert_eq!(m.get(&"a", t0 + Duration::from_secs(15)), Some(&2));
        assert_eq!(m.get(&"a", t0 + Duration::from_secs(18)), None);
    }

    #[test]
    fn the_oldest_entry_is_evicted_at_capacity() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 2);
        m.insert("a", 1, t0);
        m.insert("b", 2, t0);
        m.insert("c", 3, t0);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get(&"a", t0), None);
        assert_eq!(m.get(&"c", t0), Some(&3));
    }

    #[test]
    fn insert_if_absent_admits_a_key_once_until_it_expires() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 10);
        assert!(m.insert_if_absent("a", (), t0));
        assert!(!m.insert_if_absent("a", (), t0 + Duration::from_secs(5)));
        assert!(m.insert_if_absent("a", (), t0 + Duration::from_secs(11)));
    }

    #[test]
    fn repeated_reinsertion_keeps_the_queue_bounded() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(3600), 4);
        for i in 0..10_000 {
            m.insert(i % 3, i, t0);
        }
        assert_eq!(m.len(), 3);
        assert!(m.queue_len() <= 2 * 4 + 16 + 1, "{}", m.queue_len());
    }

    #[test]
    fn eviction_skips_stale_queue_items_of_reinserted_keys() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 2);
        m.insert("a", 1, t0);
        m.insert("b", 2, t0);
        m.insert("a", 3, t0);
        m.insert("c", 4, t0);
        // "a" was refreshed after "b": "b" is the oldest live entry.
        assert_eq!(m.get(&"b", t0), None);
        assert_eq!(m.get(&"a", t0), Some(&3));
        assert_eq!(m.get(&"c", t0), Some(&4));
    }
}
