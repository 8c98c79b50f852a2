//! The reads: a point get, and a bounded walk of the records whose keys
//! start with a prefix (each owner's records, counted against its share).
//! Reads run on a snapshot beside the writer, never waiting for it.

use redb::ReadableDatabase as _;
use zeroize::Zeroizing;

use super::{
    StoreError, Table,
    context::Context,
    record::{self, Expiry, RECORDS},
    sealing,
};

/// A live record as read: its value opened, and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The value as it was written, wiped on drop.
    pub value: Zeroizing<Vec<u8>>,
    /// When the record stops living.
    pub expires: Expiry,
}

/// The live record `key` of `table`.
pub(super) fn get(
    db: &redb::Database,
    ctx: &Context,
    table: Table,
    key: &[u8],
) -> Result<Option<Record>, StoreError> {
    let txn = db.begin_read().map_err(|e| ctx.failed(e))?;
    let records = txn.open_table(RECORDS).map_err(|e| ctx.failed(e))?;
    let stored = records
        .get(table.record_key(key).as_slice())
        .map_err(|e| ctx.failed(e))?;
    match stored {
        Some(stored) => open_live(ctx, table, key, stored.value(), record::now_ms()),
        None => Ok(None),
    }
}

/// The live records of `table` whose keys start with `prefix`, in key
/// order, at most `limit`: each key (without the table) and its record.
pub(super) fn scan(
    db: &redb::Database,
    ctx: &Context,
    table: Table,
    prefix: &[u8],
    limit: usize,
) -> Result<Vec<(Vec<u8>, Record)>, StoreError> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    walk(db, ctx, table, prefix, |key, stored, now| {
        if let Some(record) = open_live(ctx, table, key, stored, now)? {
            out.push((key.to_vec(), record));
        }
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

/// How many live records of `table` have keys starting with `prefix`,
/// counted up to `at_most` (a share is checked, not a census taken).
pub(super) fn count(
    db: &redb::Database,
    ctx: &Context,
    table: Table,
    prefix: &[u8],
    at_most: usize,
) -> Result<usize, StoreError> {
    let mut n = 0;
    if at_most == 0 {
        return Ok(n);
    }
    walk(db, ctx, table, prefix, |_, stored, now| {
        if record::stored_expiry(stored).is_some_and(|e| e.lives_at(now)) {
            n += 1;
        }
        Ok(n < at_most)
    })?;
    Ok(n)
}

/// Calls `visit` with each record of `table` whose key starts with
/// `prefix` (key without the table, stored bytes, now) while it answers
/// true.
fn walk(
    db: &redb::Database,
    ctx: &Context,
    table: Table,
    prefix: &[u8],
    mut visit: impl FnMut(&[u8], &[u8], u64) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let now = record::now_ms();
    let start = table.record_key(prefix);
    let skip = table.record_key(&[]).len();
    let txn = db.begin_read().map_err(|e| ctx.failed(e))?;
    let records = txn.open_table(RECORDS).map_err(|e| ctx.failed(e))?;
    let range = match record::prefix_end(&start) {
        Some(end) => records.range::<&[u8]>(start.as_slice()..end.as_slice()),
        None => records.range::<&[u8]>(start.as_slice()..),
    }
    .map_err(|e| ctx.failed(e))?;
    for entry in range {
        let (key, stored) = entry.map_err(|e| ctx.failed(e))?;
        if !visit(&key.value()[skip..], stored.value(), now)? {
            break;
        }
    }
    Ok(())
}

/// The record stored as `stored` for `key` of `table`, if it lives at
/// `now`, opened.
fn open_live(
    ctx: &Context,
    table: Table,
    key: &[u8],
    stored: &[u8],
    now: u64,
) -> Result<Option<Record>, StoreError> {
    let unopenable = || StoreError::Unopenable {
        path: ctx.path.clone(),
    };
    let (expires, sealed) = record::parse_stored(stored).ok_or_else(unopenable)?;
    if !expires.lives_at(now) {
        return Ok(None);
    }
    let value = sealing::open(&ctx.sealer, table, key, sealed).ok_or_else(unopenable)?;
    Ok(Some(Record { value, expires }))
}
