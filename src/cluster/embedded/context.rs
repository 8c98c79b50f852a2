//! What every read and write of one store shares: where it is, its key,
//! its bound.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
};

use crate::cluster::encryption::{Digester, Sealer};

/// One open store's settings, shared by its reads and its writer.
#[derive(Debug)]
pub(super) struct Context {
    /// The store file, named in every error.
    pub path: PathBuf,
    /// Seals and opens every value.
    pub sealer: Sealer,
    /// Keys the digests of what the stores compare but never keep in
    /// clear (idempotent requests), from the same secret as `sealer`, so
    /// that they match across a restart.
    pub digester: Digester,
    /// `store.max_bytes`.
    pub max_bytes: u64,
    /// The bytes the live records count as of the last commit, for those
    /// who ask before they write whether a record would fit.
    pub used: AtomicU64,
}

impl Context {
    /// The bytes the live records count as of the last commit.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Notes the bytes counted after a commit.
    pub fn set_used(&self, used: u64) {
        self.used.store(used, Ordering::Relaxed);
    }

    /// A redb failure of this store.
    pub fn failed(&self, err: impl Into<redb::Error>) -> super::StoreError {
        super::StoreError::storage(&self.path, err)
    }
}
