//! A map whose entries expire after a fixed time and whose size is capped.
//!
//! The journey directory, the webhook dedupe set, the notice board and the
//! 3D session bindings all remember things that a sender or caller
//! controls; each must forget them in time and never grow without bound,
//! whatever the traffic.

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
    /// Seeded per map (keys can come from callers and senders), and a few
    /// times cheaper per lookup than the standard SipHash.
    entries: HashMap<K, Entry<V>, foldhash::quality::RandomState>,
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
            entries: HashMap::default(),
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
            if !self.evict_oldest() {
                break;
            }
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

    /// The unexpired value of `key`, without purging (for readers that
    /// hold only `&self`; expired entries stay until the next purge).
    pub(crate) fn peek(&self, key: &K, now: Instant) -> Option<&V> {
        self.entries
            .get(key)
            .filter(|e| e.expires_at > now)
            .map(|e| &e.value)
    }

    /// Removes `key` if `pred` holds for its value. Returns true when it
    /// was removed.
    pub(crate) fn remove_if(&mut self, key: &K, pred: impl FnOnce(&V) -> bool) -> bool {
        let hit = self.entries.get(key).is_some_and(|e| pred(&e.value));
        if hit {
            // Its queue item is now stale and is skipped like any other.
            self.entries.remove(key);
        }
        hit
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

    /// Evicts the oldest live entry; false when there is none.
    fn evict_oldest(&mut self) -> bool {
        while let Some((key, generation)) = self.order.pop_front() {
            if self
                .entries
                .get(&key)
                .is_some_and(|e| e.generation == generation)
            {
                self.entries.remove(&key);
                return true;
            }
        }
        false
    }

    /// Re-insertions and removals leave stale queue items behind; drop them
    /// once the queue is twice the bound, so it stays O(max_entries). A
    /// compaction leaves at most `max_entries` items, so at least
    /// `max_entries + 1` inserts separate two of them: O(1) amortised.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.max_entries {
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
    fn remove_if_removes_only_when_the_predicate_holds() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 2);
        m.insert("a", 1, t0);
        assert!(!m.remove_if(&"a", |v| *v == 2));
        assert_eq!(m.peek(&"a", t0), Some(&1));
        assert!(m.remove_if(&"a", |v| *v == 1));
        assert_eq!(m.len(), 0);
        assert!(!m.remove_if(&"a", |_| true));
        // The removed key's stale queue item does not count against the bound.
        m.insert("b", 2, t0);
        m.insert("c", 3, t0);
        assert_eq!(m.len(), 2);
        assert_eq!(m.peek(&"b", t0), Some(&2));
        assert_eq!(m.peek(&"c", t0), Some(&3));
    }

    #[test]
    fn peek_hides_expired_entries_without_purging() {
        let t0 = Instant::now();
        let mut m = TtlMap::new(Duration::from_secs(10), 10);
        m.insert("a", 1, t0);
        assert_eq!(m.peek(&"a", t0 + Duration::from_secs(9)), Some(&1));
        assert_eq!(m.peek(&"a", t0 + Duration::from_secs(10)), None);
        assert_eq!(m.len(), 1, "peek does not purge");
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
