//! What every read and write of one store shares: where it is, its key,
//! its bound.

use std::path::PathBuf;

use crate::cluster::encryption::Sealer;

/// One open store's settings, shared by its reads and its writer.
#[derive(Debug)]
pub(super) struct Context {
    /// The store file, named in every error.
    pub path: PathBuf,
    /// Seals and opens every value.
    pub sealer: Sealer,
    /// `store.max_bytes`.
    pub max_bytes: u64,
}

impl Context {
    /// A redb failure of this store.
    pub fn failed(&self, err: impl Into<redb::Error>) -> super::StoreError {
        super::StoreError::storage(&self.path, err)
    }
}
