//! How a record lies in the file: its key within its table, its expiry,
//! its sealed value, and what it counts against `store.max_bytes`.
//!
//! ```text
//! records   [len(table)][table][key]            -> [expires ms, u64 BE][sealed value]
//! expiries  [expires ms, u64 BE][len][table][key] -> ()     (swept by range, oldest first)
//! meta      "used-bytes" -> u64 BE; "key-check" -> a sealed constant
//! ```
//!
//! Every value is sealed (AES-256-GCM, the record's table and key as
//! associated data), a budget's count too: one rule with no exception
//! means no caller can forget to seal the one value that needed it. Keys
//! are in clear and must hold nothing personal (callers use references
//! and keyed digests, as on Redis).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redb::TableDefinition;

/// The records, by table and key.
pub(super) const RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
/// Each record's expiry, ordered by time, so a sweep reads only what expired.
pub(super) const EXPIRIES: TableDefinition<&[u8], ()> = TableDefinition::new("expiries");
/// The store's own facts.
pub(super) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// `meta` key: the bytes the live records count (see [`cost`]).
pub(super) const USED_BYTES: &str = "used-bytes";
/// `meta` key: a constant sealed under the store's key, opened at start.
pub(super) const KEY_CHECK: &str = "key-check";

/// What every record costs in the file beyond its key twice and its
/// stored value: the B-trees' pages are about two thirds full under
/// random keys, plus branch pages. Measured through the store with a
/// 64-byte key and a 300-byte value (592 bytes counted before this):
/// 954 bytes of allocated pages per record at 100,000 records.
const OVERHEAD: u64 = 360;

/// A named set of records (journeys, bindings, budget windows...): the
/// trait implementations each declare theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Table(&'static str);

impl Table {
    /// The table called `name` (at most 255 bytes; a const, so a name too
    /// long fails to compile where it is declared).
    pub const fn new(name: &'static str) -> Self {
        assert!(!name.is_empty() && name.len() <= u8::MAX as usize);
        Self(name)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The file's key of this table's record `key`.
    pub(super) fn record_key(self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.0.len() + key.len());
        out.push(self.0.len() as u8);
        out.extend_from_slice(self.0.as_bytes());
        out.extend_from_slice(key);
        out
    }
}

/// When a record stops living: absolute Unix time in milliseconds, so a
/// record read after a restart expires when it would have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expiry(u64);

impl Expiry {
    /// A record that lives until removed.
    pub const NEVER: Self = Self(u64::MAX);

    /// At `unix_ms` milliseconds after the epoch.
    pub const fn at_unix_ms(unix_ms: u64) -> Self {
        Self(unix_ms)
    }

    /// At `unix_secs` seconds after the epoch (a journey's record's
    /// creation plus its retention); before the epoch reads as expired.
    pub fn at_unix_secs(unix_secs: i64) -> Self {
        Self(u64::try_from(unix_secs).unwrap_or(0).saturating_mul(1000))
    }

    /// `ttl` from now.
    pub fn after(ttl: Duration) -> Self {
        Self(now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)))
    }

    /// Milliseconds after the epoch.
    pub fn unix_ms(self) -> u64 {
        self.0
    }

    /// True while the record lives at `now_ms`.
    pub(super) fn lives_at(self, now_ms: u64) -> bool {
        self.0 > now_ms
    }

    /// How long from `now_ms` until it expires.
    pub(super) fn remaining(self, now_ms: u64) -> Duration {
        Duration::from_millis(self.0.saturating_sub(now_ms))
    }
}

/// Unix milliseconds now.
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The stored form of a value sealed as `sealed`, expiring at `expires`.
pub(super) fn stored(expires: Expiry, sealed: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + sealed.len());
    out.extend_from_slice(&expires.0.to_be_bytes());
    out.extend_from_slice(sealed.as_bytes());
    out
}

/// A stored value's expiry and sealed text; `None` when it is too short or
/// not text (a damaged record).
pub(super) fn parse_stored(bytes: &[u8]) -> Option<(Expiry, &str)> {
    let (expires, sealed) = bytes.split_first_chunk::<8>()?;
    Some((
        Expiry(u64::from_be_bytes(*expires)),
        std::str::from_utf8(sealed).ok()?,
    ))
}

/// A stored value's expiry alone (counting and sweeping need no opening).
pub(super) fn stored_expiry(bytes: &[u8]) -> Option<Expiry> {
    bytes
        .first_chunk::<8>()
        .map(|expires| Expiry(u64::from_be_bytes(*expires)))
}

/// The `expiries` key of the record at `record_key` expiring at `expires`.
pub(super) fn expiry_key(expires: Expiry, record_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + record_key.len());
    out.extend_from_slice(&expires.0.to_be_bytes());
    out.extend_from_slice(record_key);
    out
}

/// The record key inside an `expiries` key.
pub(super) fn record_of_expiry_key(expiry_key: &[u8]) -> &[u8] {
    expiry_key.get(8..).unwrap_or_default()
}

/// The first file key past every key that starts with `prefix`; `None`
/// when no key is (the prefix is all `0xff`).
pub(super) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// What a record counts against `store.max_bytes`: its key twice (the
/// record and its expiry entry), its stored value and [`OVERHEAD`].
pub(super) fn cost(record_key: &[u8], stored: &[u8]) -> u64 {
    (2 * record_key.len() + stored.len()) as u64 + OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_do_not_share_keys_whatever_their_names() {
        // "ab" + "c" and "a" + "bc" must not collide.
        assert_ne!(
            Table::new("ab").record_key(b"c"),
            Table::new("a").record_key(b"bc")
        );
        let key = Table::new("journeys").record_key(b"j1");
        assert!(key.starts_with(&Table::new("journeys").record_key(b"")));
    }

    #[test]
    fn expiry_keys_sort_by_time_first() {
        let early = expiry_key(Expiry::at_unix_ms(1_000), b"zzz");
        let late = expiry_key(Expiry::at_unix_ms(2_000), b"aaa");
        assert!(early < late);
        assert_eq!(record_of_expiry_key(&late), b"aaa");
    }

    #[test]
    fn a_stored_value_gives_back_its_expiry_and_sealed_text() {
        let bytes = stored(Expiry::at_unix_ms(42), "c2VhbGVk");
        assert_eq!(
            parse_stored(&bytes),
            Some((Expiry::at_unix_ms(42), "c2VhbGVk"))
        );
        assert_eq!(stored_expiry(&bytes), Some(Expiry::at_unix_ms(42)));
        assert_eq!(parse_stored(b"short"), None);
    }

    #[test]
    fn a_prefix_range_ends_past_its_last_key() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }

    #[test]
    fn an_expiry_lives_until_its_instant_and_never_means_never() {
        let at = Expiry::at_unix_ms(10_000);
        assert!(at.lives_at(9_999));
        assert!(!at.lives_at(10_000));
        assert_eq!(at.remaining(9_000), Duration::from_secs(1));
        assert!(Expiry::NEVER.lives_at(now_ms()));
        assert_eq!(Expiry::at_unix_secs(-5), Expiry::at_unix_ms(0));
        assert_eq!(Expiry::at_unix_secs(3), Expiry::at_unix_ms(3_000));
    }
}
