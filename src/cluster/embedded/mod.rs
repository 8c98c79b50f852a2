//! The embedded store: the crash-safe file a gateway of one process keeps
//! its state in, so that a restart forgets nothing (`[store]`). It knows
//! bytes, not journeys: keyed tables of sealed values with an expiry each,
//! counters with windows, a bounded walk by key prefix. The store traits'
//! embedded tier maps each concern onto it, as their Redis tier maps onto
//! Redis keys.
//!
//! ```text
//! callers --get/scan/count-------------------------------> read.rs   (a snapshot, no wait)
//! callers --insert/put/replace/remove/take--> writer.rs --> ops.rs    (one transaction per batch,
//!                                 (bounded queue, Busy)                one fsync, then every answer)
//! sweeper.rs (every sweep_interval_secs) ---> writer.rs --> ops.rs    (expired records removed)
//! open.rs: directory 0700, file lock, key check, bytes counted
//! ```
//!
//! - [`config`]: the `[store]` section.
//! - [`record`]: the file's tables, a record's layout, [`Table`] and
//!   [`Expiry`], what a record costs against `store.max_bytes`.
//! - `sealing`: every value sealed under the store's key, bound to its
//!   table and key (`cluster::encryption`); `key_file`: the key when
//!   `[cluster]` names none.
//! - [`Window`], [`Take`]: budget windows, counted all or none.
//! - [`StoreError`]: each failure named with the path and its cause.
//!
//! The engine is redb: copy-on-write B-trees in one checksummed file,
//! locked against a second process, with serializable write transactions
//! (insert once, a budget's windows all or none, compare-and-set are each
//! one transaction), opened in milliseconds at a million records, pure
//! Rust with no dependency of its own. Measured against fjall (faster
//! commits, but no read-modify-write outside its transactional variant,
//! forty more crates, over a second to open a million records) and SQLite
//! (faster single commits, through SQL and a C library); each is far above
//! what one replica writes.

pub mod config;
mod context;
mod error;
mod key_file;
mod open;
mod ops;
mod read;
pub mod record;
mod sealing;
mod sweeper;
mod windows;
mod writer;

#[cfg(test)]
mod tests;

use std::{path::Path, sync::Arc, time::Duration};

use zeroize::Zeroizing;

pub use config::{Backend, StoreConfig};
pub use error::StoreError;
pub use read::Record;
pub use record::{Expiry, Table};
pub use windows::{Counted, Take, Window};

use crate::cluster::encryption::{Digester, Keys};

/// An open store. Cheap to clone; the file is closed (and its lock
/// released) when the last clone is dropped, after the writes already
/// queued are committed.
#[derive(Debug, Clone)]
pub struct Embedded {
    shared: Arc<Shared>,
}

/// What every clone of one store holds.
#[derive(Debug)]
struct Shared {
    // Dropped first: the writer finishes, then the file closes.
    writer: writer::Writer,
    db: Arc<redb::Database>,
    ctx: Arc<context::Context>,
}

impl Embedded {
    /// Opens the store `config` describes, creating its directory (`0700`),
    /// file and key file (`0600`) on first start. Values are sealed with
    /// `keys` (from the `[cluster]` secret key) when given, else with the
    /// key file's key. Fails, naming the path and the cause, on an unwritable
    /// path, a corrupt file, a file another process holds, or a key that
    /// is not the one the file was sealed under.
    pub fn open(config: &StoreConfig, keys: Option<Keys>) -> Result<Self, StoreError> {
        Self::open_with_queue(config, keys, writer::QUEUE_BOUND)
    }

    /// [`Embedded::open`] with `queue` writes let to wait for the disk.
    fn open_with_queue(
        config: &StoreConfig,
        keys: Option<Keys>,
        queue: usize,
    ) -> Result<Self, StoreError> {
        let opened = open::open(config, keys)?;
        let writer =
            writer::Writer::start(opened.db.clone(), opened.ctx.clone(), opened.used, queue)?;
        Ok(Self {
            shared: Arc::new(Shared {
                writer,
                db: opened.db,
                ctx: opened.ctx,
            }),
        })
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.shared.ctx.path
    }

    /// The keyed digester of this store's secret: digests it keeps match
    /// after a restart.
    pub fn digester(&self) -> Digester {
        self.shared.ctx.digester.clone()
    }

    /// `Ok` while `bytes` more of live records fit under
    /// `store.max_bytes` (as of the last commit), else
    /// [`StoreError::Full`]: asked before a record is worth paying for
    /// (an appkey bought for a journey the store then refuses is wasted).
    pub fn check_room(&self, bytes: u64) -> Result<(), StoreError> {
        let ctx = &self.shared.ctx;
        match ctx.used().saturating_add(bytes) > ctx.max_bytes {
            true => Err(StoreError::Full {
                path: ctx.path.clone(),
                max_bytes: ctx.max_bytes,
            }),
            false => Ok(()),
        }
    }

    /// Starts the task that removes expired records every `every`; it
    /// ends when the store is dropped.
    pub fn start_sweeper(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(sweeper::run(Arc::downgrade(&self.shared), every))
    }

    /// The live record `key` of `table`.
    pub fn get(&self, table: Table, key: &[u8]) -> Result<Option<Record>, StoreError> {
        read::get(&self.shared.db, &self.shared.ctx, table, key)
    }

    /// The live records of `table` whose keys start with `prefix`, in key
    /// order, at most `limit`, each with its key (without the table).
    pub fn scan(
        &self,
        table: Table,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Record)>, StoreError> {
        read::scan(&self.shared.db, &self.shared.ctx, table, prefix, limit)
    }

    /// How many live records of `table` have keys starting with `prefix`,
    /// counted up to `at_most`.
    pub fn count(&self, table: Table, prefix: &[u8], at_most: usize) -> Result<usize, StoreError> {
        read::count(&self.shared.db, &self.shared.ctx, table, prefix, at_most)
    }

    /// Records `value` under `key` of `table` until `expires`, once: a
    /// live record there is never replaced ([`StoreError::Taken`]), and a
    /// store at `store.max_bytes` records nothing new ([`StoreError::Full`]).
    /// Returns once the record is durable.
    pub async fn insert(
        &self,
        table: Table,
        key: &[u8],
        value: &[u8],
        expires: Expiry,
    ) -> Result<(), StoreError> {
        let (key, value) = owned(key, value);
        self.shared
            .writer
            .submit(move |txn| txn.insert(table, &key, &value, expires))
            .await
    }

    /// Writes `value` under `key` of `table` until `expires`, over any
    /// record there. Returns once it is durable.
    pub async fn put(
        &self,
        table: Table,
        key: &[u8],
        value: &[u8],
        expires: Expiry,
    ) -> Result<(), StoreError> {
        let (key, value) = owned(key, value);
        self.shared
            .writer
            .submit(move |txn| txn.put(table, &key, &value, expires, None).map(drop))
            .await
    }

    /// Writes `value` under `key` of `table` until `expires` only over a
    /// live record holding `expected`: true when it did.
    pub async fn replace(
        &self,
        table: Table,
        key: &[u8],
        expected: &[u8],
        value: &[u8],
        expires: Expiry,
    ) -> Result<bool, StoreError> {
        let (key, value) = owned(key, value);
        let expected = Zeroizing::new(expected.to_vec());
        self.shared
            .writer
            .submit(move |txn| txn.put(table, &key, &value, expires, Some(&expected)))
            .await
    }

    /// Removes the record `key` of `table`: true when one was there.
    pub async fn remove(&self, table: Table, key: &[u8]) -> Result<bool, StoreError> {
        let key = key.to_vec();
        self.shared
            .writer
            .submit(move |txn| txn.remove(table, &key, None))
            .await
    }

    /// Removes the record `key` of `table` only if it lives and holds
    /// `expected`: true when it did.
    pub async fn remove_if(
        &self,
        table: Table,
        key: &[u8],
        expected: &[u8],
    ) -> Result<bool, StoreError> {
        let (key, expected) = owned(key, expected);
        self.shared
            .writer
            .submit(move |txn| txn.remove(table, &key, Some(&expected)))
            .await
    }

    /// Counts one call in every window of `windows`, atomically: all of
    /// them, or none when one is spent. Returns once the counts are durable.
    pub async fn take(&self, windows: Vec<Window>) -> Result<Take, StoreError> {
        self.shared
            .writer
            .submit(move |txn| txn.take(&windows))
            .await
    }

    /// Removes at most `limit` expired records now; how many it removed.
    pub async fn sweep(&self, limit: usize) -> Result<usize, StoreError> {
        self.shared.writer.submit(move |txn| txn.sweep(limit)).await
    }
}

/// A write's key, and its value in a buffer wiped on drop.
fn owned(key: &[u8], value: &[u8]) -> (Vec<u8>, Zeroizing<Vec<u8>>) {
    (key.to_vec(), Zeroizing::new(value.to_vec()))
}
