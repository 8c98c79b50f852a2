//! What the verifier remembers of tokens it has checked, by their SHA-256
//! (never their text): the subject of each accepted one and the cause of
//! each refused one, so that a token sent again costs a hash and a lookup
//! instead of a signature check.
//!
//! Each entry holds for a time and only while the key set it was checked
//! against is the current one: a rotation that brings a token's key turns
//! a remembered refusal back into a full check. The memory is bounded: at
//! [`ENTRIES`], the outlived entries go, and if none has, every one does
//! (a flood of distinct tokens costs the flood its own signature checks,
//! never unbounded memory).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::time::Instant;

use super::jwks::KeySet;
use crate::sync;

/// Most tokens remembered at once, per memory.
pub const ENTRIES: usize = 10_000;

/// A token's SHA-256.
pub type Digest = [u8; 32];

struct Entry<V> {
    value: V,
    until: Instant,
    keys: Arc<KeySet>,
}

/// Tokens by digest, each with a `V` (a subject, a refusal).
pub struct TokenMemory<V> {
    entries: Mutex<HashMap<Digest, Entry<V>, foldhash::fast::RandomState>>,
}

impl<V> Default for TokenMemory<V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::default()),
        }
    }
}

impl<V: Clone> TokenMemory<V> {
    /// What is remembered of `digest`, if it still holds at `now` against
    /// the current `keys`.
    pub fn get(&self, digest: &Digest, now: Instant, keys: &Arc<KeySet>) -> Option<V> {
        let entries = sync::lock(&self.entries);
        let hit = entries.get(digest)?;
        (hit.until > now && Arc::ptr_eq(&hit.keys, keys)).then(|| hit.value.clone())
    }

    /// Remembers `value` for `digest` until `until`, as checked against
    /// `keys`.
    pub fn insert(
        &self,
        digest: Digest,
        value: V,
        now: Instant,
        until: Instant,
        keys: Arc<KeySet>,
    ) {
        let mut entries = sync::lock(&self.entries);
        if entries.len() >= ENTRIES {
            entries.retain(|_, e| e.until > now);
            if entries.len() >= ENTRIES {
                entries.clear();
            }
        }
        entries.insert(digest, Entry { value, until, keys });
    }
}
