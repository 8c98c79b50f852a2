//! `[store]`: where a gateway of one process keeps what it must not
//! forget across a restart, and how much of it.
//!
//! ```toml
//! [store]
//! backend = "embedded"          # or "memory": today's behaviour, forgotten on restart
//! path = "idgate-data"          # a directory, created 0700; relative to the working directory
//! max_bytes = 1073741824        # 1 GiB of live records (the file: up to twice); past it new ones are refused
//! key_file = "idgate-data/key"  # the sealing key, when no [cluster] secret key is set
//! sweep_interval_secs = 60      # how often expired records are removed
//! ```

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;

use crate::config_source::{
    ConfigError,
    bounds::{DurationUnit, check_duration},
};

/// The store file's name inside [`StoreConfig::path`].
pub const STORE_FILE: &str = "store.redb";

/// The key file's name inside [`StoreConfig::path`], when `key_file` is
/// not set.
pub const KEY_FILE: &str = "key";

/// Default [`StoreConfig::max_bytes`]: 1 GiB, about 1.1 million records
/// of a 300-byte value at their measured cost in the file (about 950
/// bytes each); the memory store's bound, 100,000 journeys, with an
/// idempotency record and budget windows each, takes under a third.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The smallest [`StoreConfig::max_bytes`]: 1 MiB.
pub const MIN_MAX_BYTES: u64 = 1 << 20;

/// `[store] backend`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A crash-safe file under `path` (the default).
    #[default]
    Embedded,
    /// In memory: forgotten on restart (tests, and operators who choose it).
    Memory,
}

/// `[store]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `embedded` (default) or `memory`.
    pub backend: Backend,
    /// The directory holding the store file (and, by default, its key
    /// file); relative paths are from the working directory.
    pub path: PathBuf,
    /// The most bytes the live records may take in the file: keys,
    /// sealed values, expiry entries and the B-trees' slack, counted per
    /// record. Past it new records are refused, and no live one is
    /// forgotten. The file grows by doubling (below 4 GiB) and keeps
    /// freed pages for reuse: provision twice this much disk.
    pub max_bytes: u64,
    /// The file holding the sealing key (Base64 of 32 bytes), created
    /// `0600` on first start; used only when `[cluster]` names no secret
    /// key. Default: `key` inside `path`.
    pub key_file: Option<PathBuf>,
    /// How often expired records are removed, in seconds.
    pub sweep_interval_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Embedded,
            path: PathBuf::from("idgate-data"),
            max_bytes: DEFAULT_MAX_BYTES,
            key_file: None,
            sweep_interval_secs: 60,
        }
    }
}

impl StoreConfig {
    /// Checks what types cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        if self.backend == Backend::Memory {
            return Ok(());
        }
        if self.path.as_os_str().is_empty() {
            return invalid("store.path must name a directory");
        }
        if self.max_bytes < MIN_MAX_BYTES {
            return invalid("store.max_bytes must be at least 1048576 (1 MiB)");
        }
        if self.sweep_interval_secs == 0 {
            return invalid("store.sweep_interval_secs must be at least 1");
        }
        check_duration(
            "store.sweep_interval_secs",
            self.sweep_interval_secs,
            DurationUnit::Secs,
        )
    }

    /// The store file.
    pub fn store_file(&self) -> PathBuf {
        self.path.join(STORE_FILE)
    }

    /// The key file, as configured or inside `path`.
    pub fn key_file(&self) -> PathBuf {
        self.key_file
            .clone()
            .unwrap_or_else(|| self.path.join(KEY_FILE))
    }

    /// How often expired records are removed.
    pub fn sweep_interval(&self) -> Duration {
        Duration::from_secs(self.sweep_interval_secs)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(text: &str) -> Result<StoreConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn an_absent_section_is_an_embedded_store_in_the_working_directory() {
        let c = parse("").unwrap();
        assert_eq!(c, StoreConfig::default());
        assert_eq!(c.backend, Backend::Embedded);
        assert_eq!(c.store_file(), Path::new("idgate-data/store.redb"));
        assert_eq!(c.key_file(), Path::new("idgate-data/key"));
        assert_eq!(c.max_bytes, 1 << 30);
        assert_eq!(c.sweep_interval(), Duration::from_secs(60));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn every_key_is_read_and_an_unknown_key_is_refused() {
        let c = parse(
            "backend = \"memory\"\npath = \"/var/lib/idgate\"\nmax_bytes = 2097152\nkey_file = \"/run/secrets/store-key\"\nsweep_interval_secs = 5\n",
        )
        .unwrap();
        assert_eq!(c.backend, Backend::Memory);
        assert_eq!(c.store_file(), Path::new("/var/lib/idgate/store.redb"));
        assert_eq!(c.key_file(), Path::new("/run/secrets/store-key"));
        assert_eq!(c.max_bytes, 2 << 20);
        assert_eq!(c.sweep_interval(), Duration::from_secs(5));
        let e = parse("max_size = 1").unwrap_err().to_string();
        assert!(e.contains("max_size"), "{e}");
        assert!(parse("backend = \"sqlite\"").is_err());
    }

    #[test]
    fn bounds_are_refused_by_key() {
        let refused = |c: StoreConfig| c.validate().unwrap_err().to_string();
        let base = StoreConfig::default();
        let e = refused(StoreConfig {
            max_bytes: 1000,
            ..base.clone()
        });
        assert!(e.contains("store.max_bytes"), "{e}");
        for secs in [0, 31 * 86_400] {
            let e = refused(StoreConfig {
                sweep_interval_secs: secs,
                ..base.clone()
            });
            assert!(e.contains("store.sweep_interval_secs"), "{e}");
        }
        let e = refused(StoreConfig {
            path: PathBuf::new(),
            ..base.clone()
        });
        assert!(e.contains("store.path"), "{e}");
        // The memory backend uses none of them.
        assert!(
            StoreConfig {
                backend: Backend::Memory,
                max_bytes: 0,
                ..base
            }
            .validate()
            .is_ok()
        );
    }
}
