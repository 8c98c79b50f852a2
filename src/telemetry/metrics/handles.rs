//! Series handles looked up once per label set.
//!
//! `prometheus_client`'s `Family` finds a series by hashing its labels
//! with SipHash under a lock, on every call; the hop records five series
//! a call. The handles it gives out (`Counter`, `Histogram`, `Gauge`) are
//! shared pointers to the series, so the gateway keeps them in a map with
//! a cheap hasher and asks the family only the first time a label set is
//! seen. The label sets come from the same fixed sets as the families'
//! (see the module above), so this map is bounded exactly as they are.

use std::{collections::HashMap, hash::Hash, sync::RwLock};

use crate::sync::{read, write};

/// Handles `V` by label set `K`, filled from the family on first use.
pub(super) struct Handles<K, V> {
    map: RwLock<HashMap<K, V, foldhash::fast::RandomState>>,
}

impl<K, V> Default for Handles<K, V> {
    fn default() -> Self {
        Self {
            map: RwLock::new(HashMap::default()),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Handles<K, V> {
    /// The handles of `key`, made by `lookup` (the family's
    /// `get_or_create`) the first time.
    pub(super) fn get(&self, key: &K, lookup: impl FnOnce(&K) -> V) -> V {
        if let Some(handles) = read(&self.map).get(key) {
            return handles.clone();
        }
        write(&self.map)
            .entry(key.clone())
            .or_insert_with(|| lookup(key))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::{counter::Counter, family::Family};

    use super::*;

    #[test]
    fn a_handle_updates_the_familys_series() {
        let family: Family<Vec<(String, String)>, Counter> = Family::default();
        let handles: Handles<Vec<(String, String)>, Counter> = Handles::default();
        let labels = vec![("method".to_owned(), "a".to_owned())];
        handles
            .get(&labels, |l| family.get_or_create(l).clone())
            .inc();
        handles
            .get(&labels, |_| unreachable!("looked up once"))
            .inc();
        assert_eq!(family.get_or_create(&labels).get(), 2);
    }
}
