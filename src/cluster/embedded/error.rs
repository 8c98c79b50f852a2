//! What the embedded store answers when it cannot do what was asked: each
//! failure names the store's path and the cause, never a key or a value
//! (keys are digests and references, values are sealed, and neither
//! belongs in a log line).

use std::path::PathBuf;

/// A failure of the embedded store, or a refusal by its rules.
///
/// Clone: one failed commit answers every caller whose write it carried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The directory or its file cannot be created or written (a read-only
    /// mount, a file where the directory should be, no permission).
    #[error("the store at {path} is not writable: {cause}")]
    Unwritable {
        /// The directory or file.
        path: PathBuf,
        /// What the system said.
        cause: String,
    },
    /// The file is not a store, or its checksums fail.
    #[error("the store file {path} is corrupt: {cause}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What failed to check.
        cause: String,
    },
    /// Another process (or another open in this one) holds the file: two
    /// gateways writing one store would each believe it owns the journeys.
    #[error("the store file {path} is locked by another process (two gateways on one store path)")]
    Locked {
        /// The file.
        path: PathBuf,
    },
    /// The key file cannot be read, created, or does not hold a key.
    #[error("the store's key file {path} is unusable: {cause}")]
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// Why, without the key.
        cause: String,
    },
    /// The records were sealed under another key than the one configured:
    /// opening the store would read every record as absent.
    #[error(
        "the store at {path} was sealed under another key (restore its key file, or set the previous key during a rotation)"
    )]
    WrongKey {
        /// The store file.
        path: PathBuf,
    },
    /// A record does not open under the configured key: it was changed
    /// on disk, or copied from another record.
    #[error("a record in {path} does not open under the store's key (tampered or misplaced)")]
    Unopenable {
        /// The store file.
        path: PathBuf,
    },
    /// The disk holding the store is full (or the file reached the
    /// process's file size limit).
    #[error("the disk holding the store {path} is full (or the file reached a size limit)")]
    DiskFull {
        /// The store file.
        path: PathBuf,
    },
    /// The live records reach `store.max_bytes`: new records are refused,
    /// and no live record is forgotten to make room.
    #[error(
        "the store at {path} holds store.max_bytes ({max_bytes} bytes) of live records: new records are refused until some expire"
    )]
    Full {
        /// The store file.
        path: PathBuf,
        /// The configured bound.
        max_bytes: u64,
    },
    /// More writes wait for the disk than the queue holds: the answer is
    /// prompt rather than a wait in an unbounded queue.
    #[error("the store at {path} has {queued} writes waiting for the disk; try again shortly")]
    Busy {
        /// The store file.
        path: PathBuf,
        /// The queue's bound.
        queued: usize,
    },
    /// A live record already holds the key: the first writer keeps it (the
    /// semantics of `ClusterError::Taken`).
    #[error("a record already lives under the key")]
    Taken,
    /// An earlier write failed on the disk (a full disk, an I/O error):
    /// the file may no longer be written until it is opened again, so the
    /// store refuses every call rather than guess what is on disk.
    #[error(
        "the store at {path} stopped after an I/O error (a full disk?): restart the gateway once its cause is fixed"
    )]
    Halted {
        /// The store file.
        path: PathBuf,
    },
    /// Another storage failure (an I/O error other than a full disk).
    #[error("the store at {path} failed: {cause}")]
    Io {
        /// The store file.
        path: PathBuf,
        /// What the system said.
        cause: String,
    },
    /// The store was closed, or its writer stopped after a failure.
    #[error("the store at {path} is closed")]
    Closed {
        /// The store file.
        path: PathBuf,
    },
}

impl StoreError {
    /// True for what a write decides before it changes anything (the
    /// record is taken, the store is full, the record it must read does
    /// not open): the other writes of its transaction go on. Any other
    /// error leaves the transaction in an unknown state, and the whole
    /// batch is abandoned.
    pub(super) fn leaves_the_batch_intact(&self) -> bool {
        matches!(
            self,
            Self::Taken | Self::Full { .. } | Self::Unopenable { .. }
        )
    }

    /// A redb failure of the store file at `path`, by what it means to
    /// the operator.
    pub(super) fn storage(path: &std::path::Path, err: impl Into<redb::Error>) -> Self {
        let path = path.to_owned();
        match err.into() {
            redb::Error::DatabaseAlreadyOpen => Self::Locked { path },
            redb::Error::Corrupted(cause) => Self::Corrupt { path, cause },
            redb::Error::UpgradeRequired(version) => Self::Corrupt {
                path,
                cause: format!(
                    "written in file format {version}, which this release does not read"
                ),
            },
            redb::Error::Io(e) => Self::io(path, &e),
            redb::Error::PreviousIo => Self::Halted { path },
            other => Self::Io {
                path,
                cause: other.to_string(),
            },
        }
    }

    /// An I/O error on `path`, by its kind.
    pub(super) fn io(path: PathBuf, e: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
                Self::DiskFull { path }
            }
            ErrorKind::PermissionDenied
            | ErrorKind::ReadOnlyFilesystem
            | ErrorKind::NotADirectory
            | ErrorKind::IsADirectory => Self::Unwritable {
                path,
                cause: e.to_string(),
            },
            // redb's word for a file that is not one of its stores.
            ErrorKind::InvalidData => Self::Corrupt {
                path,
                cause: e.to_string(),
            },
            _ => Self::Io {
                path,
                cause: e.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_named_by_what_the_operator_must_do() {
        let path = PathBuf::from("/var/lib/idgate/store.redb");
        let of = |kind| StoreError::io(path.clone(), &std::io::Error::from(kind));
        use std::io::ErrorKind as K;
        assert!(matches!(of(K::StorageFull), StoreError::DiskFull { .. }));
        assert!(matches!(
            of(K::ReadOnlyFilesystem),
            StoreError::Unwritable { .. }
        ));
        assert!(matches!(of(K::InvalidData), StoreError::Corrupt { .. }));
        assert!(matches!(of(K::Interrupted), StoreError::Io { .. }));
        let full = of(K::StorageFull).to_string();
        assert!(full.contains("/var/lib/idgate/store.redb"), "{full}");
    }

    #[test]
    fn a_full_store_names_the_key_that_bounds_it() {
        let e = StoreError::Full {
            path: PathBuf::from("idgate-data/store.redb"),
            max_bytes: 1024,
        };
        assert!(e.to_string().contains("store.max_bytes"), "{e}");
        assert!(e.leaves_the_batch_intact());
        assert!(
            !StoreError::Closed {
                path: PathBuf::new()
            }
            .leaves_the_batch_intact()
        );
    }
}
