//! The writes, as they change one write transaction: insert once, put,
//! replace or remove on a condition, count a budget's windows, sweep.
//!
//! A write that is refused by the store's rules ([`StoreError::Taken`],
//! [`StoreError::Full`]) decides so before it changes anything, so the
//! other writes of its batch go on; any storage failure abandons the batch.

use std::time::Duration;

use zeroize::Zeroizing;

use redb::ReadableTable as _;

use super::{
    StoreError, Table,
    context::Context,
    record::{self, Expiry},
    sealing,
    windows::{Counted, Take, Window},
};

/// The tables of one write transaction, and the bytes its live records
/// count so far.
pub(super) struct Txn<'t> {
    pub records: redb::Table<'t, &'static [u8], &'static [u8]>,
    pub expiries: redb::Table<'t, &'static [u8], ()>,
    pub ctx: &'t Context,
    /// Unix milliseconds when the batch began: one instant for all its writes.
    pub now: u64,
    /// The bytes the live records count, this transaction's writes included.
    pub used: u64,
}

impl Txn<'_> {
    /// The stored bytes of the live record at `record_key`.
    fn live(&self, record_key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let stored = self
            .records
            .get(record_key)
            .map_err(|e| self.ctx.failed(e))?;
        Ok(stored
            .map(|v| v.value().to_vec())
            .filter(|v| record::stored_expiry(v).is_some_and(|e| e.lives_at(self.now))))
    }

    /// The value of the live record `key` of `table`, opened.
    fn live_value(
        &self,
        table: Table,
        key: &[u8],
    ) -> Result<Option<Zeroizing<Vec<u8>>>, StoreError> {
        let Some(stored) = self.live(&table.record_key(key))? else {
            return Ok(None);
        };
        let unopenable = || StoreError::Unopenable {
            path: self.ctx.path.clone(),
        };
        let (_, sealed) = record::parse_stored(&stored).ok_or_else(unopenable)?;
        sealing::open(&self.ctx.sealer, table, key, sealed)
            .map(Some)
            .ok_or_else(unopenable)
    }

    /// Refuses a new record of `cost` bytes when the store would pass
    /// `store.max_bytes`.
    fn room_for(&self, cost: u64) -> Result<(), StoreError> {
        if self.used.saturating_add(cost) > self.ctx.max_bytes {
            return Err(StoreError::Full {
                path: self.ctx.path.clone(),
                max_bytes: self.ctx.max_bytes,
            });
        }
        Ok(())
    }

    /// The stored form of `value` for `key` of `table`.
    fn sealed(&self, table: Table, key: &[u8], value: &[u8], expires: Expiry) -> Vec<u8> {
        record::stored(expires, &sealing::seal(&self.ctx.sealer, table, key, value))
    }

    /// Writes `stored` at `record_key`, replacing whatever was there (live
    /// or expired) with its expiry entry and its count.
    fn write(
        &mut self,
        record_key: &[u8],
        stored: &[u8],
        expires: Expiry,
    ) -> Result<(), StoreError> {
        let old = self
            .records
            .insert(record_key, stored)
            .map_err(|e| self.ctx.failed(e))?
            .map(|v| v.value().to_vec());
        if let Some(old) = old {
            self.forget_expiry(record_key, &old)?;
            self.used = self.used.saturating_sub(record::cost(record_key, &old));
        }
        self.expiries
            .insert(record::expiry_key(expires, record_key).as_slice(), ())
            .map_err(|e| self.ctx.failed(e))?;
        self.used = self.used.saturating_add(record::cost(record_key, stored));
        Ok(())
    }

    /// Removes the expiry entry of the record `old` stored at `record_key`.
    fn forget_expiry(&mut self, record_key: &[u8], old: &[u8]) -> Result<(), StoreError> {
        if let Some(expires) = record::stored_expiry(old) {
            self.expiries
                .remove(record::expiry_key(expires, record_key).as_slice())
                .map_err(|e| self.ctx.failed(e))?;
        }
        Ok(())
    }

    /// Removes the record at `record_key` and its expiry entry; true when
    /// one was there.
    fn delete(&mut self, record_key: &[u8]) -> Result<bool, StoreError> {
        let Some(old) = self.delete_record(record_key)? else {
            return Ok(false);
        };
        self.forget_expiry(record_key, &old)?;
        Ok(true)
    }

    /// Removes the record at `record_key` and its count; its stored bytes,
    /// when one was there.
    fn delete_record(&mut self, record_key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let old = self
            .records
            .remove(record_key)
            .map_err(|e| self.ctx.failed(e))?
            .map(|v| v.value().to_vec());
        if let Some(old) = &old {
            self.used = self.used.saturating_sub(record::cost(record_key, old));
        }
        Ok(old)
    }

    /// Records `value` under `key` of `table` until `expires`, once: a
    /// live record is never replaced ([`StoreError::Taken`]).
    pub fn insert(
        &mut self,
        table: Table,
        key: &[u8],
        value: &[u8],
        expires: Expiry,
    ) -> Result<(), StoreError> {
        let record_key = table.record_key(key);
        if self.live(&record_key)?.is_some() {
            return Err(StoreError::Taken);
        }
        let stored = self.sealed(table, key, value, expires);
        self.room_for(record::cost(&record_key, &stored))?;
        self.write(&record_key, &stored, expires)
    }

    /// Writes `value` under `key` of `table` until `expires`, over any
    /// record there; when `expected` is given, only over a live record
    /// holding it (false otherwise, nothing written).
    pub fn put(
        &mut self,
        table: Table,
        key: &[u8],
        value: &[u8],
        expires: Expiry,
        expected: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let current = self.live_value(table, key)?;
        if let Some(expected) = expected
            && current.as_deref().map(Vec::as_slice) != Some(expected)
        {
            return Ok(false);
        }
        let record_key = table.record_key(key);
        let stored = self.sealed(table, key, value, expires);
        if current.is_none() {
            self.room_for(record::cost(&record_key, &stored))?;
        }
        self.write(&record_key, &stored, expires)?;
        Ok(true)
    }

    /// Removes the record `key` of `table`; when `expected` is given, only
    /// a live record holding it. True when a record was removed.
    pub fn remove(
        &mut self,
        table: Table,
        key: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        if let Some(expected) = expected
            && self.live_value(table, key)?.as_deref().map(Vec::as_slice) != Some(expected)
        {
            return Ok(false);
        }
        self.delete(&table.record_key(key))
    }

    /// Counts one call in every window unless one is spent.
    pub fn take(&mut self, windows: &[Window]) -> Result<Take, StoreError> {
        // First every window's state, then the refusals, then the writes:
        // a refusal changes nothing.
        let mut counts = Vec::with_capacity(windows.len());
        for (index, w) in windows.iter().enumerate() {
            let (used, expires) = match self.live_value(w.table, &w.key)? {
                Some(count) => (decode_count(&count), self.expiry_of(w.table, &w.key)?),
                None => (
                    0,
                    Expiry::at_unix_ms(self.now.saturating_add(millis(w.length))),
                ),
            };
            if used >= w.limit {
                return Ok(Take::Refused {
                    window: index,
                    retry_after: expires.remaining(self.now),
                });
            }
            counts.push((used, expires));
        }
        let new: u64 = windows
            .iter()
            .zip(&counts)
            .filter(|(_, (used, _))| *used == 0)
            .map(|(w, (_, expires))| {
                let stored = self.sealed(w.table, &w.key, &1u64.to_be_bytes(), *expires);
                record::cost(&w.table.record_key(&w.key), &stored)
            })
            .sum();
        self.room_for(new)?;
        let mut granted = Vec::with_capacity(windows.len());
        for (w, (used, expires)) in windows.iter().zip(counts) {
            let stored = self.sealed(w.table, &w.key, &(used + 1).to_be_bytes(), expires);
            self.write(&w.table.record_key(&w.key), &stored, expires)?;
            granted.push(Counted {
                used: used + 1,
                resets_in: expires.remaining(self.now),
            });
        }
        Ok(Take::Granted(granted))
    }

    /// The expiry of the live record `key` of `table`.
    fn expiry_of(&self, table: Table, key: &[u8]) -> Result<Expiry, StoreError> {
        Ok(self
            .live(&table.record_key(key))?
            .and_then(|stored| record::stored_expiry(&stored))
            .unwrap_or(Expiry::at_unix_ms(self.now)))
    }

    /// Removes at most `limit` records expired by now, oldest first; how
    /// many it removed.
    pub fn sweep(&mut self, limit: usize) -> Result<usize, StoreError> {
        let until = record::expiry_key(Expiry::at_unix_ms(self.now.saturating_add(1)), &[]);
        let expired: Vec<Vec<u8>> = self
            .expiries
            .range::<&[u8]>(..until.as_slice())
            .map_err(|e| self.ctx.failed(e))?
            .take(limit)
            .map(|entry| entry.map(|(k, _)| k.value().to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| self.ctx.failed(e))?;
        for expiry_key in &expired {
            self.expiries
                .remove(expiry_key.as_slice())
                .map_err(|e| self.ctx.failed(e))?;
            // Never a live record, whatever its entry says.
            let record_key = record::record_of_expiry_key(expiry_key);
            if self.live(record_key)?.is_none() {
                self.delete_record(record_key)?;
            }
        }
        Ok(expired.len())
    }
}

/// A counter's stored count (a damaged one counts as spent: never more
/// calls than the limit).
fn decode_count(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or(u64::MAX)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
